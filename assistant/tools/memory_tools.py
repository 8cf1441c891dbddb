"""store_memory and recall_memory: the memory store of the current user (capability ``memory``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from assistant.memory.types import CREATABLE, MemoryType
from assistant.tools.base import Capability, CapabilityDeps, CapabilityUnavailable, ToolContext, ToolError, tool

TYPES = [t.request_value for t in CREATABLE]


def _store(ctx: ToolContext):  # noqa: ANN202
    return ctx.backend("memory")


@tool("memory", icon="🧠")
def store_memory(
    ctx: ToolContext,
    content: Annotated[str, Field(min_length=1, max_length=20_000, description="The fact to remember, in full.")],
    memory_type: Annotated[str, Field(description=f"One of {', '.join(TYPES)}.")] = "fact",
    importance: Annotated[float, Field(ge=0.0, le=1.0, description="0.0 to 1.0")] = 0.5,
) -> dict:
    """Remember something about the user for later conversations."""
    if memory_type not in TYPES:
        raise ToolError(f"memory_type must be one of {', '.join(TYPES)}")
    memory = _store(ctx).add(str(ctx.user_id), content, memory_type=MemoryType.parse(memory_type),
                             importance=importance)
    return {"id": memory.id, "stored": True, "memory_type": memory.memory_type.value}


@tool("memory", icon="🔎")
def recall_memory(
    ctx: ToolContext,
    query: Annotated[str, Field(min_length=1, max_length=2000, description="What to look for.")],
    limit: Annotated[int, Field(ge=1, le=20, description="How many memories at most.")] = 5,
) -> list[dict]:
    """Search what is remembered about the user, most relevant first."""
    found = _store(ctx).search(str(ctx.user_id), query, limit)
    return [{"content": s.memory.content, "memory_type": s.memory.memory_type.value,
             "relevance": round(s.relevance, 3)} for s in found]


MEMORY_TOOLS = (store_memory, recall_memory)


def _create(deps: CapabilityDeps):  # noqa: ANN202
    if deps.memory is None:
        raise CapabilityUnavailable("the memory store is disabled ([memory] enabled = false)")
    return deps.memory


CAPABILITY = Capability(
    "memory", MEMORY_TOOLS, configured=lambda settings: settings.memory.enabled, create=_create,
    description="the current user's memory store",
)
