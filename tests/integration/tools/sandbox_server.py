"""A TCP server on a free loopback port of the host that records every connection it accepts: the
target of the sandbox's network-escape test (a program in the sandbox must not reach it); and
:func:`sandboxed_pids`, the host processes a runner's sandboxes left behind.

Import the fixture explicitly:
``from tests.integration.tools.sandbox_server import host_listener_fixture  # noqa: F401`` (it is
named ``host_listener``).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from assistant.tools.sandbox import BubblewrapRunner


def sandboxed_pids(runner: BubblewrapRunner, program: str) -> list[int]:
    """Host pids of programs still running from ``runner``'s sandboxes: as root, those owned by its
    uids (other test processes may be running sandboxes too); otherwise those whose command line
    names ``program`` (e.g. ``/code/main.py``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if runner.privileged:
                mine = runner.uids.base <= entry.stat().st_uid < runner.uids.base + 1000
            else:
                mine = program.encode() in (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if mine:
            found.append(int(entry.name))
    return found


@dataclass
class HostListener:
    port: int
    accepted: list[tuple[str, int]] = field(default_factory=list)


def _serve(server: socket.socket, listener: HostListener, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            conn, peer = server.accept()
        except TimeoutError:
            continue
        except OSError:  # closed at teardown
            return
        listener.accepted.append(peer)
        with conn:
            conn.sendall(b"hello from the host\n")


@pytest.fixture(name="host_listener")
def host_listener_fixture() -> Iterator[HostListener]:
    """A listening socket on 127.0.0.1 (a free port) served by a thread; stopped afterwards."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    listener = HostListener(server.getsockname()[1])
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(server, listener, stop), daemon=True)
    thread.start()
    with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as probe:  # it really listens
        assert probe.recv(64) == b"hello from the host\n"
    listener.accepted.clear()
    try:
        yield listener
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()
