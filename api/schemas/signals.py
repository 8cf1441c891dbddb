from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from assistant.observability.signals import Signal, SignalKind


class SignalOut(BaseModel):
    kind: SignalKind = Field(description="One of the ten signal kinds.")
    ts: datetime = Field(description="When it was published (UTC).")
    user_id: str | None = Field(description="The user it concerns (the caller), or null for a server-wide signal.")
    value: float | None = Field(description="Its number to plot (a score, a load, a temperature, an epsilon), if any.")
    data: dict[str, Any] = Field(description="Kind-specific details.")

    @classmethod
    def of(cls, signal: Signal) -> SignalOut:
        return cls(kind=signal.kind, ts=signal.ts, user_id=signal.user_id, value=signal.value, data=signal.data)


class SignalList(BaseModel):
    signals: list[SignalOut] = Field(description="Oldest first.")
    total: int = Field(description="How many are listed (at most `limit`).")
    kinds: list[SignalKind] = Field(description="Every signal kind there is.")
    capacity: int = Field(description="How many signals the bus keeps in memory "
                                      "(`sovereign_intelligence.signal_bus_capacity`).")
    retention_days: int = Field(description="How long the time series keeps them "
                                            "(`sovereign_intelligence.signal_retention_days`).")
