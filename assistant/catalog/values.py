"""The value sets of a catalog entry (category, risk level, target OS) and the server's own OS."""

from __future__ import annotations

import platform
from enum import StrEnum
from typing import TypeVar

from assistant.errors import ValidationFailed

E = TypeVar("E", bound=StrEnum)


class Category(StrEnum):
    """What a command looks at or acts on."""

    SYSTEM = "system"
    HARDWARE = "hardware"
    DISK = "disk"
    MEMORY = "memory"
    NETWORK = "network"
    PROCESS = "process"
    SERVICE = "service"
    PACKAGE = "package"
    FILE = "file"
    SECURITY = "security"
    LOGS = "logs"
    OTHER = "other"


class RiskLevel(StrEnum):
    """low: reads non-sensitive state. medium: reads sensitive state (process command lines, logins,
    logs) or is heavy. high: changes the system (restarts, flushes, installs). critical: may destroy
    data or stop the machine. high and critical entries always need approval."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def needs_approval(self) -> bool:
        return self in (RiskLevel.HIGH, RiskLevel.CRITICAL)


class TargetOs(StrEnum):
    """The OS a command is written for; ``any`` runs on every OS (a portable command)."""

    LINUX = "linux"
    MACOS = "macos"
    WINDOWS = "windows"
    ANY = "any"


def current_os() -> TargetOs:
    """The server's OS as a catalog value (an unknown Unix counts as linux: /bin/sh commands)."""
    name = platform.system()
    if name == "Darwin":
        return TargetOs.MACOS
    if name == "Windows":
        return TargetOs.WINDOWS
    return TargetOs.LINUX


def allowed(enum: type[StrEnum]) -> str:
    return ", ".join(v.value for v in enum)


def parse_value(enum: type[E], field: str, value: str) -> E:
    """``value`` as a member of ``enum``, else ValidationFailed naming the field and the allowed values."""
    try:
        return enum(value)
    except ValueError:
        error = f"must be one of {allowed(enum)} (got {value!r})"
        raise ValidationFailed(f"{field} {error}", [{"field": field, "error": error}]) from None
