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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from assistant.errors import ConfigError
from assistant.llm.base import ToolSpec

B = TypeVar("B")


class ToolError(Exception):
    """A failure reported back to the model as the tool's result (never a crashed request)."""


class CapabilityUnavailable(Exception):
    """A configured capability whose backend cannot be set up here (its tools are not registered)."""


@dataclass
class ToolContext:
    """What a tool may use: the caller and the backends of the configured capabilities."""

    user_id: UUID | str
    backends: Mapping[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)

    def backend(self, capability: str) -> Any:
        try:
            return self.backends[capability]
        except KeyError:
            raise ToolError(f"the {capability} capability is not configured") from None


@dataclass(frozen=True)
class CapabilityDeps:
    """What a capability's backend factory may use (all real: the service's own storage)."""

    settings: Any  # assistant.config.Settings
    db: Any = None  # assistant.storage.db.Database
    sealer: Any = None  # assistant.crypto.Sealer
    data_dir: Path | None = None
    memory: Any = None  # assistant.memory.store.MemoryStore | None
    extras: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Capability:
    """A named capability: its tools, whether its settings section is configured, and how to build
    its backend. ``create`` may raise :class:`CapabilityUnavailable` (the tools then stay out)."""

    name: str
    tools: tuple[Tool, ...]
    configured: Callable[[Any], bool]  # Settings -> bool
    create: Callable[[CapabilityDeps], Any]
    description: str = ""


def pick_backend(section: str, backends: Mapping[str, Callable[..., B]], backend_id: str) -> Callable[..., B]:
    """The factory registered under ``backend_id``; an unknown id is a configuration error."""
    try:
        return backends[backend_id]
    except KeyError:
        known = ", ".join(sorted(backends))
        raise ConfigError(f"{section}.backend: unknown backend {backend_id!r}; known: {known}") from None


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


def tool(capability: str, *, icon: str | None = None, name: str | None = None, produces: Iterable[str] = (),
         requires: Iterable[tuple[str, str]] = ()) -> Callable[[Callable], Tool]:
    """Make a Tool of a function whose first parameter is the ToolContext.

    ``produces``: the fields of the tool's result other tools may need (``("id",)``);
    ``requires``: ``(parameter, producing tool)`` pairs for a parameter that needs another tool's
    output (``("task_id", "list_tasks")``) — see :mod:`assistant.chat.prerequisites`."""
    produced = tuple(produces)
    required = tuple((str(p), str(t)) for p, t in requires)

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
        unknown = sorted({p for p, _ in required} - set(fields))
        if unknown:
            raise TypeError(f"{func.__name__}: requires names unknown parameters {', '.join(unknown)}")
        model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        schema = model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
            _drop_null_option(prop)
        doc = inspect.getdoc(func) or tool_name
        description = doc.split("\n\n")[0].replace("\n", " ").strip()
        spec = ToolSpec(tool_name, description, schema, produces=produced, requires=required)
        return Tool(spec, capability, func, model, icon)

    return wrap


def _drop_null_option(prop: dict[str, Any]) -> None:
    """``Optional[X]`` shows the model X (an omitted argument is the null); shorter prompts, and a
    small model does not send ``null`` for a value it means to give."""
    options = prop.get("anyOf")
    if isinstance(options, list):
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == 1 and len(rest) < len(options):
            del prop["anyOf"]
            prop.update({k: v for k, v in rest[0].items() if k not in prop})


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
