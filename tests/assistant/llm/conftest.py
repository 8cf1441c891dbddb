"""A tiny HTTP server on 127.0.0.1 that replays an inference engine's responses."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Reply:
    status: int = 200
    content_type: str = "application/json"
    chunks: list[bytes] = field(default_factory=list)  # written and flushed one by one
    delay_secs: float = 0.0  # before anything is sent


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeEngine:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Reply] = {}
        self.requests: list[Recorded] = []
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw
                engine.requests.append(Recorded(self.command, self.path, dict(self.headers), body))
                reply = engine.routes.get((self.command, self.path))
                if reply is None:
                    reply = Reply(404, chunks=[b'{"error": "not found"}'])
                if reply.delay_secs:
                    time.sleep(reply.delay_secs)
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.end_headers()
                for chunk in reply.chunks:
                    self.wfile.write(chunk)
                    self.wfile.flush()

            do_GET = _handle
            do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    def json(self, method: str, path: str, body: Any, status: int = 200) -> None:
        self.routes[(method, path)] = Reply(status, "application/json", [json.dumps(body).encode()])

    def ndjson(self, path: str, lines: list[dict[str, Any]]) -> None:
        self.routes[("POST", path)] = Reply(
            200, "application/x-ndjson", [json.dumps(line).encode() + b"\n" for line in lines]
        )

    def sse(self, path: str, chunks: list[dict[str, Any] | str]) -> None:
        out = []
        for chunk in chunks:
            data = chunk if isinstance(chunk, str) else json.dumps(chunk)
            out.append(f"data: {data}\n\n".encode())
        self.routes[("POST", path)] = Reply(200, "text/event-stream", out)

    def slow(self, method: str, path: str, delay_secs: float) -> None:
        """Answer ``path`` only after ``delay_secs`` (to exercise client timeouts)."""
        self.routes[(method, path)] = Reply(200, chunks=[b"{}"], delay_secs=delay_secs)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def engine() -> Iterator[FakeEngine]:
    fake = FakeEngine()
    yield fake
    fake.close()


@pytest.fixture
def closed_port_url() -> str:
    """An address where nothing listens: connecting is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
