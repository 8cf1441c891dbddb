"""The privacy budget: differential privacy for every aggregate output, with a real accountant.

Each user has a budget of ``privacy.epsilon`` (1.0) at ``privacy.delta`` (1e-5) per period of
``privacy.budget_reset_interval`` (``hourly``, ``daily`` (default), ``weekly`` or ``monthly``;
periods start on UTC boundaries: the hour, midnight, Monday midnight, the first of the month).
An aggregate output (memory statistics, the quality components shared with peers, a federated
update) is released only through a calibrated mechanism (:mod:`assistant.extended.privacy_mechanisms`:
Laplace for counts and sums, Gaussian for vectors) and charged to the caller's budget:

1. the events of the caller's ledger rows of the current period, plus the new one, are composed by
   the accountant (``privacy.accountant``: ``pld``, dp-accounting's privacy-loss distributions, or
   ``rdp``) into the epsilon they spend together at ``delta``;
2. if that exceeds ``epsilon`` the query is refused: :class:`BudgetExhausted` (429 ``RATE_LIMITED``
   at the API, ``Retry-After`` until the reset; ``details``: ``remaining_epsilon``, ``reset_at``,
   ``requested_epsilon``, ``spent_epsilon``), nothing is released and nothing is written;
3. otherwise a ledger row is written (``epsilon_spent`` = the composed epsilon after minus before)
   and only then is the noise drawn and the result released.

Every charge and every refusal publishes a ``PrivacySpend`` signal (the caller's). The ledger keeps
every period's rows (an audit trail; nothing of the user's data is in it). The composition reads the
ledger afresh on each charge; a per-user lock makes check-and-write atomic within the process (one
server process per data directory, as everywhere in this service).

The Python API other features call: :meth:`PrivacyBudget.spend` (charge a mechanism you apply
yourself), :meth:`PrivacyBudget.release_counts` (Laplace on counts or sums) and
:meth:`PrivacyBudget.release_vector` (clipped vector + Gaussian: federated updates). The queries of
this service are in :mod:`assistant.extended.privacy_queries`.
"""

from __future__ import annotations

import json
import math
import re
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from assistant.clock import iso, utcnow
from assistant.errors import RateLimitedError, ValidationFailed
from assistant.extended.privacy_mechanisms import (
    Accountant,
    Event,
    Gaussian,
    Laplace,
    Mechanism,
    check_number,
    create_accountant,
    fresh_rng,
)
from assistant.observability.signals import SignalKind

INTERVALS = ("hourly", "daily", "weekly", "monthly")
TOLERANCE = 1e-9  # composed epsilons within this of the budget fit (10 x 0.1 is not refused for rounding)
LEDGER_LIMIT = 1000
_QUERY_NAME = re.compile(r"^[a-z0-9][a-z0-9_.:-]{0,99}$")


def period_bounds(moment: datetime, interval: str) -> tuple[datetime, datetime]:
    """The budget period holding ``moment``: its first instant and the next period's (the reset)."""
    moment = moment.astimezone(UTC)
    if interval == "hourly":
        start = moment.replace(minute=0, second=0, microsecond=0)
        return start, start + timedelta(hours=1)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if interval == "daily":
        return day, day + timedelta(days=1)
    if interval == "weekly":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if interval == "monthly":
        start = day.replace(day=1)
        return start, (start + timedelta(days=32)).replace(day=1)
    raise ValueError(f"budget_reset_interval must be one of {', '.join(INTERVALS)} (got {interval!r})")


@dataclass(frozen=True)
class LedgerEntry:
    id: str
    query: str
    mechanism: str
    parameters: dict[str, float]
    epsilon_spent: float
    composed_epsilon: float
    period_start: str
    created_at: str

    def event(self) -> Event:
        return Event(self.mechanism, float(self.parameters["noise_multiplier"]))

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "query": self.query, "mechanism": self.mechanism, "parameters": dict(self.parameters),
                "epsilon_spent": self.epsilon_spent, "composed_epsilon": self.composed_epsilon,
                "period_start": self.period_start, "created_at": self.created_at}


@dataclass(frozen=True)
class Charge:
    """One accepted charge: its ledger row and the budget after it."""

    entry: LedgerEntry
    epsilon_before: float
    epsilon_after: float
    remaining: float
    reset_at: str

    @property
    def epsilon_spent(self) -> float:
        return self.entry.epsilon_spent

    def as_dict(self) -> dict[str, Any]:
        return {**self.entry.as_dict(), "epsilon_before": self.epsilon_before, "epsilon_after": self.epsilon_after,
                "remaining": self.remaining, "reset_at": self.reset_at}


@dataclass(frozen=True)
class BudgetStatus:
    epsilon: float
    delta: float
    spent: float
    remaining: float
    period_start: str
    reset_at: str
    reset_interval: str
    accountant: str
    ledger: list[LedgerEntry] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "spent": self.spent, "remaining": self.remaining,
                "period_start": self.period_start, "reset_at": self.reset_at, "reset_interval": self.reset_interval,
                "accountant": self.accountant, "ledger": [e.as_dict() for e in self.ledger]}


@dataclass(frozen=True)
class Release:
    """Noised values (the shape of the input: a dict, a list or an array) and the charge paid for them."""

    values: Any
    charge: Charge
    mechanism: Mechanism
    clipped: bool = False  # release_vector: the input's L2 norm exceeded the clipping norm


class BudgetExhausted(RateLimitedError):
    """The query would take the caller's composed epsilon past the budget: 429 until the reset."""

    def __init__(self, message: str, retry_after: int, details: dict[str, Any]):
        super().__init__(message, retry_after)
        self.details = details


def _round(value: float) -> float:
    return round(float(value), 6)


class PrivacyBudget:
    """Per-user differential-privacy budgets over the ``privacy_ledger`` table. ``settings`` is the
    ``[privacy]`` section; ``signals`` the signal bus (None: no signals); ``clock`` gives the UTC now."""

    def __init__(self, settings: Any, db: Any, signals: Any = None, *,
                 clock: Callable[[], datetime] = utcnow, accountant: Accountant | None = None):
        self.settings = settings
        self.db = db
        self.signals = signals
        self.clock = clock
        self.accountant = accountant or create_accountant(getattr(settings, "accountant", "pld"))
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @property
    def epsilon(self) -> float:
        return float(self.settings.epsilon)

    @property
    def delta(self) -> float:
        return float(self.settings.delta)

    def period(self, now: datetime | None = None) -> tuple[datetime, datetime]:
        """The current period's start and reset time (UTC)."""
        return period_bounds(now or self.clock(), self.settings.budget_reset_interval)

    # --- reading ---------------------------------------------------------------------------------

    def entries(self, user_id: str, period_start: datetime | None = None, *, since: datetime | None = None,
                limit: int = LEDGER_LIMIT) -> list[LedgerEntry]:
        """The user's ledger rows, oldest first: of one period (``period_start``), or of every period
        from ``since`` (neither: the current period)."""
        sql = "SELECT * FROM privacy_ledger WHERE user_id = ?"
        params: list[Any] = [str(user_id)]
        if since is not None:
            sql += " AND created_ts >= ?"
            params.append(since.timestamp())
        else:
            sql += " AND period_start = ?"
            params.append((period_start or self.period()[0]).timestamp())
        sql += " ORDER BY created_ts DESC, rowid DESC LIMIT ?"
        params.append(max(1, min(int(limit), 100_000)))
        return [_entry(row) for row in reversed(self.db.query(sql, params))]

    def spent(self, user_id: str, now: datetime | None = None) -> float:
        start, _ = self.period(now)
        return self._composed(self._events(user_id, start))

    def status(self, user_id: str) -> BudgetStatus:
        """The caller's budget now: spent and remaining epsilon, the period and its ledger."""
        start, reset = self.period()
        entries = self.entries(user_id, start, limit=100_000)
        spent = self._composed([e.event() for e in entries])
        return BudgetStatus(self.epsilon, self.delta, _round(spent), _round(max(0.0, self.epsilon - spent)),
                            iso(start), iso(reset), self.settings.budget_reset_interval, self.accountant.id,
                            entries[-LEDGER_LIMIT:])

    def frame(self, user_id: str, since: datetime | None = None):  # noqa: ANN201 - pandas is imported here
        """The user's ledger as a pandas DataFrame (one row per charge, every period since ``since``;
        default: 30 days) for notebooks: ``created_at``, ``query``, ``mechanism``, ``epsilon_spent``,
        ``composed_epsilon``, ``period_start``."""
        import pandas as pd

        since = since or self.clock() - timedelta(days=30)
        rows = [e.as_dict() for e in self.entries(user_id, since=since, limit=100_000)]
        columns = ["id", "created_at", "period_start", "query", "mechanism", "epsilon_spent", "composed_epsilon",
                   "parameters"]
        frame = pd.DataFrame(rows, columns=columns)
        for column in ("created_at", "period_start"):
            frame[column] = pd.to_datetime(frame[column], utc=True)
        return frame

    # --- charging --------------------------------------------------------------------------------

    def spend(self, user_id: str, query: str, mechanism: Mechanism) -> Charge:
        """Charge ``mechanism`` for ``query`` to the user's budget, or raise :class:`BudgetExhausted`.
        Call it before releasing anything; apply the mechanism's noise yourself (or use the
        ``release_*`` methods, which do both)."""
        if not isinstance(query, str) or not _QUERY_NAME.match(query):
            error = "must be 1 to 100 characters of a-z, 0-9, '_', '.', ':' or '-', starting with a letter or digit"
            raise ValidationFailed(f"query name {error} (got {query!r})", [{"field": "query", "error": error}])
        user_id = str(user_id)
        with self._lock_of(user_id):
            now = self.clock()
            start, reset = self.period(now)
            events = self._events(user_id, start)
            before = self._composed(events)
            after = self._composed([*events, mechanism.event()])
            requested = float(mechanism.epsilon)
            if after > self.epsilon + TOLERANCE:
                self._refuse(user_id, query, mechanism, before, after, now, reset)
            entry = LedgerEntry(str(uuid.uuid4()), query, mechanism.name, mechanism.parameters(),
                                _round(max(0.0, after - before)), _round(after), iso(start), iso(now))
            self.db.execute(
                "INSERT INTO privacy_ledger (id, user_id, period_start, query, mechanism, parameters, epsilon_spent, "
                "composed_epsilon, created_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (entry.id, user_id, start.timestamp(), query, mechanism.name, _json(entry.parameters),
                 entry.epsilon_spent, entry.composed_epsilon, now.timestamp()))
        remaining = _round(max(0.0, self.epsilon - after))
        charge = Charge(entry, _round(before), _round(after), remaining, iso(reset))
        self._publish(user_id, {"query": query, "mechanism": mechanism.name, "requested_epsilon": requested,
                                "epsilon_spent": entry.epsilon_spent, "spent": charge.epsilon_after,
                                "remaining": remaining, "refused": False, "period_start": entry.period_start},
                      entry.epsilon_spent)
        return charge

    def release_counts(self, user_id: str, query: str, counts: Mapping[str, float] | Sequence[float] | np.ndarray,
                       epsilon: float, sensitivity: float = 1.0) -> Release:
        """Counts or sums with Laplace noise, ``epsilon``-DP when adding or removing one record
        changes the whole vector by at most ``sensitivity`` in L1 (a histogram where each record
        falls in one bin: 1). The result has the input's shape (a dict keeps its keys)."""
        mechanism = Laplace(epsilon, sensitivity)
        keys = list(counts) if isinstance(counts, Mapping) else None
        values = np.asarray([counts[k] for k in keys] if keys is not None else counts, dtype=np.float64)
        if values.size and not np.all(np.isfinite(values)):
            raise ValidationFailed("counts must be finite numbers", [{"field": "counts", "error": "not finite"}])
        charge = self.spend(user_id, query, mechanism)
        noised = values + mechanism.noise(values.shape, fresh_rng())
        if keys is not None:
            return Release(dict(zip(keys, noised.tolist(), strict=True)), charge, mechanism)
        return Release(noised if isinstance(counts, np.ndarray) else noised.tolist(), charge, mechanism)

    def release_vector(self, user_id: str, query: str, vector: Sequence[float] | np.ndarray, epsilon: float,
                       clip_norm: float, delta: float | None = None) -> Release:
        """A vector (e.g. one user's federated model update) clipped to L2 norm ``clip_norm`` (its L2
        sensitivity when one user's vector is added or removed) plus Gaussian noise calibrated to
        ``(epsilon, delta)`` (``delta`` defaults to the budget's)."""
        check_number("clip_norm", clip_norm)
        values = np.asarray(vector, dtype=np.float64).ravel()
        if not np.all(np.isfinite(values)):
            raise ValidationFailed("vector must hold finite numbers", [{"field": "vector", "error": "not finite"}])
        mechanism = Gaussian(epsilon, self.delta if delta is None else delta, clip_norm)
        charge = self.spend(user_id, query, mechanism)
        norm = float(np.linalg.norm(values))
        clipped = norm > clip_norm
        if clipped:
            values = values * (clip_norm / norm)
        noised = values + mechanism.noise(values.shape, fresh_rng())
        return Release(noised.reshape(np.shape(vector)), charge, mechanism, clipped)

    # --- inside ----------------------------------------------------------------------------------

    def _lock_of(self, user_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(user_id, threading.Lock())

    def _events(self, user_id: str, start: datetime) -> list[Event]:
        rows = self.db.query("SELECT mechanism, parameters FROM privacy_ledger WHERE user_id = ? AND period_start = ?",
                             (str(user_id), start.timestamp()))
        return [Event(r["mechanism"], float(_parse(r["parameters"])["noise_multiplier"])) for r in rows]

    def _composed(self, events: Sequence[Event]) -> float:
        return self.accountant.epsilon(events, self.delta)

    def _refuse(self, user_id: str, query: str, mechanism: Mechanism, before: float, after: float, now: datetime,
                reset: datetime) -> None:
        remaining = _round(max(0.0, self.epsilon - before))
        requested = float(mechanism.epsilon)
        details = {"remaining_epsilon": remaining, "reset_at": iso(reset), "requested_epsilon": requested,
                   "spent_epsilon": _round(before), "epsilon": self.epsilon, "delta": self.delta,
                   "would_compose_to": _round(after), "query": query}
        self._publish(user_id, {"query": query, "mechanism": mechanism.name, "requested_epsilon": requested,
                                "epsilon_spent": 0.0, "spent": _round(before), "remaining": remaining,
                                "refused": True, "reset_at": iso(reset)}, 0.0)
        retry_after = max(1, math.ceil((reset - now).total_seconds()))
        raise BudgetExhausted(
            f"privacy budget exhausted: {query} asks for epsilon {requested:g}, which would compose to "
            f"{after:.4f} > privacy.epsilon {self.epsilon:g} (delta {self.delta:g}); {remaining:.4f} remains "
            f"until the budget resets at {iso(reset)}", retry_after, details)

    def _publish(self, user_id: str, data: dict[str, Any], value: float) -> None:
        if self.signals is not None:
            self.signals.publish(SignalKind.PRIVACY_SPEND, data, user_id=user_id, value=value)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _parse(text: str) -> dict[str, Any]:
    return json.loads(text)


def _entry(row: dict[str, Any]) -> LedgerEntry:
    return LedgerEntry(row["id"], row["query"], row["mechanism"], _parse(row["parameters"]), row["epsilon_spent"],
                       row["composed_epsilon"], iso(datetime.fromtimestamp(row["period_start"], UTC)),
                       iso(datetime.fromtimestamp(row["created_ts"], UTC)))


def build_privacy(settings: Any, db: Any, signals: Any = None) -> PrivacyBudget | None:
    """The server's budget while ``privacy.enabled``, else None (the routes answer 503)."""
    return PrivacyBudget(settings.privacy, db, signals) if settings.privacy.enabled else None
