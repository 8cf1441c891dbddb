"""The Voila launcher's fix: a wait without a timeout on an asyncio kernel channel is a loop of bounded waits.

The race itself (a send on the shell socket consuming the edge a waiting poll needed) is timing-dependent;
tests/integration/test_voila_browser.py renders the notebooks with ``@interact`` through the launcher.
Here: a real pair of ZeroMQ sockets, a message that is only sent after several slices have passed, and the
calls with a timeout left as they were.
"""

from __future__ import annotations

import asyncio
from queue import Empty

import pytest
import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session

from dashboards import voila_server


@pytest.fixture
def channel_pair(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(voila_server, "SLICE_S", 0.05)
    original = AsyncZMQSocketChannel.get_msg
    voila_server.patch_channels()
    voila_server.patch_channels()  # idempotent: the second call does not wrap the wrapper
    assert getattr(AsyncZMQSocketChannel.get_msg, "_sliced", False)
    ctx = zmq.asyncio.Context()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    port = a.bind_to_random_port("tcp://127.0.0.1")
    b.connect(f"tcp://127.0.0.1:{port}")
    session = Session()
    try:
        yield AsyncZMQSocketChannel(b, session), a, session
    finally:
        AsyncZMQSocketChannel.get_msg = original  # type: ignore[method-assign]
        a.close(0)
        b.close(0)
        ctx.term()


def test_a_wait_without_timeout_outlasts_many_slices_and_returns_the_message(channel_pair) -> None:
    channel, peer, session = channel_pair

    async def main() -> dict:
        async def later() -> None:
            await asyncio.sleep(0.4)  # eight slices
            session.send(peer, "execute_reply", {"status": "ok"})

        sender = asyncio.ensure_future(later())
        msg = await channel.get_msg()
        await sender
        return msg

    msg = asyncio.run(main())
    assert msg["msg_type"] == "execute_reply" and msg["content"] == {"status": "ok"}


def test_a_wait_with_a_timeout_still_times_out(channel_pair) -> None:
    channel, _, _ = channel_pair
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=0.1))
