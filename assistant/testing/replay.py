"""A local HTTP server that replays recorded answers of the public APIs the tools call.

Open-Meteo, SearXNG, DuckDuckGo and transport.rest are public services; tests, the notebooks'
offline mode and the benchmarks use this stand-in instead. One ``ThreadingHTTPServer`` on a free
loopback port serves every service under its own path prefix, the name of its recordings folder:

    /open-meteo/api/v1/forecast          /open-meteo/geocoding/v1/search
    /searxng/search                      /duckduckgo/html/            /transport-rest/locations, /journeys

    with ReplayServer() as server:
        settings = Settings.load(**server.settings_overrides())   # [weather], [web_search], [transit]
        ...
        server.fail("searxng", status=503)     # or server.down("searxng"), server.delay("searxng", 2.0)
        server.requests                        # what it received: method, path, query, body

Each ``recordings/<service>/index.json`` lists routes, tried in order (the first match wins)::

    {"routes": [{"method": "GET", "path": "/geocoding/v1/search", "params": {"name": "Berlin"},
                 "file": "geocoding-berlin.json", "status": 200,
                 "content_type": "application/json; charset=utf-8"}]}

``path`` is relative to the service prefix (a trailing slash does not matter). ``params`` are matched
against the query string and, for form posts, the form fields: a string matches ignoring case,
accents and extra spaces; a list matches any of its strings; ``{"near": 52.52, "within": 0.01}``
matches a number close enough (coordinates). A route without ``params`` matches every request to
its path: that is how an unknown place gets the service's empty answer. A request no route matches
gets a 404 JSON body naming it.
"""

from __future__ import annotations

import json
import threading
import unicodedata
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qsl, urlsplit

DEFAULT_RECORDINGS = Path(__file__).with_name("recordings")
JSON_TYPE = "application/json; charset=utf-8"


def _fold(text: str) -> str:
    """Text compared ignoring case, accents and runs of spaces ("München  HBF" == "munchen hbf")."""
    decomposed = unicodedata.normalize("NFKD", text)
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).casefold().split())


def _param_matches(expected: Any, actual: str | None) -> bool:
    if actual is None:
        return False
    if isinstance(expected, dict):
        try:
            return abs(float(actual) - float(expected["near"])) <= float(expected.get("within", 0.01))
        except ValueError:
            return False
    if isinstance(expected, list):
        return any(_fold(str(e)) == _fold(actual) for e in expected)
    return _fold(str(expected)) == _fold(actual)


def _norm_path(path: str) -> str:
    return "/" + path.strip("/")


@dataclass(frozen=True)
class Route:
    """One recorded answer and the requests it answers."""

    service: str
    method: str
    path: str
    file: Path
    params: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    content_type: str = JSON_TYPE

    def matches(self, method: str, path: str, params: dict[str, str]) -> bool:
        return (method == self.method and _norm_path(path) == _norm_path(self.path)
                and all(_param_matches(v, params.get(k)) for k, v in self.params.items()))


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str  # the full path, with the service prefix
    query: dict[str, str]  # the last value of each query parameter
    body: str
    service: str

    @property
    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.body, keep_blank_values=True))


@dataclass(frozen=True)
class Failure:
    """A simulated failure of one service: an error status, a dropped connection, or a slow answer."""

    mode: str  # "status" | "down" | "delay"
    status: int = 503
    body: str | None = None
    content_type: str = JSON_TYPE
    seconds: float = 0.0


def load_routes(recordings_dir: Path) -> dict[str, list[Route]]:
    """Every service's routes from ``<recordings_dir>/<service>/index.json``; a missing file is an error."""
    routes: dict[str, list[Route]] = {}
    for index in sorted(recordings_dir.glob("*/index.json")):
        service = index.parent.name
        entries = json.loads(index.read_text(encoding="utf-8")).get("routes", [])
        routes[service] = []
        for entry in entries:
            file = index.parent / entry["file"]
            if not file.is_file():
                raise FileNotFoundError(f"{index}: recording {entry['file']} does not exist")
            routes[service].append(Route(service, entry.get("method", "GET").upper(), entry["path"], file,
                                         entry.get("params", {}), entry.get("status", 200),
                                         entry.get("content_type", JSON_TYPE)))
    if not routes:
        raise FileNotFoundError(f"no <service>/index.json under {recordings_dir}")
    return routes


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # http.server's naming
        self.server.replay._handle(self)

    do_POST = do_GET
    do_PUT = do_GET
    do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests and notebooks read ``ReplayServer.requests`` instead


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], replay: ReplayServer):
        self.replay = replay
        super().__init__(address, _Handler)


class ReplayServer:
    """Recorded answers on 127.0.0.1; use as a context manager or call ``start()`` / ``close()``."""

    def __init__(self, recordings_dir: Path | str = DEFAULT_RECORDINGS, host: str = "127.0.0.1", port: int = 0):
        self.recordings_dir = Path(recordings_dir)
        self.routes = load_routes(self.recordings_dir)
        self._address = (host, port)
        self._lock = threading.Lock()
        self._requests: list[ReceivedRequest] = []
        self._failures: dict[str, Failure] = {}
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- life cycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        if self._server is None:
            self._stopping.clear()
            self._server = _Server(self._address, self)
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="replay-server", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        if self._server is None:
            return
        self._stopping.set()  # ends simulated delays at once
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the replay server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def settings_overrides(self, timeout_secs: float = 5.0) -> dict[str, dict[str, Any]]:
        """``[weather]``, ``[web_search]`` and ``[transit]`` sections, enabled and pointing here."""
        url = self.url
        return {
            "weather": {"enabled": True, "backend": "open-meteo", "base_url": f"{url}/open-meteo/api",
                        "geocoding_url": f"{url}/open-meteo/geocoding", "timeout_secs": timeout_secs},
            "web_search": {"enabled": True, "backend": "searxng", "base_url": f"{url}/searxng",
                           "fallback": "duckduckgo", "duckduckgo_url": f"{url}/duckduckgo/html/",
                           "timeout_secs": timeout_secs},
            "transit": {"enabled": True, "backend": "transport-rest", "base_url": f"{url}/transport-rest",
                        "timeout_secs": timeout_secs},
        }

    # --- what it received, and simulated failures -----------------------------------------------

    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_to(self, service: str) -> list[ReceivedRequest]:
        return [r for r in self.requests if r.service == service]

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def fail(self, service: str, status: int = 503, body: str | None = None,
             content_type: str = JSON_TYPE) -> None:
        """Answer every request to ``service`` with ``status`` (and ``body``) until ``restore``."""
        self._set_failure(service, Failure("status", status, body, content_type))

    def down(self, service: str) -> None:
        """Drop every connection to ``service`` without an answer, as a crashed server would."""
        self._set_failure(service, Failure("down"))

    def delay(self, service: str, seconds: float) -> None:
        """Answer ``service``'s requests only after ``seconds`` (for timeouts)."""
        self._set_failure(service, Failure("delay", seconds=seconds))

    def restore(self, service: str | None = None) -> None:
        """Serve the recordings again: for ``service``, or every service when None."""
        with self._lock:
            if service is None:
                self._failures.clear()
            else:
                self._failures.pop(service, None)

    def _set_failure(self, service: str, failure: Failure) -> None:
        if service not in self.routes:
            raise KeyError(f"no recordings for service {service!r}; known: {', '.join(sorted(self.routes))}")
        with self._lock:
            self._failures[service] = failure

    # --- serving ---------------------------------------------------------------------------------

    def match(self, method: str, path: str, params: dict[str, str]) -> Route | None:
        """The route answering ``method`` on the full ``path`` with ``params``, if any."""
        service, _, rest = path.lstrip("/").partition("/")
        return next((r for r in self.routes.get(service, []) if r.matches(method, "/" + rest, params)), None)

    def _handle(self, handler: _Handler) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length).decode("utf-8", "replace") if length else ""
        service = parts.path.lstrip("/").partition("/")[0]
        received = ReceivedRequest(handler.command, parts.path, dict(parse_qsl(parts.query, keep_blank_values=True)),
                                   body, service)
        with self._lock:
            self._requests.append(received)
            failure = self._failures.get(service)
        if failure is not None and failure.mode == "down":
            handler.close_connection = True
            return  # no status line: the client sees the connection closed
        if failure is not None and failure.mode == "delay":
            self._stopping.wait(failure.seconds)
        if failure is not None and failure.mode == "status":
            text = failure.body if failure.body is not None else json.dumps(
                {"error": True, "reason": f"simulated failure of {service} (HTTP {failure.status})"})
            self._send(handler, failure.status, failure.content_type, text.encode())
            return
        params = {**received.query}
        if "x-www-form-urlencoded" in (handler.headers.get("Content-Type") or ""):
            params.update(received.form)
        route = self.match(received.method, received.path, params)
        if route is None:
            reason = f"no recording for {received.method} {handler.path}"
            self._send(handler, 404, JSON_TYPE, json.dumps({"error": True, "reason": reason}).encode())
            return
        self._send(handler, route.status, route.content_type, route.file.read_bytes())

    @staticmethod
    def _send(handler: _Handler, status: int, content_type: str, payload: bytes) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing to answer


def main() -> None:
    """``python -m assistant.testing.replay``: serve the recordings until interrupted."""
    with ReplayServer() as server:
        print(f"replaying {', '.join(sorted(server.routes))} at {server.url}")
        for section, values in server.settings_overrides().items():
            print(f"[{section}]")
            for key, value in values.items():
                print(f"{key} = {json.dumps(value)}")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
