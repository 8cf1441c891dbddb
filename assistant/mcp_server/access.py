"""Whose data an MCP request reaches, what its key may do, and the service's errors as MCP errors.

Over stdio the server is built for one :class:`~assistant.security.Principal`; over HTTP every request
carries its own API key, so the server is built with a function of the transport's request (the
authenticated principal ``api/mcp_http.py`` put in the request's state) and asks it on every message.

Roles: a ``read-only`` key lists and calls only the tools that change nothing (:data:`READ_ONLY_TOOLS`,
an allow-list: a new tool stays out until it is added) and reads resources; anything that writes
(a memory, a snippet, an insight's status, an approval request) is refused with an MCP error whose
``data.code`` is ``FORBIDDEN``. ``user`` and ``admin`` keys use their own user's data; no MCP
operation reaches another user's (another user's memory, snippet, insight or node is not found).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST

from assistant.errors import AssistantError
from assistant.security import Principal

# MCP's "Resource not found" (the specification's resources/read error).
RESOURCE_NOT_FOUND = -32002

# Tools that change nothing anywhere (no stored data, no message sent, no program run): the only ones
# a read-only key is offered. The assistant's registered tools that read, then this server's own.
READ_ONLY_TOOLS = frozenset({
    "get_weather", "search_web", "search_transit", "recall_memory", "list_reminders", "list_calendar_events",
    "list_tasks", "search_contacts", "get_contact", "search_emails",
    "memory_search", "snippet_list", "snippet_get", "insight_list",
})

PrincipalSource = Principal | Callable[[Any], Principal]
"""A fixed principal (stdio), or a function of the transport's request object (HTTP) returning it."""


def principal_of(source: PrincipalSource, request: Any) -> Principal:
    """The caller of one MCP message."""
    if isinstance(source, Principal):
        return source
    principal = source(request)
    if not isinstance(principal, Principal):  # the transport let an unauthenticated request through
        raise MCPError(INVALID_REQUEST, "unauthenticated: send an API key", {"code": "UNAUTHORIZED"})
    return principal


def changes_nothing(name: str) -> bool:
    return name in READ_ONLY_TOOLS


def refuse_read_only(principal: Principal, what: str) -> None:
    """An MCP error (``data.code`` FORBIDDEN) when a read-only key asks for ``what``, which writes."""
    if principal.read_only:
        raise MCPError(INVALID_REQUEST, f"this API key is read-only: {what} changes data and is not permitted",
                       {"code": "FORBIDDEN", "required_role": "user", "role": principal.role})


def as_mcp_error(exc: AssistantError, *, resource: bool = False) -> MCPError:
    """The service's error as an MCP error; ``data.code`` keeps the service's code (``NOT_FOUND``, ...).
    A resource that is not found (or is another user's) is MCP's -32002."""
    data: dict[str, Any] = {"code": exc.code, **(getattr(exc, "details", None) or {})}
    if exc.code == "NOT_FOUND":
        return MCPError(RESOURCE_NOT_FOUND if resource else INVALID_PARAMS, exc.message, data)
    if exc.code in ("VALIDATION_ERROR", "BAD_REQUEST"):
        return MCPError(INVALID_PARAMS, exc.message, data)
    if exc.code in ("FORBIDDEN", "UNAUTHORIZED", "CONFLICT"):
        return MCPError(INVALID_REQUEST, exc.message, data)
    return MCPError(INTERNAL_ERROR, exc.message, data)
