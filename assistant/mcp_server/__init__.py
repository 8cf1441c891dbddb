"""The MCP server: the assistant's tools, memories, snippets, dream insights and knowledge graph for one
user, over the Model Context Protocol (the official ``mcp`` SDK's low-level ``Server``).

- :mod:`.access`: whose data a request reaches (a fixed principal over stdio, the request's key over
  HTTP), the read-only rule, service errors as MCP errors;
- :mod:`.service_tools`: memory search/store, snippets, dream insights as tools;
- :mod:`.tools`: listing and calling tools (registered assistant tools and the service tools), with
  approvals, roles and the defence's fencing of results;
- :mod:`.resources`: ``memory://{id}`` and the knowledge graph (``graph://snapshot``, ``graph://node/{id}``);
- :mod:`.server`: :func:`build_server` and the stdio runner.

The package imports ``mcp`` (a protocol library), never a web framework: the HTTP transport's ASGI app
is built in ``api/mcp_http.py``.
"""

from assistant.mcp_server.server import build_server, run_stdio

__all__ = ["build_server", "run_stdio"]
