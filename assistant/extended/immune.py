"""The immune status: one audit view of what protects a user's assistant, read from the running system.

:meth:`ImmuneView.status` gathers, for the caller:

- ``defence``: whether it is on, the thresholds, and its layers in order (``normalisation``,
  ``static``, ``dynamic``, ``classifier``, ``judge``), each with ``active`` and what it holds: the
  static rules shipped, the caller's active and deactivated evolved patterns (with how many texts
  they flagged), the classifier's variant (``full``: n-grams + MiniLM, ``ngram``) or why it is absent;
- ``red_team``: ``disabled`` (``red_team.enabled = false``), or the caller's latest completed run
  (score, counts, when, per family) and a run under way (the caller's own only);
- ``sanitation``: ``disabled``, or the caller's latest run (status, when, patterns added, the
  defence and quality scores it measured);
- ``quarantine``: the caller's memories in quarantine now and those purged after it;
- ``anomalies``: the server's anomalies detected since start and the most recent ones (no user data:
  latency spikes and error-rate surges of the engine, embedder, bus or HTTP);
- ``restarts``: every component the sanitation supervisor restarts, its attempts, its last error,
  whether it is degraded;
- ``gauges``: ``defense_score_x100`` (the latest defence score of a red-team run or a sanitation run,
  the Prometheus gauge) and ``quality_score_x100``, and the detector's counts since start.

Nothing here writes; another user's runs, patterns and memories never appear.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assistant.clock import iso_at
from assistant.defence.types import Detector, Layer, NoDefence
from assistant.memory.types import MemoryType
from assistant.observability.signals import SignalBus, SignalKind

if TYPE_CHECKING:
    from assistant.config import DefenceSettings, Settings
    from assistant.extended.red_team import RedTeam
    from assistant.memory.store import MemoryStore
    from assistant.sanitation.service import SanitationService
    from assistant.sanitation.supervisor import ComponentSupervisor

log = logging.getLogger(__name__)

RECENT_ANOMALIES = 10
LAYER_ORDER = (Layer.NORMALISATION, Layer.STATIC, Layer.DYNAMIC, Layer.CLASSIFIER, Layer.JUDGE)


@dataclass
class ImmuneView:
    """Reads the parts it is given (any may be None: that part is reported off or absent)."""

    detector: Detector
    defence_settings: DefenceSettings
    sanitation: SanitationService | None = None
    red_team: RedTeam | None = None
    supervisor: ComponentSupervisor | None = None
    memory: MemoryStore | None = None
    signals: SignalBus | None = None

    def status(self, user_id: str) -> dict[str, Any]:
        user = str(user_id)
        return {
            "defence": self.defence(user),
            "red_team": self.red_team_status(user),
            "sanitation": self.sanitation_status(user),
            "quarantine": self.quarantine(user),
            "anomalies": self.anomalies(),
            "restarts": self.supervisor.components() if self.supervisor is not None else {},
            "gauges": self.gauges(),
        }

    # --- the defence ----------------------------------------------------------------------------------

    def defence(self, user: str) -> dict[str, Any]:
        detector = self.detector
        layers = {layer.layer: layer for layer in getattr(detector, "layers", ())}
        on = not isinstance(detector, NoDefence) and hasattr(detector, "layers")
        out = []
        for kind in LAYER_ORDER:
            entry: dict[str, Any] = {"name": kind.value, "active": False}
            found = layers.get(kind)
            if kind is Layer.NORMALISATION:
                entry.update(active=on, detail="folds look-alikes and hidden characters, decodes base64, rot13 "
                                               "and leetspeak before the other layers look")
            elif kind is Layer.STATIC and found is not None:
                entry.update(active=True, patterns=len(found.rules))
            elif kind is Layer.DYNAMIC and found is not None:
                entry.update(self._dynamic(found, user))
            elif kind is Layer.CLASSIFIER:
                entry.update(self._classifier(found, on))
            elif kind is Layer.JUDGE:
                entry.update(active=getattr(detector, "judge", None) is not None,
                             band=list(getattr(detector, "judge_band", ())) or None)
            out.append(entry)
        return {
            "enabled": on,
            "threshold": getattr(detector, "threshold", None),
            "indirect_threshold": getattr(detector, "indirect_threshold", None),
            "neutralise": self.defence_settings.neutralise,
            "layers": out,
            "inspected": getattr(detector, "inspected", 0),
            "flagged": getattr(detector, "flagged", 0),
        }

    def _dynamic(self, layer: Any, user: str) -> dict[str, Any]:
        provider = getattr(layer, "provider", None)
        if provider is None:
            return {"active": False, "patterns": 0}
        if self.sanitation is not None:
            every = self.sanitation.store.patterns(user, active_only=False)
            active = [p for p in every if p.active]
            return {"active": True, "patterns": len(active), "deactivated": len(every) - len(active),
                    "hits": sum(p.hits for p in active),
                    "by_source": _count(p.source for p in active), "by_family": _count(p.family for p in active)}
        return {"active": True, "patterns": len(provider.active_patterns(user))}

    def _classifier(self, layer: Any, on: bool) -> dict[str, Any]:
        if layer is not None:
            return {"active": True, "present": True, "variant": getattr(layer, "variant", None),
                    "indirect_threshold": getattr(layer, "indirect_threshold", None)}
        why = "the defence is off ([defence] enabled = false)" if not on else (
            "switched off ([defence] classifier = false)" if not self.defence_settings.classifier
            else "its weights could not be loaded (see the log)")
        return {"active": False, "present": False, "reason": why}

    # --- red team, sanitation, quarantine -----------------------------------------------------------

    def red_team_status(self, user: str) -> dict[str, Any]:
        if self.red_team is None:
            return {"status": "disabled", "reason": "red_team.enabled = false"}
        latest = self.red_team.store.latest(user)
        active = self.red_team.active()
        mine = active if active is not None and active.user_id == user else None
        return {
            "status": "running" if mine is not None else ("never_run" if latest is None else "idle"),
            "latest": None if latest is None else {
                "run_id": latest.id, "defense_score": latest.defense_score, "attacks_tested": latest.attacks_tested,
                "attacks_blocked": latest.attacks_blocked, "bypasses": len(latest.bypasses), "mode": latest.mode,
                "started_at": latest.started_at, "finished_at": latest.finished_at,
                "families": {f: v.get("score") for f, v in latest.families.items()}},
            "running": None if mine is None else {"run_id": mine.id, "done": mine.attacks_tested,
                                                  "total": mine.requested, "started_at": mine.started_at},
        }

    def sanitation_status(self, user: str) -> dict[str, Any]:
        if self.sanitation is None:
            return {"status": "disabled", "reason": "sanitation.enabled = false, or memory.enabled = false"}
        latest = self.sanitation.store.latest(user)
        if latest is None:
            return {"status": "never_run", "latest": None}
        defence = latest.defence or {}
        return {"status": "idle", "latest": {
            "id": latest.id, "status": latest.status, "trigger": latest.trigger, "started_at": latest.started_at,
            "completed_at": latest.completed_at, "patterns_added": len(latest.patterns_added),
            "patterns_rejected": latest.patterns_rejected, "quarantined": len(latest.quarantined),
            "defense_score": None if defence.get("score") is None else round(100.0 * defence["score"], 2),
            "quality_score": (latest.quality or {}).get("score"), "rolled_back": latest.rolled_back}}

    def quarantine(self, user: str) -> dict[str, Any]:
        if self.memory is None:
            return {"quarantined": 0, "purged": 0}
        db = self.memory.db
        held = db.scalar("SELECT count(*) FROM memories WHERE user_id = ? AND memory_type = ?", (user, MemoryType.QUARANTINED.value))
        purged = db.scalar("SELECT count(*) FROM memory_purges WHERE user_id = ?", (user,))
        last = db.scalar("SELECT max(purged_ts) FROM memory_purges WHERE user_id = ?", (user,))
        return {"quarantined": int(held or 0), "purged": int(purged or 0),
                "last_purged_at": iso_at(last) if last is not None else None}

    # --- server-wide ----------------------------------------------------------------------------------

    def anomalies(self) -> dict[str, Any]:
        detected = self.sanitation.counters.anomalies_detected if self.sanitation is not None else 0
        recent: list[dict[str, Any]] = []
        if self.signals is not None:
            try:
                found = self.signals.query(SignalKind.ANOMALY, user_id=None, limit=RECENT_ANOMALIES)
                recent = [{"at": s.ts.isoformat(), **s.data} for s in found if s.user_id is None]
            except Exception:  # the time series is an addition: the view still answers
                log.exception("reading recent anomalies failed")
        return {"detected": detected, "recent": recent[-RECENT_ANOMALIES:]}

    def gauges(self) -> dict[str, Any]:
        counters = self.sanitation.counters if self.sanitation is not None else None
        score = counters.defense_score_x100 if counters is not None else None
        if counters is None and self.red_team is not None:
            score = self.red_team.gauge
        return {"defense_score_x100": score,
                "quality_score_x100": counters.quality_score_x100 if counters is not None else None,
                "sanitation": counters.snapshot() if counters is not None else None}


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out


def build_immune(settings: Settings, detector: Detector, *, sanitation: SanitationService | None = None,
                 red_team: RedTeam | None = None, supervisor: ComponentSupervisor | None = None,
                 memory: MemoryStore | None = None, signals: SignalBus | None = None) -> ImmuneView | None:
    """The immune view (None while ``sovereign_intelligence.enabled = false``); it works whether the
    red team and sanitation are on or not (it reports them ``disabled``)."""
    if not settings.sovereign_intelligence.enabled:
        return None
    return ImmuneView(detector, settings.defence, sanitation, red_team, supervisor, memory, signals)
