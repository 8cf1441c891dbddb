"""Pure ASGI middleware (no BaseHTTPMiddleware: streaming stays streaming, overhead stays low).

``RequestContext`` is outermost: it gives every request an ``X-Request-Id`` (keeping a valid
incoming UUID), counts it in the metrics and latency history, caps the body size, and turns any
exception that escaped the handlers into the 500 envelope, so no traceback ever leaks.
Every error they answer goes through :func:`api.errors.error_body` (OpenAI's shape on the
OpenAI-compatible routes, the envelope elsewhere). ``RateLimit`` applies the per-client-IP limit to every route except health, readiness and metrics.
``Authenticate`` checks the API key of every ``/v1/`` and ``/api/`` route (webhooks excepted:
they carry their own signature) before the body is read. ``JsonDepth`` refuses JSON bodies nested too deep (400). ``MethodCheck`` (innermost) answers 405
with the complete ``Allow`` header before routing, so a fixed path (``/v1/commands/catalog/audit``)
never falls into a ``/{id}`` route of another method.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import principal_from_headers
from api.errors import STATUS_OF, error_body
from assistant.errors import AssistantError
from assistant.services import Services

FEDERATED_SYNC = "/api/v1/federated/sync"  # its body limit is federated.max_payload_bytes

log = logging.getLogger("api")
UNLIMITED_PATHS = frozenset({"/health", "/ready", "/ready/all", "/metrics", "/metrics/prometheus"})


class PayloadTooLarge(Exception):
    pass


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def _valid_request_id(value: str | None) -> str | None:
    if not value:
        return None
    try:
        uuid.UUID(value)
    except ValueError:
        return None
    return value  # kept exactly as sent


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    payload = json.dumps(body).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *headers],
    })
    await send({"type": "http.response.body", "body": payload})


class RequestContext:
    def __init__(self, app: ASGIApp, services: Services):
        self.app = app
        self.services = services
        self.max_body = services.settings.server.max_body_bytes
        # a route whose body has its own limit (and the key naming it): a federated adapter update is larger
        self.route_limits = {FEDERATED_SYNC: (services.settings.federated.max_payload_bytes,
                                              "federated.max_payload_bytes")}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _valid_request_id(_header(scope, b"x-request-id")) or str(uuid.uuid4())
        scope.setdefault("state", {})["request_id"] = request_id
        rid_header = (b"x-request-id", request_id.encode())
        status = 500
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                started = True
                status = message["status"]
                MutableHeaders(scope=message)["X-Request-Id"] = request_id
            await send(message)

        metrics = self.services.metrics
        metrics.request_started()
        start = time.perf_counter()
        try:
            await self.app(scope, await self._capped(scope, receive), send_with_id)
        except PayloadTooLarge:
            if not started:
                limit, key = self._limit(scope)
                status, body = error_body(scope["path"], 413, "PAYLOAD_TOO_LARGE",
                                          f"request body exceeds {limit} bytes ({key})", request_id)
                await _send_json(send, status, body, [rid_header])
        except Exception:
            log.exception("unhandled error in %s %s (request %s)", scope["method"], scope["path"], request_id)
            if not started:
                status, body = error_body(scope["path"], 500, "INTERNAL_ERROR",
                                          "internal server error; quote the request id when reporting it", request_id)
                await _send_json(send, status, body, [rid_header])
        finally:
            duration_ms = (time.perf_counter() - start) * 1000
            metrics.request_finished(status, duration_ms, scope["path"])
            self.services.analytics.record("request", scope["path"], duration_ms, status < 500)


    async def _capped(self, scope: Scope, receive: Receive) -> Receive:
        """Refuse bodies over the limit before any handler reads them.

        A declared Content-Length is checked as is (the server enforces it); a chunked body is
        read here, up to the limit, and replayed to the application.
        """
        limit, _ = self._limit(scope)
        declared = _header(scope, b"content-length")
        if declared is not None:
            if declared.isdigit() and int(declared) > limit:
                raise PayloadTooLarge()
            return receive
        if _header(scope, b"transfer-encoding") is None:
            return receive
        return _replay(await _read_body(receive, limit), receive)

    def _limit(self, scope: Scope) -> tuple[int, str]:
        return self.route_limits.get(scope["path"], (self.max_body, "server.max_body_bytes"))


async def _read_body(receive: Receive, limit: int | None) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        total += len(message.get("body", b""))
        if limit is not None and total > limit:
            raise PayloadTooLarge()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives ``body`` once, then whatever ``receive`` gives (a disconnect)."""
    replay: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return replay.pop() if replay else await receive()

    return replayed


class JsonDepth:
    """400 ``BAD_REQUEST`` for a JSON body (POST, PUT, PATCH with Content-Type application/json,
    ``+json`` or none) nested deeper than ``MAX_JSON_DEPTH``, before any parser recurses into it.
    Inside ``Authenticate``: an unauthenticated request is 401 whatever its body."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH") or not _is_json(
                _header(scope, b"content-type")):
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive, None)  # already capped by RequestContext
        problem = json_depth_problem(body)
        if problem is not None:
            request_id = scope.get("state", {}).get("request_id", "")
            await _send_json(send, *error_body(scope["path"], 400, "BAD_REQUEST", problem, request_id), [])
            return
        await self.app(scope, _replay(body, receive), send)


MAX_JSON_DEPTH = 32
_JSON_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a whole string, or a bracket


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";")[0].strip().lower()
    return media in ("", "application/json") or media.endswith("+json")


def json_depth_problem(body: bytes) -> str | None:
    """Why ``body`` is refused before parsing: arrays and objects nested deeper than
    ``MAX_JSON_DEPTH`` (a parser would recurse once per level); None when it is not."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return None  # too few brackets to nest too deep (the common case, at C speed)
    depth = 0
    for token in _JSON_TOKENS.finditer(body):
        char = token.group()[:1]
        if char in (b"[", b"{"):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects"
        elif char in (b"]", b"}"):
            depth -= 1
    return None


class Authenticate:
    PREFIXES = ("/v1/", "/api/")
    EXEMPT = ("/v1/webhooks/",)

    def __init__(self, app: ASGIApp, services: Services):
        self.app = app
        self.keys = services.keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(self.PREFIXES) or path.startswith(self.EXEMPT):
            await self.app(scope, receive, send)
            return
        try:
            principal = principal_from_headers(
                self.keys, scope["method"], _header(scope, b"authorization"), _header(scope, b"x-api-key")
            )
        except AssistantError as exc:
            request_id = scope.get("state", {}).get("request_id", "")
            headers = [(b"www-authenticate", b"Bearer")] if exc.code == "UNAUTHORIZED" else []
            await _send_json(send, *error_body(path, STATUS_OF[exc.code], exc.code, exc.message, request_id), headers)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


class RateLimit:
    def __init__(self, app: ASGIApp, services: Services):
        self.app = app
        self.limiter = services.rate_limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.limiter is None or scope["type"] != "http" or scope["path"] in UNLIMITED_PATHS:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        decision = self.limiter.hit(client[0] if client else "unknown")
        headers = [
            (b"x-ratelimit-limit", str(decision.limit).encode()),
            (b"x-ratelimit-remaining", str(decision.remaining).encode()),
            (b"x-ratelimit-reset", str(decision.reset_secs).encode()),
        ]
        if not decision.allowed:
            request_id = scope.get("state", {}).get("request_id", "")
            status, body = error_body(
                scope["path"], 429, "RATE_LIMITED",
                f"rate limit of {decision.limit} requests per minute exceeded; retry in {decision.retry_after} s",
                request_id,
                retry_after=decision.retry_after,
            )
            await _send_json(send, status, body, [*headers, (b"retry-after", str(decision.retry_after).encode())])
            return

        async def send_with_limits(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *headers]
            await send(message)

        await self.app(scope, receive, send_with_limits)



def documented_methods(app: Any) -> dict[str, frozenset[str]]:
    """Path template -> methods, for every route in ``app``'s OpenAPI document, read from its routes:
    the table ``app.openapi()["paths"]`` gives (tests/api/test_api_http_shapes.py compares them),
    without building the whole document, 0.6 to 0.8 s for each new app."""
    from fastapi.routing import APIRoute

    try:  # FastAPI >= 0.16x keeps included routers nested; this walks them with their prefixes
        from fastapi.routing import iter_route_contexts

        routes: Any = iter_route_contexts(app.routes)
    except ImportError:  # pragma: no cover - older FastAPI flattens them into app.routes
        routes = app.routes
    table: dict[str, frozenset[str]] = {}
    for route in routes:
        if isinstance(getattr(route, "original_route", route), APIRoute) and route.include_in_schema:
            table[route.path_format] = table.get(route.path_format, frozenset()) | frozenset(route.methods or ())
    return table


class PathMethods:
    """Which methods each documented path supports, from a template -> methods table
    (:func:`documented_methods`); compiled on the first request."""

    def __init__(self, routes: Callable[[], dict[str, frozenset[str]]]):
        self.routes = routes
        self.paths: list[tuple[re.Pattern[str], int, frozenset[str]]] | None = None

    def _compile(self) -> list[tuple[re.Pattern[str], int, frozenset[str]]]:
        compiled = []
        for template, methods in self.routes().items():
            parts = template.split("/")
            regex = "/".join("[^/]+" if p.startswith("{") and p.endswith("}") else re.escape(p) for p in parts)
            literal = sum(1 for p in parts if p and not p.startswith("{"))
            compiled.append((re.compile(f"^{regex}$"), literal, methods))
        return compiled

    def allowed(self, path: str) -> frozenset[str] | None:
        """The methods of the documented paths matching ``path`` with the most literal segments
        (``/catalog/audit`` over ``/catalog/{entry_id}``); None for a path the document lacks."""
        if self.paths is None:
            self.paths = self._compile()
        best, methods = -1, frozenset[str]()
        for regex, literal, path_methods in self.paths:
            if not regex.match(path):
                continue
            if literal > best:
                best, methods = literal, path_methods
            elif literal == best:
                methods |= path_methods
        return methods or None


class MethodCheck:
    """405 ``METHOD_NOT_ALLOWED`` with ``Allow`` listing every method the path supports, decided
    from the documented routes before routing (undocumented paths are left to the router)."""

    def __init__(self, app: ASGIApp, routes: Callable[[], dict[str, frozenset[str]]]):
        self.app = app
        self.methods = PathMethods(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            allowed = self.methods.allowed(scope["path"])
            if allowed is not None and scope["method"] not in allowed:
                allow = ", ".join(sorted(allowed))
                request_id = scope.get("state", {}).get("request_id", "")
                message = f"method {scope['method']} is not allowed on {scope['path']}; allowed: {allow}"
                await _send_json(send, *error_body(scope["path"], 405, "METHOD_NOT_ALLOWED", message, request_id),
                                 [(b"allow", allow.encode())])
                return
        await self.app(scope, receive, send)
