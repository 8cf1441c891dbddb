"""A stand-in for the messaging platform's Graph Send API: a real HTTP server (stdlib
``http.server``) on a free loopback port that records every request and answers like the Send API
(``{"recipient_id", "message_id"}`` on ``/me/messages``; WhatsApp Cloud's ``{"messages": [{"id"}]}`` on
``/{phone_number_id}/messages``), or with a Graph error when told to refuse.

Import the fixture explicitly: ``from tests.integration.tools.graph_api_server import graph_api  # noqa: F401``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

_CLOUD_PATH = re.compile(r"/[^/]+/messages")


@dataclass
class GraphApi:
    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    refuse_with: int | None = None  # an HTTP status to answer instead of success
    received: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    api: GraphApi

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self.api.requests.append({"path": url.path, "query": parse_qs(url.query), "body": body,
                                  "content_type": self.headers.get("Content-Type"),
                                  "authorization": self.headers.get("Authorization")})
        if self.api.refuse_with is not None:
            self._answer(self.api.refuse_with, {"error": {"message": "(#100) No matching user found",
                                                          "type": "OAuthException", "code": 100}})
        elif url.path == "/me/messages":
            recipient = body.get("recipient", {}).get("id") if isinstance(body, dict) else None
            self._answer(200, {"recipient_id": recipient, "message_id": f"m_{len(self.api.requests)}"})
        elif _CLOUD_PATH.fullmatch(url.path):  # WhatsApp Cloud style: /{phone_number_id}/messages
            to = body.get("to") if isinstance(body, dict) else None
            self._answer(200, {"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}],
                               "messages": [{"id": f"wamid.{len(self.api.requests)}"}]})
        else:
            self._answer(404, {"error": {"message": f"unknown path {url.path}", "code": 803}})
        self.api.received.set()

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass


@pytest.fixture
def graph_api() -> Iterator[GraphApi]:
    api = GraphApi("")
    handler = type("GraphHandler", (_Handler,), {"api": api})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)  # port 0: the kernel picks a free one
    api.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
