"""The insight lifecycle (spec "Hypothesis insight") and proactive surfacing.

(stub: the lead defined the interface; the bodies are being written.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from assistant.dream.types import Insight, InsightStatus, InsightType

if TYPE_CHECKING:
    from assistant.dream.deps import DreamDeps


class InsightService:
    def __init__(self, deps: DreamDeps):
        self.deps = deps
        self.store = deps.store

    def list(self, user_id: str, *, insight_type: InsightType | None = None, status: InsightStatus | None = None,
             limit: int = 100, offset: int = 0) -> tuple[list[Insight], int]:
        return self.store.insights(user_id, insight_type=insight_type, status=status, limit=limit, offset=offset)

    def get(self, user_id: str, insight_id: str) -> Insight:
        return self.store.insight(user_id, insight_id)

    def update(self, user_id: str, insight_id: str, changes: dict[str, Any]) -> Insight:
        """PUT: ``title``, ``content`` (re-embedded), ``status`` (only transitions USER_TRANSITIONS allows:
        409 naming the state otherwise; to ``confirmed`` means :meth:`confirm`)."""
        raise NotImplementedError

    def confirm(self, user_id: str, insight_id: str) -> Insight:
        """active -> confirmed (409 from any other state, naming it; a hypothesis also needs confidence
        past the confirmation threshold); a confirmed hypothesis is merged into memory as DreamInsight;
        journaled as InsightConfirmed."""
        raise NotImplementedError

    def dismiss(self, user_id: str, insight_id: str) -> Insight:
        raise NotImplementedError

    def merge(self, user_id: str, insight_id: str) -> Insight:
        """Write the insight into memory as a DreamInsight memory (once: ``memory_id`` records it)."""
        raise NotImplementedError

    def expire(self, user_id: str) -> int:
        """Active hypotheses without evidence for ``hypothesis_ttl_days`` -> expired. Returns how many."""
        return 0

    def surface(self, user_id: str, message: str, query_vector: np.ndarray | None, max_chars: int) -> str:
        """'Did you know?' context for a chat message (confirmed insights above both surfacing
        thresholds, within ``max_chars``); "" when none or ``rem.proactive_surfacing`` is off."""
        return ""
