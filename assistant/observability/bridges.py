"""What the night already reports, on the signal bus: sanitation's quality scores and anomalies, dream phases.

Sanitation and dream mode publish their own events to their listeners (metrics, notebooks, SSE);
:func:`bridge_signals` subscribes the :class:`~assistant.observability.signals.SignalBus` to them so
that the time series has them too, without either package knowing the bus:

- a finished sanitation run with a quality assessment -> ``QualityScore`` (value = score, data = the
  components, trend and the run id);
- a sanitation anomaly -> ``Anomaly`` (value = the measured value, data = kind, component, severity,
  threshold, the action taken); the user is the run's (anomalies are service-wide: user None);
- a dream session entering a phase -> ``DreamPhase`` (value = the cycle, data = session id and phase).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assistant.observability.signals import SignalBus, SignalKind


def sanitation_signal(bus: SignalBus, event: Any) -> None:
    """Publish the signal a :class:`~assistant.sanitation.service.SanitationEvent` maps to, if any."""
    data = event.data
    if event.kind == "run_finished" and data.get("quality"):
        quality = data["quality"]
        bus.publish(SignalKind.QUALITY_SCORE,
                    {"run_id": data.get("id"), "trend": quality.get("trend"),
                     "re_ask_rate": quality.get("re_ask_rate"), "correction_rate": quality.get("correction_rate"),
                     "abandonment_rate": quality.get("abandonment_rate"), "messages": quality.get("messages")},
                    user_id=event.user_id, value=quality.get("score"))
    elif event.kind == "anomaly":
        anomaly = dict(data.get("anomaly") or {})
        bus.publish(SignalKind.ANOMALY, anomaly, value=anomaly.get("value"))


def dream_signal(bus: SignalBus, event: Any) -> None:
    """Publish ``DreamPhase`` for a :class:`~assistant.dream.types.DreamEvent` of kind ``phase_started``."""
    if event.kind == "phase_started" and event.phase is not None:
        bus.publish(SignalKind.DREAM_PHASE, {"session_id": event.session_id, "phase": event.phase.value},
                    user_id=event.user_id, value=float(event.cycle))


def bridge_signals(bus: SignalBus, sanitation: Any = None, dream: Any = None) -> list[Callable[[], None]]:
    """Subscribe ``bus`` to sanitation's and dream mode's events; returns the unsubscribe callables."""
    undo = []
    if sanitation is not None:
        undo.append(sanitation.subscribe(lambda event: sanitation_signal(bus, event)))
    if dream is not None:
        undo.append(dream.subscribe(lambda event: dream_signal(bus, event)))
    return undo
