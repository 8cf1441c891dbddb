"""The MCP server's resources, in process through the SDK's client: memories and the knowledge graph, for
their owner only (another user's memory or node is MCP's "Resource not found", -32002)."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from uuid import uuid4

import pytest
from mcp import Client, MCPError

from assistant.mcp_server import build_server
from assistant.mcp_server.access import RESOURCE_NOT_FOUND
from assistant.security import Principal
from assistant.services import Services
from assistant.testing.graph import ScriptedExtractor


def owner(services: Services, role: str = "user") -> Principal:
    return Principal(services.keys.owner_user_id(), role, "test")  # type: ignore[arg-type]


def read(services: Services, principal: Principal, uri: str) -> Any:
    async def main() -> Any:
        async with Client(build_server(services, principal)) as client:
            try:
                found = await client.read_resource(uri)
            except MCPError as exc:
                return exc
            return json.loads(found.contents[0].text)

    found = asyncio.run(main())
    if isinstance(found, MCPError):
        raise found
    return found


def listing(services: Services, principal: Principal) -> tuple[list[str], list[str]]:
    async def main() -> tuple[list[str], list[str]]:
        async with Client(build_server(services, principal)) as client:
            resources = [r.uri for r in (await client.list_resources()).resources]
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            return resources, templates

    return asyncio.run(main())


@pytest.fixture
def graphed(services: Services) -> Services:
    services.graph.extractor, services.graph.fallback = ScriptedExtractor(), None  # capitalised words: entities
    return services


def test_memories_are_listed_and_read_by_their_owner_only(services: Services) -> None:
    alice, reader = owner(services), owner(services, "read-only")
    memory = services.memory.add(str(alice.user_id), "Alice keeps her bike in the blue shed")
    resources, templates = listing(services, alice)
    assert f"memory://{memory.id}" in resources and "graph://snapshot" in resources
    assert set(templates) == {"memory://{id}", "graph://node/{id}"}
    assert read(services, alice, f"memory://{memory.id}")["content"] == "Alice keeps her bike in the blue shed"
    assert read(services, reader, f"memory://{memory.id}")["id"] == memory.id  # reading is for every role

    bob = Principal(uuid4(), "user", "bob")
    assert f"memory://{memory.id}" not in listing(services, bob)[0]
    for uri in (f"memory://{memory.id}", f"memory://{uuid4()}", "memory://", "nothing://here"):
        with pytest.raises(MCPError) as missing:
            read(services, bob, uri)
        assert missing.value.code == RESOURCE_NOT_FOUND and "blue shed" not in str(missing.value.data)


def test_the_graph_snapshot_and_a_node_for_their_owner_only(graphed: Services) -> None:
    services = graphed
    alice = owner(services)
    services.memory.add(str(alice.user_id), "Alice visited Lisbon with Bob")
    assert services.graph.wait_idle()
    snapshot = read(services, alice, "graph://snapshot")
    names = {n["name"]: n["id"] for n in snapshot["nodes"]}
    assert {"Alice", "Lisbon", "Bob"} <= set(names)
    node = read(services, alice, f"graph://node/{names['Lisbon']}")
    assert node["name"] == "Lisbon" and node["mention_count"] >= 1 and isinstance(node["facts"], list)

    bob = Principal(uuid4(), "user", "bob")
    assert read(services, bob, "graph://snapshot")["nodes"] == []
    with pytest.raises(MCPError) as missing:
        read(services, bob, f"graph://node/{names['Lisbon']}")
    assert missing.value.code == RESOURCE_NOT_FOUND and missing.value.data["code"] == "NOT_FOUND"


def test_no_graph_resources_without_the_graph(make_settings: Any, make_services: Any) -> None:
    services = make_services(make_settings(knowledge_graph={"enabled": False}))
    resources, templates = listing(services, owner(services))
    assert "graph://snapshot" not in resources and templates == ["memory://{id}"]
    with pytest.raises(MCPError) as missing:
        read(services, owner(services), "graph://snapshot")
    assert missing.value.code == RESOURCE_NOT_FOUND
