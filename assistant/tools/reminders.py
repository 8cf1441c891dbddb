"""create_reminder and list_reminders (capability ``reminders``), stored in SQLite and fired by the scheduler.

- Storage: a :class:`ReminderStore` (``SqliteReminderStore``, backend id ``"sqlite"``) keeps the text
  sealed like chat messages and ``due_at`` as a fixed-width UTC ISO string, so ``due_at <= now`` is a
  string comparison served by the ``(fired_at, due_at)`` index.
- Times: the model gives either ``at`` (ISO 8601; a naive time is read in ``[reminders] timezone``)
  or ``in_minutes``; answers show times in that zone with their offset.
- Firing is at most once. :func:`fire_due_reminders` first *claims* a due reminder: one conditional
  UPDATE sets ``fired_at`` and ``delivered_via = 'pending'`` only if it is still unfired, so two runs
  never both claim it. Only then does it deliver, and it records the outcome with ``mark_fired``
  (``delivered_via`` = the channel, or ``"none"`` with the error in ``delivery_detail``). A crash
  between claim and delivery leaves the reminder ``pending``, never delivered twice: a missed
  reminder is better than one repeated at every restart.
- Delivery: a :class:`ReminderDelivery` channel. ``MessengerDelivery`` posts Graph-style messages
  (through the webhook's sender, :mod:`assistant.messaging.sender`) to the sender id that
  ``[messenger] allowed_senders`` maps to the user; users with no sender, and setups with no messenger,
  get ``LogDelivery``, which logs the reminder's id and owner but not its text (the text stays sealed:
  it is never written to a log).
- :class:`ReminderRunner` (store + delivery + zone) is the capability's backend; the tools use its
  store and the scheduler calls its ``run_once``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Annotated, Any, Protocol
from uuid import UUID, uuid4
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from pydantic import Field

from assistant.clock import iso, utcnow
from assistant.crypto import SealContext, Sealer
from assistant.errors import ConfigError
from assistant.messaging.sender import GraphMessageSender, MessageSendError, Recipient
from assistant.storage.db import Database
from assistant.tools.base import (
    Capability,
    CapabilityDeps,
    CapabilityUnavailable,
    ToolContext,
    ToolError,
    pick_backend,
    tool,
)

log = logging.getLogger("assistant.reminders")

PENDING = "pending"  # claimed for delivery, outcome not yet recorded
NOT_DELIVERED = "none"
MAX_MINUTES = 5 * 366 * 24 * 60  # five years ahead
MAX_LISTED = 50


# --- the store -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reminder:
    id: str
    user_id: str
    text: str
    due_at: datetime  # aware, UTC
    created_at: datetime
    fired_at: datetime | None = None
    delivered_via: str | None = None
    delivery_detail: str | None = None


class ReminderStore(Protocol):
    def add(self, user_id: str, text: str, due_at: datetime) -> Reminder: ...

    def list_for_user(self, user_id: str, include_fired: bool = False) -> list[Reminder]: ...

    def due(self, now: datetime) -> list[Reminder]:
        """Unfired reminders with ``due_at <= now``, earliest first."""
        ...

    def claim(self, reminder_id: str, fired_at: datetime) -> bool:
        """Mark an unfired reminder fired (``pending``); False if it was already fired or claimed."""
        ...

    def mark_fired(self, reminder_id: str, fired_at: datetime, channel: str, detail: str | None) -> None: ...


def _moment(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


class SqliteReminderStore:
    """Reminders in the service's SQLite database (table ``reminders``, migration m004)."""

    def __init__(self, db: Database, sealer: Sealer | None = None):
        self.db = db
        self.sealer = sealer or Sealer(None)

    def _reminder(self, row: dict[str, Any]) -> Reminder:
        return Reminder(
            id=row["id"], user_id=row["user_id"], text=self.sealer.open(
                row["text_sealed"], SealContext("reminders", "text_sealed", row["id"], row["user_id"])),
            due_at=_moment(row["due_at"]), created_at=_moment(row["created_at"]), fired_at=_moment(row["fired_at"]),
            delivered_via=row["delivered_via"], delivery_detail=row["delivery_detail"],
        )

    def add(self, user_id: str, text: str, due_at: datetime) -> Reminder:
        reminder_id, due, created = str(uuid4()), iso(due_at), iso()
        self.db.execute(
            "INSERT INTO reminders (id, user_id, text_sealed, due_at, created_at) VALUES (?, ?, ?, ?, ?)",
            (reminder_id, str(user_id),
             self.sealer.seal(text, SealContext("reminders", "text_sealed", reminder_id, str(user_id))), due, created),
        )
        return Reminder(reminder_id, str(user_id), text, _moment(due), _moment(created))

    def list_for_user(self, user_id: str, include_fired: bool = False) -> list[Reminder]:
        unfired = "" if include_fired else " AND fired_at IS NULL"
        rows = self.db.query(
            f"SELECT * FROM reminders WHERE user_id = ?{unfired} ORDER BY due_at, created_at, id", (str(user_id),)
        )
        return [self._reminder(r) for r in rows]

    def get(self, reminder_id: str) -> Reminder | None:
        row = self.db.one("SELECT * FROM reminders WHERE id = ?", (reminder_id,))
        return None if row is None else self._reminder(row)

    def due(self, now: datetime) -> list[Reminder]:
        rows = self.db.query(
            "SELECT * FROM reminders WHERE fired_at IS NULL AND due_at <= ? ORDER BY due_at, created_at, id",
            (iso(now),),
        )
        return [self._reminder(r) for r in rows]

    def claim(self, reminder_id: str, fired_at: datetime) -> bool:
        with self.db.transaction() as db:
            claimed = db.query(
                "UPDATE reminders SET fired_at = ?, delivered_via = ? WHERE id = ? AND fired_at IS NULL RETURNING id",
                (iso(fired_at), PENDING, reminder_id),
            )
        return bool(claimed)

    def mark_fired(self, reminder_id: str, fired_at: datetime, channel: str, detail: str | None) -> None:
        self.db.execute(
            "UPDATE reminders SET fired_at = ?, delivered_via = ?, delivery_detail = ? WHERE id = ?",
            (iso(fired_at), channel, detail, reminder_id),
        )


BACKENDS: dict[str, Callable[..., ReminderStore]] = {"sqlite": SqliteReminderStore}


# --- delivery ------------------------------------------------------------------------------------


class DeliveryError(Exception):
    """A channel could not deliver a reminder (recorded as ``delivered_via = "none"``)."""


@dataclass(frozen=True)
class DeliveryReceipt:
    channel: str  # recorded as delivered_via
    detail: str | None = None


class ReminderDelivery(Protocol):
    def deliver(self, reminder: Reminder) -> DeliveryReceipt:
        """Deliver or raise; the receipt names the channel that carried it."""
        ...


class LogDelivery:
    """No channel configured: the reminder is logged (id, owner, due time; never its text)."""

    def deliver(self, reminder: Reminder) -> DeliveryReceipt:
        log.info("reminder %s of user %s is due (%s); no messaging channel for this user",
                 reminder.id, reminder.user_id, iso(reminder.due_at))
        return DeliveryReceipt("log", "no messaging channel for this user")


class MessengerDelivery:
    """Reminders through the shared Graph-style sender (:class:`~assistant.messaging.sender.GraphMessageSender`),
    Messenger style: ``POST {api_base_url}/me/messages?access_token=...`` with the ``CONFIRMED_EVENT_UPDATE`` tag.

    ``allowed_senders`` maps a platform sender id to a user id (as ``[messenger] allowed_senders``); a user with
    no sender id is handed to ``fallback``. Error details never include the URL (it holds the token).
    """

    def __init__(self, api_base_url: str, access_token: str, allowed_senders: Mapping[str, UUID | str], *,
                 fallback: ReminderDelivery | None = None, timeout_secs: float = 15.0,
                 client: httpx.Client | None = None):
        self.sender = GraphMessageSender(api_base_url, access_token, timeout_secs=timeout_secs, client=client)
        self._recipients: dict[str, str] = {}
        for sender, user in allowed_senders.items():
            self._recipients.setdefault(str(user), str(sender))
        self._fallback = fallback or LogDelivery()

    def deliver(self, reminder: Reminder) -> DeliveryReceipt:
        recipient = self._recipients.get(reminder.user_id)
        if recipient is None:
            return self._fallback.deliver(reminder)
        try:
            sent = self.sender.send_text(Recipient(recipient), f"Reminder: {reminder.text}",
                                         tag="CONFIRMED_EVENT_UPDATE")
        except MessageSendError as exc:
            raise DeliveryError(str(exc)) from None
        return DeliveryReceipt("messenger", f"message_id={sent.message_id}" if sent.message_id else None)

    def close(self) -> None:
        self.sender.close()


def create_delivery(settings: Any) -> ReminderDelivery:
    """Messenger when ``[messenger]`` is enabled with an access token; otherwise the log."""
    messenger = settings.messenger
    if messenger.enabled and messenger.access_token:
        return MessengerDelivery(messenger.api_base_url, messenger.access_token, messenger.allowed_senders)
    return LogDelivery()


# --- firing --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FiredReminder:
    reminder: Reminder
    fired_at: datetime
    delivered_via: str
    detail: str | None


def _deliver(delivery: ReminderDelivery, reminder: Reminder) -> DeliveryReceipt:
    try:
        return delivery.deliver(reminder)
    except Exception as exc:  # noqa: BLE001 - any channel failure is recorded on the reminder, never retried
        log.warning("reminder %s could not be delivered: %s", reminder.id, exc)
        return DeliveryReceipt(NOT_DELIVERED, f"{exc}"[:500] or type(exc).__name__)


def fire_due_reminders(store: ReminderStore, delivery: ReminderDelivery,
                       now: datetime | None = None) -> list[FiredReminder]:
    """Claim, deliver and record every reminder due at ``now``; each is fired at most once."""
    now = now or utcnow()
    fired = []
    for reminder in store.due(now):
        if not store.claim(reminder.id, now):
            continue  # another run got it first
        receipt = _deliver(delivery, reminder)
        store.mark_fired(reminder.id, now, receipt.channel, receipt.detail)
        fired.append(FiredReminder(reminder, now, receipt.channel, receipt.detail))
    return fired


@dataclass
class ReminderRunner:
    """The capability's backend: the tools use ``store``, the scheduler calls ``run_once``."""

    store: ReminderStore
    delivery: ReminderDelivery
    zone: tzinfo = UTC  # how naive times are read and answers are shown
    clock: Callable[[], datetime] = field(default=utcnow)

    def run_once(self, now: datetime | None = None) -> list[FiredReminder]:
        return fire_due_reminders(self.store, self.delivery, now or self.clock())

    def close(self) -> None:
        close = getattr(self.delivery, "close", None)
        if callable(close):
            close()


# --- tools ---------------------------------------------------------------------------------------


def _runner(ctx: ToolContext) -> ReminderRunner:
    return ctx.backend("reminders")


def _shown(moment: datetime | None, zone: tzinfo) -> str | None:
    return None if moment is None else moment.astimezone(zone).isoformat(timespec="seconds")


def _due_time(at: str | None, in_minutes: int | None, zone: tzinfo, now: datetime) -> datetime:
    if (at is None) == (in_minutes is None):
        raise ToolError("give exactly one of at (an ISO 8601 date and time) or in_minutes")
    if in_minutes is not None:
        return now + timedelta(minutes=in_minutes)
    text = at.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(f"at must be an ISO 8601 date and time such as 2025-03-01T09:30, not {at!r}") from None
    if len(text) <= 10:  # a date alone would mean midnight
        raise ToolError(f"at needs a time of day, such as {text}T09:00")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment.astimezone(UTC)


@tool("reminders", icon="⏰")
def create_reminder(
    ctx: ToolContext,
    text: Annotated[str, Field(min_length=1, max_length=1000, description="What to remind the user of.")],
    at: Annotated[str | None, Field(description="When, as an ISO 8601 date and time, e.g. 2025-03-01T09:30. "
                                                "Without an offset it is local time.")] = None,
    in_minutes: Annotated[int | None, Field(ge=1, le=MAX_MINUTES, description="Or: how many minutes from now.")] = None,
) -> dict:
    """Set a reminder for the user at a time (at) or after some minutes (in_minutes)."""
    runner = _runner(ctx)
    if not text.strip():
        raise ToolError("text must not be empty")
    now = runner.clock()
    due = _due_time(at, in_minutes, runner.zone, now)
    if due <= now:
        raise ToolError(f"{_shown(due, runner.zone)} is in the past; it is now {_shown(now, runner.zone)}")
    reminder = runner.store.add(str(ctx.user_id), text.strip(), due)
    return {"id": reminder.id, "text": reminder.text, "due_at": _shown(reminder.due_at, runner.zone)}


def _most_relevant(reminders: list[Reminder]) -> list[Reminder]:
    """At most MAX_LISTED: the soonest pending ones, then the latest fired ones; ordered by due time."""
    pending = [r for r in reminders if r.fired_at is None][:MAX_LISTED]
    fired = [r for r in reminders if r.fired_at is not None]
    room = MAX_LISTED - len(pending)
    kept = fired[-room:] if room > 0 else []
    return sorted(kept + pending, key=lambda r: (r.due_at, r.created_at, r.id))


@tool("reminders", icon="📋")
def list_reminders(
    ctx: ToolContext,
    include_fired: Annotated[bool, Field(description="Also list reminders that already went off.")] = False,
) -> list[dict]:
    """List the user's reminders, soonest first."""
    runner = _runner(ctx)
    zone = runner.zone
    found = _most_relevant(runner.store.list_for_user(str(ctx.user_id), include_fired))
    return [{"id": r.id, "text": r.text, "due_at": _shown(r.due_at, zone), "fired_at": _shown(r.fired_at, zone),
             "delivered_via": r.delivered_via} for r in found]


REMINDER_TOOLS = (create_reminder, list_reminders)


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"reminders.timezone: unknown time zone {name!r}") from None


def _create(deps: CapabilityDeps) -> ReminderRunner:
    section = deps.settings.reminders
    if deps.db is None:
        raise CapabilityUnavailable("reminders need the service database")
    factory = pick_backend("reminders", BACKENDS, section.backend)
    zone = _zone(section.timezone)
    return ReminderRunner(factory(deps.db, deps.sealer), create_delivery(deps.settings), zone)


CAPABILITY = Capability(
    "reminders", REMINDER_TOOLS, configured=lambda settings: settings.reminders.enabled, create=_create,
    description="reminders stored in SQLite, delivered by messenger (or logged) when due",
)
