"""Tools from typed functions: schema, validation, registry by capability; the memory tools."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from assistant.tools.base import ToolContext, ToolError, ToolRegistry, tool
from assistant.tools.memory_tools import MEMORY_TOOLS, recall_memory, store_memory


@tool("weather", icon="🌦")
def forecast(ctx: ToolContext, city: Annotated[str, Field(description="City name")], days: int = 1) -> dict:
    """Weather forecast for a city.

    More text that is not part of the description."""
    return {"city": city, "days": days, "user": str(ctx.user_id)}


def test_produces_and_requires_go_on_the_spec() -> None:
    @tool("tasks", produces=("id",))
    def listing(ctx: ToolContext) -> list:
        """List."""
        return []

    @tool("tasks", requires=[("item_id", "listing")])
    def finish(ctx: ToolContext, item_id: str) -> dict:
        """Finish."""
        return {}

    assert listing.spec.produces == ("id",) and listing.spec.requires == ()
    assert finish.spec.requires == (("item_id", "listing"),) and finish.spec.produces == ()
    assert forecast.spec.produces == () and forecast.spec.requires == ()
    with pytest.raises(TypeError, match="unknown parameters item"):
        @tool("tasks", requires=[("item", "listing")])
        def broken(ctx: ToolContext, item_id: str) -> dict:
            """Broken."""
            return {}


def test_schema_and_description_come_from_the_signature() -> None:
    spec = forecast.spec
    assert spec.name == "forecast" and spec.description == "Weather forecast for a city."
    assert spec.parameters["required"] == ["city"]
    assert spec.parameters["properties"]["city"] == {"description": "City name", "type": "string"}
    assert spec.parameters["properties"]["days"] == {"default": 1, "type": "integer"}
    assert spec.parameters["additionalProperties"] is False
    assert forecast.capability == "weather" and forecast.icon == "🌦"
    assert spec.openai()["function"]["name"] == "forecast"


def test_arguments_are_validated_and_passed() -> None:
    assert forecast(ToolContext("u1"), {"city": "Oslo", "days": 3}) == {"city": "Oslo", "days": 3, "user": "u1"}
    for bad in ({}, {"city": "Oslo", "days": "many"}, {"city": "Oslo", "colour": "red"}):
        with pytest.raises(ToolError, match="invalid arguments for forecast"):
            forecast(ToolContext("u1"), bad)


def test_registry_keeps_only_configured_capabilities() -> None:
    registry = ToolRegistry.build([forecast, *MEMORY_TOOLS], configured=lambda cap: cap == "memory")
    assert registry.names() == ["recall_memory", "store_memory"]
    assert "forecast" not in registry
    assert [t.name for t in registry.tools(["store_memory", "nope"])] == ["store_memory"]
    with pytest.raises(ValueError, match="already registered"):
        registry.register(store_memory)


def test_memory_tools_use_the_callers_store(make_settings, make_services) -> None:
    services = make_services(make_settings())
    ctx = services.tools.context("user-a")
    stored = store_memory(ctx, {"content": "Alice's favourite colour is teal", "memory_type": "preference"})
    assert stored["stored"] is True and stored["memory_type"] == "Preference"
    found = recall_memory(ctx, {"query": "favourite colour teal"})
    assert found[0]["content"] == "Alice's favourite colour is teal"
    assert recall_memory(services.tools.context("user-b"), {"query": "favourite colour teal"}) == []
    with pytest.raises(ToolError, match="memory_type"):
        store_memory(ctx, {"content": "x", "memory_type": "opinion"})
