"""The registered tools, and the tool runs behind answers."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query

from api.deps import CurrentPrincipal, Offset, ServicesDep
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.tools import Tool, ToolList, ToolRun, ToolRunList

router = APIRouter(prefix="/v1/tools", tags=["tools"])


@router.get("", response_model=ToolList, responses=error_responses(*AUTH_ERRORS), summary="List tools")
async def list_tools(user: CurrentPrincipal, services: ServicesDep) -> ToolList:
    """The tools the model may call, sorted by name. Only tools whose capability is configured (its
    settings section is set up and its backend could be built) appear; `enabled_tools` on the chat
    routes may name only these."""
    registry = services.tools.registry if services.tools is not None else None
    tools = registry.tools() if registry is not None else []
    return ToolList(tools=[Tool(name=t.name, description=t.spec.description, icon=t.icon) for t in tools])


@router.get("/runs", response_model=ToolRunList, responses=error_responses(*AUTH_ERRORS, 422), summary="Tool runs")
async def list_tool_runs(
    user: CurrentPrincipal,
    services: ServicesDep,
    conversation_id: Annotated[UUID | None, Query(description="Only runs of this conversation.")] = None,
    message_id: Annotated[UUID | None, Query(description="Only runs behind this assistant message.")] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="Page size, 1 to 500.")] = 100,
    offset: Offset = 0,
) -> ToolRunList:
    """What the tool loop did for the caller's answers: which tool, the arguments the model gave,
    the result or error, and the duration. Newest answers first; within an answer, in the order
    the calls were made. Not an extension of the spec's resources: the explanation of answers.
    Another user's runs are never listed."""
    runs = services.chat.tool_runs.list(
        user.user_id,
        conversation_id=str(conversation_id) if conversation_id else None,
        message_id=str(message_id) if message_id else None,
        limit=limit, offset=offset,
    ) if services.chat.tool_runs is not None else []
    return ToolRunList(runs=[ToolRun(**asdict(r)) for r in runs])
