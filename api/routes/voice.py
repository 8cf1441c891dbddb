"""Voice rooms, their live sessions, and the voice subsystem's status.

A room belongs to the user of the key that created it (rooms that existed before rooms had owners belong
to the installation owner): a key lists, reads, changes and deletes only its user's rooms, and another
user's room answers 404 `NOT_FOUND` as if it did not exist. An admin key sees and manages every room.
Satellites address rooms by id over MQTT whoever owns them. While the voice
subsystem is disabled (no `[voice]` section in the configuration) every route here answers 503
`SERVICE_UNAVAILABLE` except `GET /v1/voice/status`, which reports enabled false, every other
boolean false and both counts 0.

Speaker profiles belong to the user of the key that enrolled them: a key lists and deletes only its
user's profiles (another user's profile is 404), while identification during a voice session compares
against every profile of the household.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from api.deps import CurrentPrincipal, ServicesDep, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.voice import (
    RoomCreate,
    RoomList,
    RoomOut,
    RoomUpdate,
    SessionOut,
    SpeakerList,
    SpeakerOut,
    VoiceStatusOut,
)
from assistant.errors import AssistantError, ConfigError, NotFoundError, ServiceUnavailableError
from assistant.voice.audio import MAX_UPLOAD_SECONDS, SAMPLE_RATE, decode_upload
from assistant.voice.engines import EngineError
from assistant.voice.rooms import MAX_NAME_CHARS
from assistant.voice.service import VoiceService, VoiceStatus
from assistant.voice.speakers import MAX_SAMPLE_BYTES, SpeakerProfile, SpeakerRegistry

router = APIRouter(prefix="/v1/voice", tags=["voice"])

DISABLED = "the voice subsystem is disabled: add a [voice] section to the configuration"


Voice = Annotated[VoiceService, service("voice", DISABLED)]


@router.get("/rooms", response_model=RoomList, responses=error_responses(*AUTH_ERRORS, 503))
def list_rooms(principal: CurrentPrincipal, voice: Voice) -> RoomList:
    """The caller's rooms (an admin key: every room), oldest first (then by name)."""
    rooms = voice.rooms.list(principal.owner_filter())
    return RoomList(rooms=[RoomOut.of(r) for r in rooms], total=len(rooms))


@router.post("/rooms", response_model=RoomOut, responses=error_responses(400, *AUTH_ERRORS, 409, 413, 422, 503))
def create_room(body: RoomCreate, principal: CurrentPrincipal, voice: Voice) -> RoomOut:
    """Create a room of the caller's user (200, as the spec says). A new room is offline (`is_online`
    false, `last_seen` null) until its satellite sends a heartbeat, at the configured
    `[voice.rooms] default_volume` (80), not muted. A name the caller's user already gave a room
    (ignoring case) is 409 `CONFLICT`; other users' room names do not matter."""
    return RoomOut.of(voice.rooms.create(body.name, str(principal.user_id)))


@router.get("/rooms/{room_id}", response_model=RoomOut, responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def get_room(room_id: UUID, principal: CurrentPrincipal, voice: Voice) -> RoomOut:
    """One room with its presence: online while heartbeats arrive at least every
    `[voice.rooms] heartbeat_timeout_ms` (checked every `stale_check_interval_secs`). Another user's
    room is 404."""
    return RoomOut.of(voice.rooms.get(str(room_id), principal.owner_filter()))


@router.patch("/rooms/{room_id}", response_model=RoomOut,
              responses=error_responses(400, *AUTH_ERRORS, 404, 413, 422, 503))
def update_room(room_id: UUID, body: RoomUpdate, principal: CurrentPrincipal, voice: Voice) -> RoomOut:
    """Change `volume` (0..100) and/or `muted`; only supplied fields change. A change is sent to the
    room's satellite on `{prefix}/control/{room_id}` (QoS 1) as control messages
    `{"v": 1, "room_id", "action": "volume"|"mute"|"unmute", "value", "at", "origin": "server"}` (docs/voice-bus.md).
    During whisper-mode quiet hours the satellite is sent at most `[voice.whisper_mode] quiet_volume`.
    Another user's room is 404 and nothing is sent."""
    return RoomOut.of(voice.rooms.update(str(room_id), volume=body.volume, muted=body.muted,
                                                   owner=principal.owner_filter()))


@router.delete("/rooms/{room_id}", status_code=204, response_class=Response,
               responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def delete_room(room_id: UUID, principal: CurrentPrincipal, voice: Voice) -> Response:
    """Delete the room; its active session, if any, ends. Another user's room is 404."""
    voice.delete_room(str(room_id), principal.owner_filter())
    return Response(status_code=204)


@router.get("/rooms/{room_id}/session", response_model=SessionOut,
            responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def get_room_session(room_id: UUID, principal: CurrentPrincipal, voice: Voice) -> SessionOut:
    """The room's active session: `state` is `listening`, `processing`, `responding` or
    `follow_up`. 404 `NOT_FOUND` when the room does not exist, belongs to another user or has no
    active session (a session whose follow-up window or maximum duration has passed is ended, hence
    not active)."""
    voice.rooms.get(str(room_id), principal.owner_filter())
    session = voice.sessions.get_active_session(str(room_id))
    if session is None:
        raise NotFoundError(f"room {room_id} has no active voice session")
    return SessionOut.of(session)


@router.get("/status", response_model=VoiceStatusOut, responses=error_responses(*AUTH_ERRORS))
def voice_status(_: CurrentPrincipal, services: ServicesDep) -> VoiceStatusOut:
    """Whether voice is enabled, which engines are available, whether the bus is connected, the
    rooms online and the sessions active now. Never 503: while voice is disabled it reports enabled
    false, every other boolean false and both counts 0."""
    service = services.voice
    return VoiceStatusOut.of(service.status() if service is not None else VoiceStatus.disabled())


# --- speaker profiles ---------------------------------------------------------------------------

_BINARY = {"schema": {"type": "string", "format": "binary"}}
ENROLL_BODY = {"requestBody": {"required": True, "content": {
    "audio/wav": _BINARY, "audio/flac": _BINARY, "application/octet-stream": _BINARY}}}


def speaker_registry(voice: Voice) -> SpeakerRegistry:
    if voice.speakers is None:
        raise ServiceUnavailableError("speaker identification is not configured")
    return voice.speakers


Speakers = Annotated[SpeakerRegistry, Depends(speaker_registry)]


def speaker_out(registry: SpeakerRegistry, profile: SpeakerProfile) -> SpeakerOut:
    return SpeakerOut.of(profile, registry.reliable(profile))


@router.get("/speakers", response_model=SpeakerList, summary="List speaker profiles",
            responses=error_responses(*AUTH_ERRORS, 503))
def list_speakers(principal: CurrentPrincipal, registry: Speakers) -> SpeakerList:
    """The calling key's user's speaker profiles, oldest first. `reliable` (an addition to the spec's
    shape) is true once a profile has `[voice.speaker_id] min_enrollment_samples` (3) samples."""
    profiles = registry.list(str(principal.user_id))
    return SpeakerList(speakers=[speaker_out(registry, p) for p in profiles], total=len(profiles))


@router.post(
    "/speakers/enroll",
    response_model=SpeakerOut,
    summary="Enrol a voice sample",
    responses={201: {"model": SpeakerOut, "description": "The sample created the profile"},
               **error_responses(*AUTH_ERRORS, 409, 413, 422, 503)},
    openapi_extra=ENROLL_BODY,
)
async def enroll_speaker(
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
    registry: Speakers,
    name: Annotated[str, Query(min_length=1, max_length=MAX_NAME_CHARS,
                               description=f"The profile's name: 1..{MAX_NAME_CHARS} characters, one line; "
                                           "unique per user ignoring case.")],
) -> SpeakerOut:
    """Add one voice sample to the calling key's user's profile `name`. The body is the sample: a WAV
    or FLAC file (`Content-Type: audio/wav` or `audio/flac`; any rate and channel count, converted to
    16 kHz mono) or raw PCM 16-bit little-endian, 16 kHz, mono (`application/octet-stream`), from 0.5 s
    to 60 s of speech, at most 2 MiB (and at most `server.max_body_bytes`, 1 MiB by default; larger is
    413 `PAYLOAD_TOO_LARGE`).

    The first sample creates the profile (201); later samples with the same name (ignoring case) add an
    embedding to it (200). At least `[voice.speaker_id] min_enrollment_samples` (3) samples make the
    profile `reliable`. The sample must be fit to stand for a voice, else it is 422 with `details.fields`
    naming the problem and nothing is stored: empty or unreadable (`not a WAV or FLAC file`), a file
    sampled below 16 kHz or raw `audio/L16` with another `rate` (`wrong sample rate`) or `channels`
    (`not mono`), silent (`silent`, below -60 dBFS), holding less than `[voice.speaker_id]
    min_enrollment_speech_s` (1.0 s) of speech by the voice-activity detector (`too little speech`: also
    what noise, music or bytes that are not audio get), more than 0.1 % of it at full scale (`clipped`),
    shorter than 0.5 s or longer than 60 s; a name that is empty or not one line is 422 too. A sample that
    is accepted but disagrees with the profile's earlier samples is stored with a `warnings` entry.
    409 when the profile was enrolled with another speaker engine or dimension. 503 while voice is
    disabled or when the speaker engine cannot be loaded or fails. The embedding is stored sealed
    (biometric data)."""
    body = await request.body()
    if len(body) > MAX_SAMPLE_BYTES:
        raise AssistantError(f"a voice sample is at most {MAX_SAMPLE_BYTES} bytes; got {len(body)}",
                             code="PAYLOAD_TOO_LARGE")
    pcm = await run_in_threadpool(decode_upload, body, request.headers.get("content-type"),
                                  max_seconds=MAX_UPLOAD_SECONDS, min_rate=SAMPLE_RATE)
    try:
        enrolment = await run_in_threadpool(registry.enroll_sample, str(principal.user_id), name, pcm)
    except (ConfigError, EngineError) as exc:
        raise ServiceUnavailableError(f"speaker identification is unavailable: {exc.message}") from None
    response.status_code = 201 if enrolment.created else 200
    return SpeakerOut.of(enrolment.profile, registry.reliable(enrolment.profile), warnings=enrolment.warnings,
                         speech_s=enrolment.quality.speech_s)


@router.delete("/speakers/{speaker_id}", status_code=204, response_class=Response, summary="Delete a speaker",
               responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def delete_speaker(speaker_id: UUID, principal: CurrentPrincipal, registry: Speakers) -> Response:
    """Delete the profile and every voice embedding of it. 404 when it does not exist or belongs to
    another user."""
    registry.delete(str(speaker_id), str(principal.user_id))
    return Response(status_code=204)
