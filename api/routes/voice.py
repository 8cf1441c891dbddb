"""Voice rooms, their live sessions, and the voice subsystem's status.

Rooms belong to the household: every key sees and manages the same rooms. While the voice
subsystem is disabled (no `[voice]` section in the configuration) every route here answers 503
`SERVICE_UNAVAILABLE` except `GET /v1/voice/status`, which reports enabled false, every other
boolean false and both counts 0.
"""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Response

from api.deps import CurrentPrincipal, ServicesDep
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.voice import RoomCreate, RoomList, RoomOut, RoomUpdate, SessionOut, VoiceStatusOut
from assistant.errors import NotFoundError, ServiceUnavailableError
from assistant.services import Services
from assistant.voice.service import VoiceService, VoiceStatus

router = APIRouter(prefix="/v1/voice", tags=["voice"])

DISABLED = "the voice subsystem is disabled: add a [voice] section to the configuration"


def voice(services: Services) -> VoiceService:
    if services.voice is None:
        raise ServiceUnavailableError(DISABLED)
    return services.voice


@router.get("/rooms", response_model=RoomList, responses=error_responses(*AUTH_ERRORS, 503))
def list_rooms(_: CurrentPrincipal, services: ServicesDep) -> RoomList:
    """Every room, oldest first (then by name)."""
    rooms = voice(services).rooms.list()
    return RoomList(rooms=[RoomOut.of(r) for r in rooms], total=len(rooms))


@router.post("/rooms", response_model=RoomOut, responses=error_responses(400, *AUTH_ERRORS, 409, 413, 422, 503))
def create_room(body: RoomCreate, _: CurrentPrincipal, services: ServicesDep) -> RoomOut:
    """Create a room (200, as the spec says). A new room is offline (`is_online` false,
    `last_seen` null) until its satellite sends a heartbeat, at the configured
    `[voice.rooms] default_volume` (80), not muted. A name already taken (ignoring case) is 409
    `CONFLICT`."""
    return RoomOut.of(voice(services).rooms.create(body.name))


@router.get("/rooms/{room_id}", response_model=RoomOut, responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def get_room(room_id: UUID, _: CurrentPrincipal, services: ServicesDep) -> RoomOut:
    """One room with its presence: online while heartbeats arrive at least every
    `[voice.rooms] heartbeat_timeout_ms` (checked every `stale_check_interval_secs`)."""
    return RoomOut.of(voice(services).rooms.get(str(room_id)))


@router.patch("/rooms/{room_id}", response_model=RoomOut,
              responses=error_responses(400, *AUTH_ERRORS, 404, 413, 422, 503))
def update_room(room_id: UUID, body: RoomUpdate, _: CurrentPrincipal, services: ServicesDep) -> RoomOut:
    """Change `volume` (0..100) and/or `muted`; only supplied fields change. A change is sent to the
    room's satellite as a control message on `{prefix}/audio/{room_id}/control` (QoS 1) with the
    JSON payload `{"v": 1, "type": "set_audio", "room_id", "volume", "muted", "sent_at"}`."""
    return RoomOut.of(voice(services).rooms.update(str(room_id), volume=body.volume, muted=body.muted))


@router.delete("/rooms/{room_id}", status_code=204, response_class=Response,
               responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def delete_room(room_id: UUID, _: CurrentPrincipal, services: ServicesDep) -> Response:
    """Delete the room; its active session, if any, ends."""
    voice(services).delete_room(str(room_id))
    return Response(status_code=204)


@router.get("/rooms/{room_id}/session", response_model=SessionOut,
            responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def get_room_session(room_id: UUID, _: CurrentPrincipal, services: ServicesDep) -> SessionOut:
    """The room's active session: `state` is `listening`, `processing`, `responding` or
    `follow_up`. 404 `NOT_FOUND` when the room does not exist or has no active session (a session
    whose follow-up window or maximum duration has passed is ended, hence not active)."""
    service = voice(services)
    service.rooms.get(str(room_id))
    session = service.sessions.get_active_session(str(room_id))
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
