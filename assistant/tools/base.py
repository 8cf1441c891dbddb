"""Tools as plain typed functions: name, description and JSON schema come from the signature.

    @tool(capability="memory", icon="🧠")
    def recall_memory(ctx: ToolContext, query: Annotated[str, Field(description="What to look for")],
                      limit: int = 5) -> list[dict]:
        \"\"\"Search the user's memories.\"\"\"

The first line of the docstring is the description; parameters after ``ctx`` become a pydantic
model whose JSON schema the model sees and which validates the arguments it sends. A registry
keeps only the tools whose capability is configured (``ToolRegistry.build``).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from assistant.llm.base import ToolSpec


class ToolError(Exception):
    """A failure reported back to the model as the tool's result (never a crashed request)."""


@dataclass
class ToolContext:
    """What a tool may use: the caller, and the services of its capability."""

    user_id: UUID | str
    services: Any = None  # assistant.services.Services (typed loosely to avoid an import cycle)
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    capability: str
    func: Callable[..., Any]
    arguments: type[BaseModel]
    icon: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        try:
            return self.arguments.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from None

    def __call__(self, ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        parsed = self.validate(arguments)
        return self.func(ctx, **{name: getattr(parsed, name) for name in type(parsed).model_fields})


def tool(capability: str, *, icon: str | None = None, name: str | None = None) -> Callable[[Callable], Tool]:
    """Make a Tool of a function whose first parameter is the ToolContext."""

    def wrap(func: Callable[..., Any]) -> Tool:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)  # resolves string annotations
        params = list(signature.parameters.values())[1:]  # the first is the context
        fields: dict[str, Any] = {}
        for p in params:
            if p.name not in hints:
                raise TypeError(f"{func.__name__}: parameter {p.name} needs a type annotation")
            fields[p.name] = (hints[p.name], ... if p.default is inspect.Parameter.empty else p.default)
        tool_name = name or func.__name__
        model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        schema = model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        doc = inspect.getdoc(func) or tool_name
        description = doc.split("\n\n")[0].replace("\n", " ").strip()
        return Tool(ToolSpec(tool_name, description, schema), capability, func, model, icon)

    return wrap


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.register(t)

    def register(self, t: Tool) -> None:
        if t.name in self._tools:
            raise ValueError(f"a tool named {t.name!r} is already registered")
        self._tools[t.name] = t

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def tools(self, enabled: Iterable[str] | None = None) -> list[Tool]:
        """Registered tools, restricted to ``enabled`` when given (None = all)."""
        if enabled is None:
            return [self._tools[n] for n in self.names()]
        return [self._tools[n] for n in enabled if n in self._tools]

    def specs(self, enabled: Iterable[str] | None = None) -> tuple[ToolSpec, ...]:
        return tuple(t.spec for t in self.tools(enabled))

    @classmethod
    def build(cls, candidates: Iterable[Tool], configured: Callable[[str], bool]) -> ToolRegistry:
        """Only the tools whose capability ``configured(capability)`` says is set up."""
        return cls(t for t in candidates if configured(t.capability))
