"""Rooms (one satellite each) and their presence, in SQLite.

A new room is offline, at the configured ``default_volume`` (80), not muted, never seen. A
heartbeat (on the status topic) makes it online and sets ``last_seen``; :meth:`RoomStore.check_stale`
(meant to run every ``stale_check_interval_secs``, 30 s) turns offline every online room whose last
heartbeat is ``heartbeat_timeout_ms`` (30 s) old or older. Room names are 1..100 characters, one
line, unique per owner ignoring case; they are labels, not user content, and are stored in clear.

A room belongs to a user (``owner_user_id``): the user of the key that created it, or, for a room
created without one (by a satellite, a notebook or a benchmark), the installation owner
(:meth:`assistant.security.KeyStore.owner_user_id`). Methods that take ``owner`` act only on that
user's rooms (another user's room is :class:`NotFoundError`, as if it did not exist); ``owner=None``
means every room (administrators, and the pipeline, which serves every satellite).

Volume and mute changes are sent to the room's satellite as control messages (``volume`` with the new
value, ``mute``/``unmute``; :class:`assistant.voice.messages.ControlMessage`) through a
:class:`ControlPublisher` (the bus publishes them on ``{prefix}/control/{room_id}``, QoS 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import uuid4

import apsw

from assistant.clock import iso, utcnow
from assistant.config import RoomSettings
from assistant.errors import ConflictError, NotFoundError, ValidationFailed
from assistant.security import KeyStore
from assistant.storage.db import Database
from assistant.voice.messages import ControlAction, ControlMessage

MAX_NAME_CHARS = 100


@dataclass(frozen=True)
class Room:
    id: str
    name: str
    is_online: bool
    volume: int
    muted: bool
    last_seen: str | None
    created_at: str
    owner_user_id: str


class ControlPublisher(Protocol):
    def publish_control(self, message: ControlMessage) -> None: ...


class NullControlPublisher:
    """Publishes nothing (no bus connected yet)."""

    def publish_control(self, message: ControlMessage) -> None:
        return None


def _row(row: dict[str, Any]) -> Room:
    return Room(id=row["id"], name=row["name"], is_online=bool(row["is_online"]), volume=int(row["volume"]),
                muted=bool(row["muted"]), last_seen=row["last_seen"], created_at=row["created_at"],
                owner_user_id=row["owner_user_id"])


def clean_name(name: str) -> str:
    name = name.strip()
    problem = None
    if not name:
        problem = "must not be empty"
    elif len(name) > MAX_NAME_CHARS:
        problem = f"must be at most {MAX_NAME_CHARS} characters"
    elif any(ord(c) < 32 or ord(c) == 127 for c in name):
        problem = "must be one line without control characters"
    if problem:
        raise ValidationFailed(f"name {problem}", [{"field": "name", "error": problem}])
    return name


@dataclass
class RoomStore:
    db: Database
    settings: RoomSettings = field(default_factory=RoomSettings)
    publisher: ControlPublisher = field(default_factory=NullControlPublisher)
    clock: Callable[[], datetime] = utcnow

    def list(self, owner: str | None = None) -> list[Room]:
        """Every room of ``owner`` (every room when None), oldest first (then by name)."""
        where, params = ("WHERE owner_user_id = ?", (owner,)) if owner is not None else ("", ())
        return [_row(r) for r in self.db.query(
            f"SELECT * FROM voice_rooms {where} ORDER BY created_at, name COLLATE NOCASE", params)]

    def get(self, room_id: str, owner: str | None = None) -> Room:
        """The room; NotFoundError when it does not exist or (with ``owner``) belongs to another user."""
        row = self.db.one("SELECT * FROM voice_rooms WHERE id = ?", (room_id,))
        if row is None or (owner is not None and row["owner_user_id"] != owner):
            raise NotFoundError(f"room {room_id} not found")
        return _row(row)

    def create(self, name: str, owner: str | None = None) -> Room:
        """A new room of ``owner`` (None: the installation owner, as for a room a satellite announces)."""
        name = clean_name(name)
        owner = owner if owner is not None else str(KeyStore(self.db).owner_user_id())
        now = iso(self.clock())
        room_id = str(uuid4())
        try:
            self.db.execute(
                "INSERT INTO voice_rooms (id, owner_user_id, name, is_online, volume, muted, last_seen, created_at, "
                "updated_at) VALUES (?, ?, ?, 0, ?, 0, NULL, ?, ?)",
                (room_id, owner, name, self.settings.default_volume, now, now),
            )
        except apsw.ConstraintError:
            raise ConflictError(f"a room named {name!r} already exists", {"name": name}) from None
        return self.get(room_id)

    def delete(self, room_id: str, owner: str | None = None) -> None:
        self.get(room_id, owner)
        self.db.execute("DELETE FROM voice_rooms WHERE id = ?", (room_id,))

    def update(self, room_id: str, *, volume: int | None = None, muted: bool | None = None,
               owner: str | None = None) -> Room:
        """Change volume (0..100) and/or mute; a change is sent to the satellite as a control message."""
        if volume is not None and not 0 <= volume <= 100:
            raise ValidationFailed("volume must be between 0 and 100",
                                   [{"field": "volume", "error": "must be between 0 and 100"}])
        room = self.get(room_id, owner)
        new_volume = room.volume if volume is None else volume
        new_muted = room.muted if muted is None else muted
        if (new_volume, new_muted) == (room.volume, room.muted):
            return room
        self.db.execute("UPDATE voice_rooms SET volume = ?, muted = ?, updated_at = ? WHERE id = ?",
                        (new_volume, int(new_muted), iso(self.clock()), room_id))
        now = self.clock()
        if new_volume != room.volume:
            self.publisher.publish_control(ControlMessage(room_id, ControlAction.VOLUME, new_volume, at=now))
        if new_muted != room.muted:
            action = ControlAction.MUTE if new_muted else ControlAction.UNMUTE
            self.publisher.publish_control(ControlMessage(room_id, action, at=now))
        return self.get(room_id)

    def heartbeat(self, room_id: str, now: datetime | None = None) -> Room:
        """A heartbeat from the room's satellite: online, ``last_seen`` = now. Unknown room: NotFoundError."""
        self.get(room_id)
        self.db.execute("UPDATE voice_rooms SET is_online = 1, last_seen = ? WHERE id = ?",
                        (iso(now or self.clock()), room_id))
        return self.get(room_id)

    def check_stale(self, now: datetime | None = None) -> list[str]:
        """Turn offline every online room without a heartbeat for ``heartbeat_timeout_ms``; their ids."""
        cutoff = iso((now or self.clock()) - timedelta(milliseconds=self.settings.heartbeat_timeout_ms))
        with self.db.transaction():
            stale = [r["id"] for r in self.db.query(
                "SELECT id FROM voice_rooms WHERE is_online = 1 AND (last_seen IS NULL OR last_seen <= ?)", (cutoff,))]
            self.db.executemany("UPDATE voice_rooms SET is_online = 0 WHERE id = ?", [(i,) for i in stale])
        return stale

    def online_count(self) -> int:
        return int(self.db.scalar("SELECT count(*) FROM voice_rooms WHERE is_online = 1"))
