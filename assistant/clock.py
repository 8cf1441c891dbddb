"""Timestamps: ISO 8601 UTC strings with a Z, as the spec shows them."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime | None = None) -> str:
    moment = moment or utcnow()
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_at(epoch: float) -> str:
    """The ISO form of epoch seconds."""
    return iso(datetime.fromtimestamp(epoch, UTC))


def epoch_of(text: str) -> float:
    """Epoch seconds of an ISO 8601 timestamp (``Z`` or an offset; naive means UTC)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
