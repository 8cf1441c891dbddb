"""Whisper mode: quiet hours 22:00-07:00 in a time zone, playback volume 30, restore at the end."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from assistant.config import WhisperModeSettings
from assistant.errors import ConfigError
from assistant.voice.messages import ControlAction, ControlMessage
from assistant.voice.rooms import Room
from assistant.voice.whisper import WhisperMode, is_quiet, playback_volume

DEFAULTS = WhisperModeSettings()  # 22:00-07:00 UTC, quiet_volume 30
BERLIN = WhisperModeSettings(timezone="Europe/Berlin")


def utc(day: int, hour: int, minute: int = 0, month: int = 1) -> datetime:
    return datetime(2025, month, day, hour, minute, tzinfo=UTC)


def room(room_id: str, volume: int) -> Room:
    return Room(room_id, room_id.title(), True, volume, False, None, "2025-01-01T00:00:00.000Z", "owner")


def volumes(messages: list[ControlMessage]) -> dict[str, int]:
    assert all(m.action is ControlAction.VOLUME for m in messages)
    return {m.room_id: m.value for m in messages}  # type: ignore[misc]


def test_spec_defaults() -> None:
    assert (DEFAULTS.quiet_start, DEFAULTS.quiet_end, DEFAULTS.quiet_volume) == (time(22), time(7), 30)


@pytest.mark.parametrize(("hour", "minute", "quiet"), [
    (21, 59, False), (22, 0, True), (23, 59, True), (0, 0, True), (6, 59, True), (7, 0, False), (12, 0, False),
])
def test_window_crossing_midnight(hour: int, minute: int, quiet: bool) -> None:
    assert is_quiet(utc(15, hour, minute), DEFAULTS) is quiet


def test_window_within_one_day() -> None:
    nap = WhisperModeSettings(quiet_start=time(13), quiet_end=time(15))
    assert not is_quiet(utc(15, 12, 59), nap)
    assert is_quiet(utc(15, 13), nap)
    assert is_quiet(utc(15, 14, 59), nap)
    assert not is_quiet(utc(15, 15), nap)
    assert not is_quiet(utc(15, 23), nap)


def test_equal_start_and_end_is_never_quiet() -> None:
    never = WhisperModeSettings(quiet_start=time(22), quiet_end=time(22))
    assert not any(is_quiet(utc(15, 0) + timedelta(minutes=m), never) for m in range(0, 24 * 60, 15))


def test_wall_clock_of_the_configured_zone() -> None:
    # 21:00 UTC in January is 22:00 in Berlin (CET, UTC+1)
    assert is_quiet(utc(15, 21), BERLIN)
    assert not is_quiet(utc(15, 21), DEFAULTS)
    assert not is_quiet(utc(15, 20, 59), BERLIN)
    # 06:30 UTC is 07:30 in Berlin: over there, quiet hours have ended
    assert not is_quiet(utc(15, 6, 30), BERLIN)
    assert is_quiet(utc(15, 6, 30), DEFAULTS)
    # an aware time in another zone is converted
    assert is_quiet(datetime(2025, 1, 15, 22, 0, tzinfo=ZoneInfo("Europe/Berlin")), BERLIN)
    assert not is_quiet(datetime(2025, 1, 15, 22, 0, tzinfo=ZoneInfo("Europe/Berlin")), DEFAULTS)


def test_naive_time_is_wall_clock_in_the_zone() -> None:
    assert is_quiet(datetime(2025, 1, 15, 22, 0), BERLIN)
    assert not is_quiet(datetime(2025, 1, 15, 21, 59), BERLIN)


def test_daylight_saving_days_in_berlin() -> None:
    # 30 March 2025: clocks go from 02:00 CET to 03:00 CEST; 07:00 local is 05:00 UTC, the day before 06:00 UTC
    assert is_quiet(utc(29, 5, 59, month=3), BERLIN)
    assert not is_quiet(utc(29, 6, 0, month=3), BERLIN)
    assert is_quiet(utc(30, 4, 59, month=3), BERLIN)
    assert not is_quiet(utc(30, 5, 0, month=3), BERLIN)
    # 26 October 2025: back from 03:00 CEST to 02:00 CET; 22:00 local is 21:00 UTC, the day before 20:00 UTC
    assert is_quiet(utc(25, 20, 0, month=10), BERLIN)
    assert not is_quiet(utc(26, 20, 0, month=10), BERLIN)
    assert is_quiet(utc(26, 21, 0, month=10), BERLIN)


def test_window_starting_in_the_skipped_hour() -> None:
    # 02:30 does not exist in Berlin on 30 March 2025: quiet hours start when the clock jumps to 03:00 CEST
    early = WhisperModeSettings(quiet_start=time(2, 30), quiet_end=time(6), timezone="Europe/Berlin")
    assert not is_quiet(utc(30, 0, 59, month=3), early)  # 01:59 CET
    assert is_quiet(utc(30, 1, 0, month=3), early)  # 03:00 CEST


def test_unknown_zone_is_a_config_error() -> None:
    bad = WhisperModeSettings(timezone="Mars/Olympus_Mons")
    with pytest.raises(ConfigError, match="Mars/Olympus_Mons"):
        is_quiet(utc(15, 22), bad)
    with pytest.raises(ConfigError, match="voice.whisper_mode.timezone"):
        WhisperMode(bad)


def test_playback_volume() -> None:
    assert playback_volume(80, utc(15, 22), DEFAULTS) == 30
    assert playback_volume(80, utc(15, 21, 59), DEFAULTS) == 80
    assert playback_volume(20, utc(15, 23), DEFAULTS) == 20
    assert playback_volume(80, utc(15, 7), DEFAULTS) == 80


def test_ticks_lower_then_restore() -> None:
    mode = WhisperMode(DEFAULTS)
    rooms = [room("kitchen", 80), room("bedroom", 20)]
    assert mode.quiet is None
    assert mode.tick(rooms, utc(15, 21, 0)) == []
    assert mode.tick(rooms, utc(15, 21, 59)) == []
    entering = mode.tick(rooms, utc(15, 22, 0))
    assert volumes(entering) == {"kitchen": 30, "bedroom": 20}
    assert all(m.origin == "server" and m.at == utc(15, 22) for m in entering)
    assert mode.quiet is True
    assert mode.tick(rooms, utc(16, 3, 0)) == []
    assert mode.tick(rooms, utc(16, 6, 59)) == []
    assert volumes(mode.tick(rooms, utc(16, 7, 0))) == {"kitchen": 80, "bedroom": 20}
    assert mode.quiet is False
    assert mode.tick(rooms, utc(16, 12, 0)) == []


def test_first_tick_in_quiet_hours_lowers() -> None:
    mode = WhisperMode(DEFAULTS)
    assert volumes(mode.tick([room("kitchen", 80)], utc(15, 23, 30))) == {"kitchen": 30}
    assert mode.tick([room("kitchen", 80)], utc(15, 23, 31)) == []


def test_restore_uses_each_rooms_current_volume() -> None:
    mode = WhisperMode(DEFAULTS)
    mode.tick([room("kitchen", 80)], utc(15, 22))
    # the volume was changed during the night: the morning restores the new one
    assert volumes(mode.tick([room("kitchen", 65), room("hall", 40)], utc(16, 7))) == {"kitchen": 65, "hall": 40}


def test_messages_survive_the_wire_format() -> None:
    mode = WhisperMode(BERLIN, origin="whisper")
    (message,) = mode.tick([room("kitchen", 80)], utc(15, 21))
    assert ControlMessage.from_bytes(message.to_bytes()) == message
    assert message.origin == "whisper"
