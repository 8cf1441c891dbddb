"""Per-word wake-word thresholds calibrated on speech without the word, stored with the models.

The file (JSON, :data:`PACKAGED_FILE` ships in the package; ``assistant wakeword calibrate`` writes a new one)
records, per packaged word, the lowest score threshold at which the word's false alarms on negative speech
stay within a budget (``[voice.wake_word] max_false_alarms_per_hour``), and how that was measured::

    {"format": 1, "pyopen_wakeword": "1.1.0", "created": "2026-11-25", "budget_per_hour": 0.5,
     "margin": 0.1, "min_threshold": 0.5, "refractory_s": 1.0, "negative_hours": 1.2, "sources": [{"name": ..., "clips": ...,
     "hours": ...}], "words": {"hey_jarvis": {"threshold": 0.31, "false_alarms": 0,
     "false_alarms_per_hour": 0.0, "highest_negative": 0.21, "negative_hours": 1.2, "meets_budget": true}}}

How the engine uses it: a word's effective threshold is ``max(sensitivity, calibrated threshold)``.
``sensitivity`` stays the spec's knob (higher means fewer false positives, more missed words); the calibration
is a floor under it, so lowering the sensitivity never goes below what the measured false-alarm budget allows.

Which file: ``[voice.wake_word] thresholds_file`` when set (it must exist); else
``<data_dir>/wakeword_thresholds.json`` (what ``assistant wakeword calibrate`` writes by default) when it
exists; else the packaged file. A file that cannot be read, is not this format, or lacks a configured word
is logged as a warning and that word falls back to ``sensitivity`` alone (a user file that is unreadable falls
back to the packaged file first): a damaged calibration never stops the voice pipeline.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assistant.config import WakeWordSettings

log = logging.getLogger("assistant.voice.wake")

FORMAT = 1
FILE_NAME = "wakeword_thresholds.json"
PACKAGED_FILE = Path(__file__).resolve().parent / "data" / FILE_NAME


@dataclass(frozen=True)
class WordThreshold:
    threshold: float  # the calibrated score threshold (the engine uses max(sensitivity, this))
    false_alarms: int  # detections on the negative speech at this threshold (one per refractory period)
    false_alarms_per_hour: float
    highest_negative: float  # the word's highest score anywhere in the negative speech
    negative_hours: float  # hours of negative speech this word was measured on
    meets_budget: bool  # False: no threshold up to the cap kept the false alarms within the budget


@dataclass(frozen=True)
class Source:
    name: str  # e.g. the sub-directory of the negatives directory
    clips: int
    hours: float


@dataclass(frozen=True)
class Calibration:
    words: dict[str, WordThreshold]
    budget_per_hour: float
    margin: float
    refractory_s: float
    negative_hours: float
    sources: list[Source] = field(default_factory=list)
    created: str = ""  # ISO date
    pyopen_wakeword: str = ""  # the version whose models were scored
    min_threshold: float = 0.0  # the floor of the rule (no calibrated threshold is lower)
    notes: str = ""  # where the negative speech came from (the directory; for the packaged file, the data sets)
    format: int = FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    def save(self, path: Path) -> Path:
        """Write atomically (a temporary file renamed over ``path``): a reader never sees half a file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(self.to_json(), encoding="utf-8")
        partial.replace(path)
        return path

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        """Parse a calibration file; ValueError naming what is wrong."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a wake word calibration of format {FORMAT}")
        try:
            words = {str(w): WordThreshold(**_fields(WordThreshold, v)) for w, v in data["words"].items()}
            sources = [Source(**_fields(Source, s)) for s in data.get("sources", [])]
            scalars = {k: data[k] for k in ("budget_per_hour", "margin", "refractory_s", "negative_hours")}
            extra: dict[str, Any] = {k: str(data.get(k, "")) for k in ("created", "pyopen_wakeword", "notes")}
            extra["min_threshold"] = float(data.get("min_threshold", 0.0))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"a field is missing or malformed: {exc}") from None
        for word, entry in words.items():
            if not (isinstance(entry.threshold, int | float) and math.isfinite(entry.threshold)
                    and 0.0 <= entry.threshold <= 1.0):
                raise ValueError(f"the threshold of {word!r} must be a number in [0, 1], got {entry.threshold!r}")
        return cls(words=words, sources=sources, **scalars, **extra)

    @classmethod
    def load(cls, path: Path) -> Calibration:
        """Read ``path``; OSError when it cannot be read, ValueError when it is not a calibration."""
        return cls.from_json(path.read_text(encoding="utf-8"))


def user_file(data_dir: Path) -> Path:
    """Where ``assistant wakeword calibrate`` writes by default, and the engine looks first."""
    return data_dir / FILE_NAME


def with_data_dir(settings: WakeWordSettings, data_dir: Path) -> WakeWordSettings:
    """``settings`` with ``thresholds_file`` set to the data directory's calibration when it is unset and that
    file exists (the engine factory knows no data directory; ``build_voice`` and the companion service do)."""
    if settings.thresholds_file is None and user_file(data_dir).is_file():
        return settings.model_copy(update={"thresholds_file": user_file(data_dir)})
    return settings


def _fields(kind: type, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object for {kind.__name__}, got {type(value).__name__}")
    names = kind.__dataclass_fields__  # type: ignore[attr-defined]
    return {k: v for k, v in value.items() if k in names}


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyopen-wakeword")
    except PackageNotFoundError:
        return ""


def read_calibration(path: Path | None) -> Calibration | None:
    """The calibration at ``path`` (a user file, tried first) else the packaged one; None, with a warning,
    when neither can be read. A word the user file lacks (calibrated with ``--words``) keeps its packaged
    threshold. A version of pyopen-wakeword other than the one calibrated is warned about."""
    candidates = ([path] if path is not None else []) + [PACKAGED_FILE]
    found = [read for candidate in candidates if (read := _read(candidate)) is not None]
    if not found:
        return None
    chosen = found[0]
    if len(found) == 2:
        chosen = replace(chosen, words={**found[1].words, **chosen.words})
    return chosen


def _read(path: Path) -> Calibration | None:
    try:
        calibration = Calibration.load(path)
    except (OSError, ValueError) as exc:
        fallback = "the packaged calibration" if path != PACKAGED_FILE else "the sensitivity alone"
        log.warning("wake word thresholds %s are unusable (%s): using %s", path, exc, fallback)
        return None
    version = installed_version()
    if calibration.pyopen_wakeword and version and calibration.pyopen_wakeword != version:
        log.warning("wake word thresholds %s were calibrated with pyopen-wakeword %s, %s is installed: "
                    "recalibrate with `assistant wakeword calibrate`", path, calibration.pyopen_wakeword, version)
    return calibration


def effective_thresholds(words: Iterable[str], sensitivity: float,
                         calibration: Calibration | None) -> dict[str, float]:
    """Each word's detection threshold: ``max(sensitivity, its calibrated threshold)``; a word the calibration
    lacks gets ``sensitivity``, with a warning."""
    floors: Mapping[str, WordThreshold] = calibration.words if calibration is not None else {}
    thresholds = {}
    for word in words:
        if word not in floors and calibration is not None:
            log.warning("wake word %r has no calibrated threshold: using the sensitivity %s", word, sensitivity)
        floor = floors[word].threshold if word in floors else 0.0
        thresholds[word] = max(sensitivity, floor)
    return thresholds
