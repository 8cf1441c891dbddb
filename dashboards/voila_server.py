"""``python -m dashboards.voila_server ARGS``: Voila (``python -m voila ARGS``) with one race fixed.

Why this exists: a notebook cell that shows an ``ipywidgets`` Output widget (every ``@interact`` does)
sometimes never finishes rendering in Voila: the page stays at "Executing n of m" with an idle kernel.
nbclient waits for the cell's ``execute_reply`` with ``shell_channel.get_msg(timeout=None)``, one await
on the shell socket's readiness, while its Output-widget stand-in sends comm messages on the same
socket from the task that reads IOPub. A ZeroMQ socket signals readiness edge-triggered; the send can
consume the edge the waiting poll needed, and the reply that has arrived is never read. Measured here on
notebook 02 with ``curl``: 1 run in 3 hung, and so did 1 in 8 of a three-cell notebook with one
``@interact``; through this launcher, 30 of 30 renders finished (nbclient issue #312 describes the same
hang; its proposed fix was not merged).

The fix: in this process, a wait without a timeout on an asyncio kernel channel is a loop of bounded
waits (:data:`SLICE_S`), each of which checks the socket's state afresh, so a message that has arrived
is read within one slice. A wait with a timeout, and every other call, is unchanged. Nothing else of
Voila is touched; ``assistant voila`` execs this module instead of ``python -m voila``.
"""

from __future__ import annotations

import sys
import typing as t
from queue import Empty

SLICE_S = 0.5  # a missed wake-up costs at most this long


def patch_channels() -> None:
    """Make ``AsyncZMQSocketChannel.get_msg(timeout=None)`` wait in bounded slices (idempotent)."""
    from jupyter_client.channels import AsyncZMQSocketChannel

    original = AsyncZMQSocketChannel.get_msg
    if getattr(original, "_sliced", False):
        return

    async def get_msg(self: AsyncZMQSocketChannel, timeout: float | None = None) -> dict[str, t.Any]:
        if timeout is not None:
            return await original(self, timeout)
        while True:
            try:
                return await original(self, SLICE_S)
            except Empty:
                continue

    get_msg._sliced = True  # type: ignore[attr-defined]
    AsyncZMQSocketChannel.get_msg = get_msg  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> None:
    patch_channels()
    from voila.app import main as voila_main

    sys.argv = ["voila", *(sys.argv[1:] if argv is None else argv)]
    voila_main()


if __name__ == "__main__":
    main()
