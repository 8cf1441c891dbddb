"""The MCP server over HTTP at ``/mcp`` (the SDK's Streamable HTTP transport), authenticated with the
service's API keys.

Every request is authenticated here, before the SDK sees it, as the API's routes are
(``Authorization: Bearer <key>`` or ``X-API-Key: <key>``, :func:`api.deps.principal_from_headers`):
without a valid key it is 401 ``UNAUTHORIZED`` in the API's error envelope. MCP sends everything as
POST, so a read-only key is let through here and limited inside (:mod:`assistant.mcp_server.access`:
read-only tools and resources only). The server is built once, with a function giving the principal of
each request (put in the request's state), so each message acts for the key that sent it.

The transport is stateless (no MCP session kept between requests, so no session of one key can be
used with another) and answers JSON: only POST is served; GET (a stream for messages the server would
start, which a stateless server never sends) and DELETE (ending a session) are 405 with ``Allow: POST``,
as the transport's specification allows; a body that is not ``application/json`` is 400 ``BAD_REQUEST``
(the API's rule). Errors inside a JSON-RPC exchange (malformed JSON, an unknown method, bad params) are
the protocol's own JSON-RPC errors, which MCP clients read. The SDK's session manager runs
inside the app's lifespan (:meth:`McpHttp.run`); a request before it started is 503.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from api.deps import principal_from_headers
from api.errors import STATUS_OF, envelope
from assistant.errors import AssistantError, BadRequestError, ServiceUnavailableError
from assistant.mcp_server import build_server
from assistant.security import Principal
from assistant.services import Services

PATH = "/mcp"


class MethodNotAllowed(AssistantError):
    code = "METHOD_NOT_ALLOWED"


def request_principal(request: Any) -> Principal | None:
    """The principal this app put in the request's state (None: no HTTP request, or none found)."""
    scope = getattr(request, "scope", None) or {}
    return scope.get("state", {}).get("principal")


class McpHttp:
    """The ASGI app served at :data:`PATH` (see the module docstring)."""

    def __init__(self, services: Services):
        self.keys = services.keys
        self.server = build_server(services, request_principal)
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The SDK's session manager, for the app's lifespan (a new one each time: one runs only once)."""
        manager = StreamableHTTPSessionManager(self.server, stateless=True, json_response=True)
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        state = scope.setdefault("state", {})
        try:
            # "GET": a read-only key may use MCP (all of it is POST); what it may do is checked per operation
            state["principal"] = principal_from_headers(self.keys, "GET", headers.get("authorization"),
                                                        headers.get("x-api-key"))
            if scope.get("method") != "POST":
                raise MethodNotAllowed(f"method {scope.get('method')} is not allowed on {PATH}; allowed: POST")
            if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
                raise BadRequestError("the body of an MCP request is a JSON-RPC message: Content-Type must be "
                                      "application/json")
            manager = self.manager
            if manager is None:
                raise ServiceUnavailableError("the MCP server is not running (the app's lifespan has not started)")
        except AssistantError as exc:
            extra = {"www-authenticate": "Bearer"} if exc.code == "UNAUTHORIZED" else {}
            if exc.code == "METHOD_NOT_ALLOWED":
                extra = {"allow": "POST"}
            body = envelope(exc.code, exc.message, state.get("request_id", ""))
            await JSONResponse(body, STATUS_OF[exc.code], headers=extra)(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)
