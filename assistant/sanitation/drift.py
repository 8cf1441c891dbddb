"""Config drift: the sanitation settings a run depends on, clamped back into their bounds.

``quarantine_ttl_days`` and ``memory_batch_size`` are validated pydantic fields, so a value outside
the bounds can only come from a settings object built or changed without validation
(``model_construct``, ``object.__setattr__``, an old pickled config). :func:`plan` finds such values
(the run uses the clamped ones from then on); :func:`apply` corrects the live settings object, which
the run does only after its transaction committed (a rolled-back run changes nothing, not even this).
"""

from __future__ import annotations

from typing import Any

from assistant.sanitation.types import DriftCorrection

# (field, low, high): the bounds of SanitationSettings, restated here so drift never depends on the
# validation it is there to back up (tests/assistant/sanitation/test_sanitation_drift.py checks they match).
BOUNDS: tuple[tuple[str, int, int], ...] = (
    ("quarantine_ttl_days", 1, 30),
    ("memory_batch_size", 5, 50),
)


def _number(value: Any, low: int) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def plan(settings: Any) -> list[DriftCorrection]:
    """One :class:`DriftCorrection` per setting outside its bounds (a value that is not a number at
    all is corrected to the lower bound)."""
    out = []
    for name, low, high in BOUNDS:
        found = getattr(settings, name, None)
        number = _number(found, low)
        corrected = low if number is None else min(max(number, low), high)
        if number is None or corrected != found or isinstance(found, bool):
            out.append(DriftCorrection(f"sanitation.{name}", found, corrected, (low, high)))
    return out


def effective(settings: Any, corrections: list[DriftCorrection]) -> dict[str, int]:
    """The values a run uses: the settings with ``corrections`` applied (nothing written)."""
    values = {name: getattr(settings, name, low) for name, low, _ in BOUNDS}
    for c in corrections:
        values[c.setting.split(".", 1)[1]] = c.corrected
    return values


def apply(settings: Any, corrections: list[DriftCorrection]) -> None:
    """Write the corrected values into the live settings object (without validation: the object
    may be one that was built without it)."""
    for c in corrections:
        object.__setattr__(settings, c.setting.split(".", 1)[1], c.corrected)
