"""build_server(services, principal) -> the MCP server (the SDK's low-level ``Server``), and run_stdio.

The low-level server rather than ``MCPServer`` (the SDK's decorator layer): the tools are the registered
assistant tools, whose names and JSON schemas exist at run time and differ per caller (a read-only key is
offered fewer), which the low-level ``tools/list`` and ``tools/call`` handlers serve directly.

``principal`` is a :class:`~assistant.security.Principal` (stdio: one user for the whole connection) or a
function of the transport's request giving the caller of each message (HTTP: ``api/mcp_http.py``
authenticates every request with the service's API keys). Blocking work (embedding, SQLite, a tool's
backend) runs in a worker thread; the event loop only carries the protocol.
"""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server

import assistant
from assistant.defence.wrap import DATA_RULE
from assistant.errors import AssistantError
from assistant.mcp_server.access import PrincipalSource, as_mcp_error, principal_of
from assistant.mcp_server.resources import Resources
from assistant.mcp_server.tools import ToolBridge

NAME = "assistant"
INSTRUCTIONS = (
    "The tools and resources of a personal assistant for one user: their memories (search with the relevance "
    "breakdown, store), snippets, dream insights, knowledge graph and the assistant's own tools. A call that "
    "needs an administrator's approval only requests it. " + DATA_RULE
)


def build_server(services: Any, principal: PrincipalSource) -> Server:
    """The MCP server of ``services`` for ``principal`` (see the module docstring)."""
    bridge = ToolBridge(services)
    resources = Resources(services)

    def caller(ctx: Any):  # noqa: ANN202 - Principal
        return principal_of(principal, ctx.request)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=bridge.listing(caller(ctx)))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await bridge.call(caller(ctx), params.name, params.arguments)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        who = caller(ctx)
        return types.ListResourcesResult(resources=await _blocking(resources.listing, who))

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        caller(ctx)
        return types.ListResourceTemplatesResult(resource_templates=resources.templates())

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        who = caller(ctx)
        return await asyncio.to_thread(resources.read, who, str(params.uri))

    return Server(NAME, version=assistant.__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource)


async def _blocking(func: Any, *args: Any) -> Any:
    try:
        return await asyncio.to_thread(func, *args)
    except AssistantError as exc:
        raise as_mcp_error(exc) from None


async def run_stdio(services: Any, principal: PrincipalSource) -> None:
    """Serve one MCP connection on this process's stdin/stdout until the client closes it."""
    from mcp.server.stdio import stdio_server

    server = build_server(services, principal)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
