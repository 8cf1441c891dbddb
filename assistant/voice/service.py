"""The voice subsystem as the API sees it: rooms, sessions and status.

Built only when the configuration has a ``[voice]`` section (:func:`build_voice` returns None
otherwise). The engine and bus flags of :class:`VoiceStatus` are False until the audio pipeline
(wake word, speaker identification, MQTT bus) sets them.
"""

from __future__ import annotations

from dataclasses import dataclass

from assistant.config import Settings, VoiceSettings
from assistant.storage.db import Database
from assistant.voice.rooms import ControlPublisher, NullControlPublisher, RoomStore
from assistant.voice.sessions import SessionManager


@dataclass(frozen=True)
class VoiceStatus:
    enabled: bool
    wake_word_available: bool
    speaker_id_available: bool
    mqtt_connected: bool
    active_rooms: int  # rooms online now
    active_sessions: int  # sessions not ended now

    @classmethod
    def disabled(cls) -> VoiceStatus:
        return cls(False, False, False, False, 0, 0)


class VoiceService:
    def __init__(self, settings: VoiceSettings, rooms: RoomStore, sessions: SessionManager):
        self.settings = settings
        self.rooms = rooms
        self.sessions = sessions
        self.wake_word_available = False
        self.speaker_id_available = False
        self.mqtt_connected = False

    def status(self) -> VoiceStatus:
        return VoiceStatus(True, self.wake_word_available, self.speaker_id_available, self.mqtt_connected,
                           self.rooms.online_count(), len(self.sessions.active_sessions()))

    def delete_room(self, room_id: str) -> None:
        """Delete the room; its active session, if any, ends (``room_deleted``)."""
        self.rooms.delete(room_id)
        if self.sessions.get_active_session(room_id) is not None:
            self.sessions.end_session(room_id, "room_deleted")

    def check_stale(self) -> list[str]:
        """The periodic presence check (every ``[voice.rooms] stale_check_interval_secs``)."""
        return self.rooms.check_stale()


def build_voice(settings: Settings, db: Database, publisher: ControlPublisher | None = None) -> VoiceService | None:
    voice = settings.voice
    if voice is None:
        return None
    rooms = RoomStore(db, voice.rooms, publisher or NullControlPublisher())
    return VoiceService(voice, rooms, SessionManager(voice.conversation))
