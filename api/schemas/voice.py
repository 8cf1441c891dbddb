from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.common import ONE_LINE
from assistant.clock import iso
from assistant.voice.rooms import MAX_NAME_CHARS, Room
from assistant.voice.service import VoiceStatus
from assistant.voice.sessions import VoiceSession
from assistant.voice.speakers import SpeakerProfile


class RoomCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description=f"1..{MAX_NAME_CHARS} characters, one line (trimmed); unique among the "
                                  "caller's rooms, ignoring case.",
                      json_schema_extra={"maxLength": MAX_NAME_CHARS, "pattern": ONE_LINE})


class RoomUpdate(BaseModel):
    """Only supplied fields change; a change is sent to the room's satellite on its control topic."""

    model_config = ConfigDict(extra="forbid")

    volume: int | None = Field(None, ge=0, le=100, description="Playback volume 0..100.")
    muted: bool | None = Field(None, description="Mute the room's playback.")


class RoomOut(BaseModel):
    id: str
    owner_user_id: str = Field(description="Addition to the spec's shape: the user the room belongs to (the key's "
                                           "user that created it; the installation owner for rooms that existed "
                                           "before rooms had owners).")
    name: str
    is_online: bool
    volume: int = Field(ge=0, le=100)
    muted: bool
    last_seen: str | None = Field(description="Last heartbeat; null until the satellite has sent one.")
    created_at: str

    @classmethod
    def of(cls, room: Room) -> RoomOut:
        return cls(id=room.id, owner_user_id=room.owner_user_id, name=room.name, is_online=room.is_online, volume=room.volume, muted=room.muted,
                   last_seen=room.last_seen, created_at=room.created_at)


class RoomList(BaseModel):
    rooms: list[RoomOut]
    total: int


class SessionOut(BaseModel):
    id: str
    room_id: str
    speaker_id: str | None = Field(description="The profile id of the speaker of the latest exchange, when "
                                  "identified confidently (a reliable profile); null otherwise.")
    conversation_id: str
    state: str = Field(description="listening, processing, responding or follow_up (an active session is "
                                   "never ended).")
    follow_up_window_ms: int
    exchange_count: int = Field(description="Responses given in this session.")
    started_at: str
    last_activity_at: str

    @classmethod
    def of(cls, s: VoiceSession) -> SessionOut:
        return cls(id=s.id, room_id=s.room_id, speaker_id=s.speaker_id, conversation_id=s.conversation_id,
                   state=s.state.value, follow_up_window_ms=s.follow_up_window_ms, exchange_count=s.exchange_count,
                   started_at=iso(s.started_at), last_activity_at=iso(s.last_activity_at))


class VoiceStatusOut(BaseModel):
    enabled: bool
    wake_word_available: bool
    speaker_id_available: bool
    mqtt_connected: bool
    active_rooms: int = Field(description="Rooms online now.")
    active_sessions: int = Field(description="Sessions not ended now.")

    @classmethod
    def of(cls, s: VoiceStatus) -> VoiceStatusOut:
        return cls(enabled=s.enabled, wake_word_available=s.wake_word_available,
                   speaker_id_available=s.speaker_id_available, mqtt_connected=s.mqtt_connected,
                   active_rooms=s.active_rooms, active_sessions=s.active_sessions)


class SpeakerOut(BaseModel):
    id: str
    user_id: str = Field(description="The user the profile belongs to: the key's user that enrolled it.")
    name: str
    enrollment_count: int = Field(description="Samples enrolled (one voice embedding each).")
    created_at: str
    reliable: bool = Field(description="Addition to the spec's shape: true once `enrollment_count` reaches "
                                       "`[voice.speaker_id] min_enrollment_samples` (3). A profile with fewer "
                                       "samples still matches, but its matches are marked unreliable, and "
                                       "a voice exchange answered from it uses no personal memories.")
    warnings: list[str] = Field(default_factory=list, description=(
        "Addition to the spec's shape, on enrolment only: problems with the sample just added that did not "
        "refuse it, e.g. a sample whose cosine with the profile's earlier samples is at or below "
        "`match_threshold` (another person, or a very different microphone)."))
    speech_s: float | None = Field(None, description=(
        "Addition to the spec's shape, on enrolment only: seconds of speech the voice-activity detector "
        "found in the sample just added."))

    @classmethod
    def of(cls, p: SpeakerProfile, reliable: bool, *, warnings: tuple[str, ...] = (),
           speech_s: float | None = None) -> SpeakerOut:
        return cls(id=p.id, user_id=p.user_id, name=p.name, enrollment_count=p.enrollment_count,
                   created_at=p.created_at, reliable=reliable, warnings=list(warnings), speech_s=speech_s)


class SpeakerList(BaseModel):
    speakers: list[SpeakerOut]
    total: int
