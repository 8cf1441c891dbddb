"""Timestamps: ISO 8601 UTC strings with a Z, as the spec shows them."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime | None = None) -> str:
    moment = moment or utcnow()
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
