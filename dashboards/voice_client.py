"""Where the voice-rooms dashboard reads from and acts through: the package in this process, or the HTTP API.

:class:`VoiceClient` is what :mod:`dashboards.voice_rooms` needs; both implementations answer with the
JSON shapes of the ``/v1/voice`` routes (``RoomOut``, ``SessionOut``, ``VoiceStatusOut`` of
``api/schemas/voice.py``):

- ``status()``: ``GET /v1/voice/status`` (``enabled`` false while voice is disabled);
- ``rooms()``: ``GET /v1/voice/rooms`` -> the rooms (the key's user's; in process: every room);
- ``sessions(rooms)``: the active session of each room (``GET /v1/voice/rooms/{id}/session``, 404 when
  none; in process: the session manager's);
- ``update(room_id, volume=, muted=)``: ``PATCH /v1/voice/rooms/{id}`` -> the room.

Voice sessions live in the memory of the process that runs the voice pipeline: over HTTP the page sees
the server's; in process only its own (none).
"""

from __future__ import annotations

from typing import Any, Protocol

from assistant.clock import iso
from assistant.errors import AssistantError
from assistant.voice.rooms import Room
from assistant.voice.service import VoiceService, VoiceStatus
from assistant.voice.sessions import VoiceSession
from dashboards.client import ClientError, HttpApi

PREFIX = "/v1/voice"


class VoiceClient(Protocol):
    def status(self) -> dict[str, Any]: ...

    def rooms(self) -> list[dict[str, Any]]: ...

    def sessions(self, rooms: list[dict[str, Any]]) -> list[dict[str, Any]]: ...

    def update(self, room_id: str, *, volume: int | None = None, muted: bool | None = None) -> dict[str, Any]: ...

    def close(self) -> None: ...


def room_json(room: Room) -> dict[str, Any]:
    return {"id": room.id, "owner_user_id": room.owner_user_id, "name": room.name, "is_online": room.is_online,
            "volume": room.volume, "muted": room.muted, "last_seen": room.last_seen, "created_at": room.created_at}


def session_json(s: VoiceSession) -> dict[str, Any]:
    return {"id": s.id, "room_id": s.room_id, "speaker_id": s.speaker_id, "conversation_id": s.conversation_id,
            "state": s.state.value, "follow_up_window_ms": s.follow_up_window_ms, "exchange_count": s.exchange_count,
            "started_at": iso(s.started_at), "last_activity_at": iso(s.last_activity_at)}


def status_json(s: VoiceStatus) -> dict[str, Any]:
    return {"enabled": s.enabled, "wake_word_available": s.wake_word_available,
            "speaker_id_available": s.speaker_id_available, "mqtt_connected": s.mqtt_connected,
            "active_rooms": s.active_rooms, "active_sessions": s.active_sessions}


class LocalVoiceClient:
    """Every room of ``voice`` (this process); None: voice is disabled."""

    def __init__(self, voice: VoiceService | None):
        self.voice = voice

    def status(self) -> dict[str, Any]:
        return status_json(self.voice.status() if self.voice is not None else VoiceStatus.disabled())

    def rooms(self) -> list[dict[str, Any]]:
        return [] if self.voice is None else [room_json(r) for r in self.voice.rooms.list()]

    def sessions(self, rooms: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [] if self.voice is None else [session_json(s) for s in self.voice.sessions.active_sessions()]

    def update(self, room_id: str, *, volume: int | None = None, muted: bool | None = None) -> dict[str, Any]:
        if self.voice is None:
            raise ClientError("voice is disabled", 503)
        try:
            return room_json(self.voice.rooms.update(room_id, volume=volume, muted=muted))
        except AssistantError as exc:
            raise ClientError(str(exc), 404 if exc.code == "NOT_FOUND" else 400) from exc

    def close(self) -> None:
        pass


class HttpVoiceClient(HttpApi):
    """The rooms of the API key's user on the server at ``base_url``."""

    def status(self) -> dict[str, Any]:
        return self.send("GET", PREFIX + "/status")

    def rooms(self) -> list[dict[str, Any]]:
        return self.send("GET", PREFIX + "/rooms")["rooms"]

    def sessions(self, rooms: list[dict[str, Any]]) -> list[dict[str, Any]]:
        found = []
        for room in rooms:
            try:
                found.append(self.send("GET", f"{PREFIX}/rooms/{room['id']}/session"))
            except ClientError as exc:
                if exc.status != 404:  # 404: no active session in that room
                    raise
        return found

    def update(self, room_id: str, *, volume: int | None = None, muted: bool | None = None) -> dict[str, Any]:
        body = {k: v for k, v in (("volume", volume), ("muted", muted)) if v is not None}
        return self.send("PATCH", f"{PREFIX}/rooms/{room_id}", json=body)
