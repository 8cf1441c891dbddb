"""Every capability the assistant knows, and the toolbox built from the configured ones.

A capability is registered when its settings section is configured *and* its backend can be set up
(``Capability.create`` may refuse with :class:`CapabilityUnavailable`, e.g. no sandbox for
execute_code). ``Toolbox.status`` keeps, for every capability, whether it is configured, available
and why not, for ``GET /v1/tools`` and the notebook.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from assistant.tools import (
    calendar,
    code,
    contacts,
    mail,
    memory_tools,
    reminders,
    tasks,
    transit,
    weather,
    web_search,
)
from assistant.tools.base import Capability, CapabilityDeps, CapabilityUnavailable, ToolContext, ToolRegistry

log = logging.getLogger("assistant.tools")

CAPABILITIES: tuple[Capability, ...] = (
    weather.CAPABILITY,
    web_search.CAPABILITY,
    transit.CAPABILITY,
    memory_tools.CAPABILITY,
    reminders.CAPABILITY,
    calendar.CAPABILITY,
    tasks.CAPABILITY,
    contacts.CAPABILITY,
    mail.CAPABILITY,
    mail.DRAFTS_CAPABILITY,
    code.CAPABILITY,
)

# The capabilities whose tools read and write nobody's personal data (public weather, web and transport
# information, the household's configured location): the only tools a voice exchange may offer when its
# speaker is not confidently identified (assistant/voice/service.py), so that someone the assistant does
# not know cannot hear the user's calendar, mail, contacts, tasks, reminders or memories, nor change them.
# An allow-list: a new capability stays out until it is added here. code_execution holds no personal
# data but runs programs on the server, which is not for a stranger's voice either.
SHARED_CAPABILITIES = frozenset({"weather", "web_search", "transit"})


@dataclass(frozen=True)
class CapabilityStatus:
    name: str
    configured: bool
    available: bool
    tools: tuple[str, ...]
    reason: str | None = None
    description: str = ""


@dataclass
class Toolbox:
    registry: ToolRegistry
    backends: dict[str, Any] = field(default_factory=dict)
    status: list[CapabilityStatus] = field(default_factory=list)

    def shared_tools(self) -> tuple[str, ...]:
        """The registered tools of :data:`SHARED_CAPABILITIES` (no personal data), sorted by name."""
        return tuple(t.name for t in self.registry.tools() if t.capability in SHARED_CAPABILITIES)

    def context(self, user_id: UUID | str, **extras: Any) -> ToolContext:
        return ToolContext(user_id, self.backends, dict(extras))

    def close(self) -> None:
        for backend in self.backends.values():
            close = getattr(backend, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:  # closing is best effort at shutdown
                    log.exception("closing a tool backend failed")


def build_toolbox(deps: CapabilityDeps, capabilities: Iterable[Capability] = CAPABILITIES) -> Toolbox:
    """Build the backend of every configured capability and register its tools."""
    registry = ToolRegistry()
    toolbox = Toolbox(registry)
    for cap in capabilities:
        names = tuple(t.name for t in cap.tools)
        if not cap.configured(deps.settings):
            toolbox.status.append(CapabilityStatus(cap.name, False, False, names, "not configured", cap.description))
            continue
        try:
            backend = cap.create(deps)
        except CapabilityUnavailable as exc:
            log.warning("capability %s is configured but unavailable: %s", cap.name, exc)
            toolbox.status.append(CapabilityStatus(cap.name, True, False, names, str(exc), cap.description))
            continue
        toolbox.backends[cap.name] = backend
        for t in cap.tools:
            registry.register(t)
        toolbox.status.append(CapabilityStatus(cap.name, True, True, names, None, cap.description))
    return toolbox
