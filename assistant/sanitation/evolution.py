"""Defence evolution (placeholder of the core commit: the defence helper writes it).

Contract: ``plan_patterns(deps, user_id, session_id)`` returns the patterns to add (generalised from
bypasses, validated against the benign set, not yet stored, not already known by hash) and how many
candidates were rejected. It writes nothing: the run stores them inside its transaction."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlannedPattern:
    pattern: str
    family: str
    source: str


def plan_patterns(deps, user_id: str, session_id: str | None = None) -> tuple[list[PlannedPattern], int]:
    return [], 0
