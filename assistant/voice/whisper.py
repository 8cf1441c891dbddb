"""Whisper mode (voice rule 2): during quiet hours playback volume is lowered to ``quiet_volume`` and
restored afterwards.

Quiet hours are the half-open window ``[quiet_start, quiet_end)`` of wall-clock times in
``[voice.whisper_mode] timezone`` (an IANA zone, read with the standard library's ``zoneinfo``, so
daylight-saving changes follow the zone's rules). A window may cross midnight (22:00-07:00, the default);
``quiet_start == quiet_end`` means never quiet. An aware ``now`` is converted to the zone; a naive ``now``
is taken as wall-clock time in the zone already.

Whisper mode does not change a room's stored volume: :class:`WhisperMode` only tells satellites which
volume to play at, as ``volume`` control messages.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from assistant.config import WhisperModeSettings
from assistant.errors import ConfigError
from assistant.voice.messages import ControlAction, ControlMessage
from assistant.voice.rooms import Room


def zone(settings: WhisperModeSettings) -> ZoneInfo:
    """The configured zone; an unknown name raises :class:`ConfigError` naming it."""
    try:
        return ZoneInfo(settings.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"voice.whisper_mode.timezone: unknown time zone {settings.timezone!r} "
                          "(use an IANA name such as 'Europe/Berlin' or 'UTC')") from None


def local_time(now: datetime, settings: WhisperModeSettings) -> datetime:
    """``now`` as an aware wall-clock time in the configured zone."""
    tz = zone(settings)
    return now.replace(tzinfo=tz) if now.tzinfo is None else now.astimezone(tz)


def is_quiet(now: datetime, settings: WhisperModeSettings) -> bool:
    """Whether ``now`` falls in the quiet hours ``[quiet_start, quiet_end)``."""
    start, end = settings.quiet_start, settings.quiet_end
    if start == end:
        return False
    clock = local_time(now, settings).time().replace(tzinfo=None)
    if start < end:
        return start <= clock < end
    return clock >= start or clock < end  # the window crosses midnight


def playback_volume(room_volume: int, now: datetime, settings: WhisperModeSettings) -> int:
    """The volume to play at: ``min(room_volume, quiet_volume)`` during quiet hours, else the room's own."""
    return min(room_volume, settings.quiet_volume) if is_quiet(now, settings) else room_volume


class WhisperMode:
    """Turns the quiet hours into volume control messages, one per room, at each transition.

    Call :meth:`tick` periodically (e.g. with the presence check): entering quiet hours lowers every room
    to its :func:`playback_volume`, leaving them restores each room's own volume, and ticks in between
    return nothing. The first tick lowers the rooms if it falls in quiet hours and sends nothing otherwise.
    """

    def __init__(self, settings: WhisperModeSettings, *, origin: str = "server"):
        zone(settings)  # an unknown zone fails now, not at the first tick
        self.settings = settings
        self.origin = origin
        self._quiet: bool | None = None

    @property
    def quiet(self) -> bool | None:
        """Quiet at the last tick; None before the first."""
        return self._quiet

    def tick(self, rooms: list[Room], now: datetime) -> list[ControlMessage]:
        quiet = is_quiet(now, self.settings)
        previous, self._quiet = self._quiet, quiet
        if quiet == previous or (previous is None and not quiet):
            return []
        at = local_time(now, self.settings).astimezone(UTC)
        return [ControlMessage(room.id, ControlAction.VOLUME,
                               playback_volume(room.volume, now, self.settings) if quiet else room.volume,
                               origin=self.origin, at=at)
                for room in rooms]
