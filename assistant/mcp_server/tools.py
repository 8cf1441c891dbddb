"""Tools over MCP: the registered assistant tools (the chat tool loop's registry, with their JSON schemas)
and this server's own (:mod:`.service_tools`), listed and called for one principal.

A call goes the way the chat's tool loop takes it (:mod:`assistant.chat.tool_loop`):

- a tool named in ``tool_calling.require_approval_for`` does not run: its arguments are validated, an
  approval request (kind ``tool_call``) is stored for the caller exactly as chat stores one, without a
  conversation, and the result says it awaits approval, with the request's id. An admin other than the
  requester decides it (``POST /v1/approvals/{id}/approve`` runs the tool once, as the requester, and
  keeps the result with the request: ``GET /v1/approvals/{id}``). With no approval store, the call is
  refused as a tool error;
- a read-only key is offered only :data:`~assistant.mcp_server.access.READ_ONLY_TOOLS` (and none that
  needs approval: a request is a write); calling another tool is an MCP error (``FORBIDDEN``);
- a tool's failure (bad arguments, a timeout after ``tool_calling.iteration_timeout_secs``, an error it
  raises) is the call's result with ``isError``, never a protocol error;
- what a tool brings from outside is inspected by the defence and returned fenced as data
  (:class:`~assistant.defence.wrap.PromptGuard`, the spans it flags neutralised): a registered tool's
  result as the chat's tool loop inspects it (the JSON of ``{"result": ...}``; a flagged result has no
  ``structuredContent``), searched memories and listed insights item by item as chat inspects memories
  (flagged fields neutralised in both the text and ``structuredContent``; ``_meta.defence`` names them).
  Snippets and what a call stored are the user's own text and come unfenced.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp_types import INVALID_PARAMS

from assistant.chat.tool_loop import tool_source
from assistant.defence.types import NoDefence, Source
from assistant.defence.wrap import PromptGuard, neutralised
from assistant.errors import AssistantError
from assistant.llm.base import ToolCall
from assistant.mcp_server.access import changes_nothing, refuse_read_only
from assistant.mcp_server.service_tools import SERVICE_TOOLS
from assistant.security import Principal
from assistant.tools.base import Tool, ToolContext, ToolError

MAX_RESULT_CHARS = 100_000  # a client's model reads it: far more than the chat loop's 4,000, still bounded
# The service store each of this server's own tools needs (the tool is not offered without it).
NEEDS = {"memory": "memory", "snippet": "snippets", "insight": "dream"}
# Own tools whose results are outside content for the model that reads them (the rest: what the user wrote).
OWN_SOURCES = {"memory_search": Source.MEMORY, "insight_list": Source.MEMORY}
# Their results' items are inspected one by one, these fields of each (a memory id as the verdict cache's key).
ITEM_FIELDS = {"memory_search": ("content", "summary"), "insight_list": ("title", "content")}


class ToolBridge:
    """The tools one installation offers over MCP (see the module docstring)."""

    def __init__(self, services: Any):  # assistant.services.Services (or a test's stand-in)
        self.services = services
        toolbox = getattr(services, "tools", None)
        self.toolbox = toolbox
        self.registered: dict[str, Tool] = {t.name: t for t in toolbox.registry.tools()} if toolbox else {}
        self.backends = {name: part for name in ("memory", "snippets", "dream")
                         if (part := getattr(services, name, None)) is not None}
        self.own: dict[str, Tool] = {t.name: t for t in SERVICE_TOOLS
                                     if NEEDS[t.name.split("_")[0]] in self.backends and t.name not in self.registered}
        settings = services.settings.tool_calling
        self.gated = frozenset(settings.require_approval_for)
        self.timeout = settings.iteration_timeout_secs

    def tools(self, principal: Principal) -> list[Tool]:
        """What ``principal`` is offered, by name."""
        found = {**self.registered, **self.own}
        if principal.read_only:
            found = {n: t for n, t in found.items() if changes_nothing(n) and n not in self.gated}
        return [found[n] for n in sorted(found)]

    def listing(self, principal: Principal) -> list[types.Tool]:
        return [types.Tool(name=t.name, description=self._description(t), input_schema=t.spec.parameters,
                           annotations=types.ToolAnnotations(read_only_hint=changes_nothing(t.name)))
                for t in self.tools(principal)]

    def _description(self, t: Tool) -> str:
        if t.name in self.gated and t.name in self.registered:
            return f"{t.spec.description} (Needs an administrator's approval: a call only requests it.)"
        return t.spec.description

    async def call(self, principal: Principal, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        tool = self.own.get(name) or self.registered.get(name)
        if tool is None:
            raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}", {"code": "NOT_FOUND"})
        if not changes_nothing(name) or name in self.gated:
            refuse_read_only(principal, f"the tool {name}")
        arguments = dict(arguments or {})
        user = str(principal.user_id)
        if name in self.gated and name in self.registered:
            return await asyncio.to_thread(self._request_approval, tool, user, arguments)  # stores a request
        context = ToolContext(user, self.backends) if name in self.own else self.toolbox.context(user)
        try:
            value = await asyncio.wait_for(asyncio.to_thread(tool, context, arguments), self.timeout)
        except TimeoutError:
            return _error("TIMEOUT", f"{name} did not finish within {self.timeout:.3g} s")
        except ToolError as exc:
            return _error("TOOL_ERROR", str(exc))
        except AssistantError as exc:  # a service tool's not found, conflict, validation error
            return _error(exc.code, exc.message)
        except Exception as exc:  # a failing tool is the caller's information, not a crashed server
            return _error("TOOL_ERROR", f"{name} failed: {type(exc).__name__}: {exc}")
        source = OWN_SOURCES.get(name) if name in self.own else tool_source(name)
        return await asyncio.to_thread(self._result, user, name, value, source)

    def _request_approval(self, tool: Tool, user: str, arguments: dict[str, Any]) -> types.CallToolResult:
        approvals = getattr(getattr(self.services, "chat", None), "approvals", None)
        try:
            tool.validate(arguments)  # an approver approves a call that can run
        except ToolError as exc:
            return _error("TOOL_ERROR", str(exc))
        if approvals is None:
            return _error("APPROVAL_REQUIRED", f"{tool.name} needs an approval, which cannot be requested here; "
                                               "it did not run")
        approval_id = approvals.gate(user, None, None)(ToolCall(f"mcp_{uuid.uuid4().hex}", tool.name, arguments))
        value = {"status": "approval_required", "approval_id": approval_id,
                 "message": f"{tool.name} needs an administrator's approval before it runs; it did not run. "
                            f"It waits for approval {approval_id}: once decided, GET /v1/approvals/{approval_id} "
                            "shows the outcome (and the result, if it ran)."}
        return types.CallToolResult(content=[types.TextContent(type="text", text=_dump(value))],
                                    structured_content=value)

    def _result(self, user: str, name: str, value: Any, source: Source | None) -> types.CallToolResult:
        if source is None:  # what the user wrote (snippets) or what the call stored: no outside content
            return types.CallToolResult(content=[types.TextContent(type="text", text=_dump(value))],
                                        structured_content={"result": value})
        chat = getattr(self.services, "chat", None)
        guard = PromptGuard(getattr(self.services, "defence", None) or NoDefence(), user,
                            self.services.settings.defence.neutralise, getattr(chat, "memory_verdicts", None))
        label = f"result of the tool {name}"
        if name in ITEM_FIELDS:  # memories and insights: each item's text on its own, as chat inspects them
            value, flagged = _inspect_items(guard, value, ITEM_FIELDS[name], source)
            return types.CallToolResult(content=[types.TextContent(type="text", text=guard.data(_dump(value), None,
                                                                                                label))],
                                        structured_content={"result": value},
                                        meta={"defence": {"flagged": bool(flagged), "flagged_ids": flagged}})
        text = _dump({"result": value})  # as the chat's tool loop inspects a tool's result
        verdict = guard.inspect(text, source, label)
        return types.CallToolResult(content=[types.TextContent(type="text", text=guard.data(text, verdict, label))],
                                    structured_content=None if verdict.flagged else {"result": value},
                                    meta={"defence": verdict.as_dict()})


def _inspect_items(guard: PromptGuard, value: Any, fields: tuple[str, ...],
                   source: Source) -> tuple[Any, list[str]]:
    """``value`` with each item's ``fields`` neutralised where the defence flags them (when the guard
    neutralises), and the ids of the flagged items. Items are memories or insights (a list, or the
    ``insights`` of a page)."""
    items = value if isinstance(value, list) else value.get("insights", [])
    flagged: list[str] = []
    cleaned = []
    for item in items:
        item = dict(item)
        for key in fields:
            text = item.get(key)
            if not isinstance(text, str) or not text:
                continue
            ref = str(item.get("id"))
            verdict = guard.inspect(text, source, f"{key} of {ref}", ref, f"{ref}:{key}")
            if verdict.flagged:
                flagged.append(ref)
                if guard.neutralise:
                    item[key] = neutralised(text, verdict)
        cleaned.append(item)
    return (cleaned if isinstance(value, list) else {**value, "insights": cleaned}), sorted(set(flagged))


def _dump(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "... (truncated)"


def _error(code: str, message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{code}: {message}")],
                                structured_content={"error": {"code": code, "message": message}}, is_error=True)
