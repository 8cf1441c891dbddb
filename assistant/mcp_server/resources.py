"""Resources over MCP: the user's memories and knowledge graph, read-only (any role may read them).

- ``memory://{id}``: one memory as ``GET /v1/memories/{id}`` shows it (JSON); the list gives the newest
  :data:`LISTED_MEMORIES`;
- ``graph://snapshot``: the knowledge graph as ``GET /v1/knowledge/graph`` gives it (JSON: nodes, edges,
  counts; the configured visibility and size limits);
- ``graph://node/{id}``: a node, its facts (every edge touching it) and its source memories' ids.

Another user's memory or node, like an unknown one, is MCP's "Resource not found" (-32002).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from mcp import MCPError

from assistant.errors import AssistantError, NotFoundError
from assistant.mcp_server.access import RESOURCE_NOT_FOUND, as_mcp_error
from assistant.mcp_server.service_tools import memory_json
from assistant.security import Principal

LISTED_MEMORIES = 100
JSON = "application/json"
MEMORY = "memory://"
SNAPSHOT = "graph://snapshot"
NODE = "graph://node/"


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat()


class Resources:
    def __init__(self, services: Any):
        self.memory = getattr(services, "memory", None)
        self.graph = getattr(services, "graph", None)

    def listing(self, principal: Principal) -> list[types.Resource]:
        found: list[types.Resource] = []
        if self.graph is not None:
            found.append(types.Resource(uri=SNAPSHOT, name="knowledge graph", mime_type=JSON,
                                        description="The user's knowledge graph: nodes, edges, counts."))
        if self.memory is not None:
            for m in self.memory.list(str(principal.user_id), LISTED_MEMORIES):
                found.append(types.Resource(uri=f"{MEMORY}{m.id}", name=_title(m.summary or m.content),
                                            mime_type=JSON, description=f"A {m.memory_type.value} memory"))
        return found

    def templates(self) -> list[types.ResourceTemplate]:
        found = []
        if self.memory is not None:
            found.append(types.ResourceTemplate(uri_template=MEMORY + "{id}", name="memory", mime_type=JSON,
                                                description="One of the user's memories, by id."))
        if self.graph is not None:
            found.append(types.ResourceTemplate(uri_template=NODE + "{id}", name="knowledge-graph node",
                                                mime_type=JSON, description="A node of the user's knowledge "
                                                                            "graph with its facts."))
        return found

    def read(self, principal: Principal, uri: str) -> types.ReadResourceResult:
        user = str(principal.user_id)
        try:
            if uri.startswith(MEMORY) and self.memory is not None:
                value: Any = memory_json(self.memory.get(user, _ident(uri, MEMORY)))
                text = json.dumps(value, ensure_ascii=False)
            elif uri == SNAPSHOT and self.graph is not None:
                text = self.graph.graph_json(user).decode()
            elif uri.startswith(NODE) and self.graph is not None:
                text = json.dumps(self._node(user, _ident(uri, NODE)), ensure_ascii=False)
            else:
                raise MCPError(RESOURCE_NOT_FOUND, f"resource {uri} not found", {"uri": uri, "code": "NOT_FOUND"})
        except AssistantError as exc:
            raise as_mcp_error(exc, resource=True) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=JSON, text=text)])

    def _node(self, user: str, node_id: str) -> dict[str, Any]:
        node = self.graph.node(user, node_id)  # NotFoundError: unknown or another user's
        facts = self.graph.facts(user, node_id)
        return {
            "id": node.id, "name": node.name, "kind": getattr(node.kind, "value", node.kind),
            "aliases": list(node.aliases), "created_at": _iso(node.created_at), "last_seen": _iso(node.last_seen),
            "mention_count": node.mention_count,
            "facts": [{"id": e.id, "subject_id": e.subject_id, "relation": e.relation, "object_id": e.object_id,
                       "weight": e.weight, "valid_at": _iso(e.valid_at), "invalid_at": _iso(e.invalid_at),
                       "source_memory_ids": list(e.source_memory_ids)} for e in facts],
        }


def _ident(uri: str, prefix: str) -> str:
    ident = uri[len(prefix):].strip("/")
    if not ident or "/" in ident:
        raise NotFoundError(f"resource {uri} not found")
    return ident


def _title(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"
