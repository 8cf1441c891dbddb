"""A TCP server on a free loopback port of the host that records every connection it accepts: the
target of the sandbox's network-escape test (a program in the sandbox must not reach it).

Import the fixture explicitly:
``from tests.integration.tools.sandbox_server import host_listener_fixture  # noqa: F401`` (it is
named ``host_listener``).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest


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
