"""Rooms (one satellite each) and their presence, in SQLite.

A new room is offline, at the configured ``default_volume`` (80), not muted, never seen. A
heartbeat (on the status topic) makes it online and sets ``last_seen``; :meth:`RoomStore.check_stale`
(meant to run every ``stale_check_interval_secs``, 30 s) turns offline every online room whose last
heartbeat is ``heartbeat_timeout_ms`` (30 s) old or older. Rooms belong to the household, not to one
user: every key sees the same rooms. Room names are 1..100 characters, one line, unique ignoring
case; they are labels, not user content, and are stored in clear.

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


class ControlPublisher(Protocol):
    def publish_control(self, message: ControlMessage) -> None: ...


class NullControlPublisher:
    """Publishes nothing (no bus connected yet)."""

    def publish_control(self, message: ControlMessage) -> None:
        return None


def _row(row: dict[str, Any]) -> Room:
    return Room(id=row["id"], name=row["name"], is_online=bool(row["is_online"]), volume=int(row["volume"]),
                muted=bool(row["muted"]), last_seen=row["last_seen"], created_at=row["created_at"])


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

    def list(self) -> list[Room]:
        """Every room, oldest first (then by name)."""
        return [_row(r) for r in self.db.query("SELECT * FROM voice_rooms ORDER BY created_at, name COLLATE NOCASE")]

    def get(self, room_id: str) -> Room:
        row = self.db.one("SELECT * FROM voice_rooms WHERE id = ?", (room_id,))
        if row is None:
            raise NotFoundError(f"room {room_id} not found")
        return _row(row)

    def create(self, name: str) -> Room:
        name = clean_name(name)
        now = iso(self.clock())
        room_id = str(uuid4())
        try:
            self.db.execute(
                "INSERT INTO voice_rooms (id, name, is_online, volume, muted, last_seen, created_at, updated_at) "
                "VALUES (?, ?, 0, ?, 0, NULL, ?, ?)",
                (room_id, name, self.settings.default_volume, now, now),
            )
        except apsw.ConstraintError:
            raise ConflictError(f"a room named {name!r} already exists", {"name": name}) from None
        return self.get(room_id)

    def delete(self, room_id: str) -> None:
        self.get(room_id)
        self.db.execute("DELETE FROM voice_rooms WHERE id = ?", (room_id,))

    def update(self, room_id: str, *, volume: int | None = None, muted: bool | None = None) -> Room:
        """Change volume (0..100) and/or mute; a change is sent to the satellite as a control message."""
        if volume is not None and not 0 <= volume <= 100:
            raise ValidationFailed("volume must be between 0 and 100",
                                   [{"field": "volume", "error": "must be between 0 and 100"}])
        room = self.get(room_id)
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
