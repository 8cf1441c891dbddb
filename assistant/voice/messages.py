"""The voice bus's topics and payload formats (version 1); ``docs/voice-bus.md`` describes them for satellites.

- **Topics** (``prefix`` from ``[voice.mqtt] topic_prefix``): ``{prefix}/audio/{room}/input`` (QoS 0, raw PCM),
  ``{prefix}/audio/{room}/output`` (QoS 1, framed PCM), ``{prefix}/wake/{room}`` (QoS 1),
  ``{prefix}/control/{room}`` (QoS 1, both directions), ``{prefix}/status/{room}`` (QoS 0).
  A room id is 1–64 characters of ``A-Z a-z 0-9 _ . -`` (never an MQTT wildcard or separator).
- **Audio**: PCM signed 16-bit little-endian, 16 kHz, mono. Input is bare PCM (an even number of bytes).
  Output is a sequence of frames: a 12-byte header (``b"AO"``, version ``1``, flags, stream id u32 BE,
  sequence u32 BE) then PCM; flag bit 0 marks the last frame of a stream (its PCM may be empty).
- **Wake, control, status**: UTF-8 JSON objects with ``"v": 1``; timestamps ISO 8601 UTC (``...Z``).
  Parsing is strict: a wrong type, a missing field, an unknown field (except in status) or another
  version raises :class:`MessageError` with the reason.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from assistant.clock import iso, utcnow

VERSION = 1
SAMPLE_RATE = 16_000
SAMPLE_WIDTH = 2
ROOM_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
OUTPUT_MAGIC = b"AO"
OUTPUT_HEADER = struct.Struct(">2sBBII")
FLAG_LAST = 0x01


class MessageError(ValueError):
    """A payload that does not follow the format; ``reason`` is a short code for the drop metric."""

    def __init__(self, message: str, reason: str = "invalid"):
        super().__init__(message)
        self.reason = reason


class TopicKind(StrEnum):
    INPUT = "input"
    OUTPUT = "output"
    WAKE = "wake"
    CONTROL = "control"
    STATUS = "status"


QOS: Mapping[TopicKind, int] = {
    TopicKind.INPUT: 0,
    TopicKind.OUTPUT: 1,
    TopicKind.WAKE: 1,
    TopicKind.CONTROL: 1,
    TopicKind.STATUS: 0,
}


def check_room_id(room_id: str) -> str:
    if not isinstance(room_id, str) or not ROOM_ID.match(room_id):
        raise MessageError(f"room_id must be 1-64 characters of A-Z a-z 0-9 _ . - (got {room_id!r})")
    return room_id


@dataclass(frozen=True)
class Topics:
    """Builds and reads the topic names under one prefix."""

    prefix: str = "assistant"

    def __post_init__(self) -> None:
        if not self.prefix or any(c in self.prefix for c in "+#") or self.prefix.startswith("/") \
                or self.prefix.endswith("/"):
            raise ValueError(f"invalid topic prefix {self.prefix!r}")

    def topic(self, kind: TopicKind, room_id: str) -> str:
        check_room_id(room_id)
        if kind in (TopicKind.INPUT, TopicKind.OUTPUT):
            return f"{self.prefix}/audio/{room_id}/{kind.value}"
        return f"{self.prefix}/{kind.value}/{room_id}"

    def pattern(self, kind: TopicKind) -> str:
        """The subscription pattern for every room."""
        if kind in (TopicKind.INPUT, TopicKind.OUTPUT):
            return f"{self.prefix}/audio/+/{kind.value}"
        return f"{self.prefix}/{kind.value}/+"

    def parse(self, topic: str) -> tuple[TopicKind, str] | None:
        """(kind, room id) of a topic under this prefix, or None when it is not one of ours."""
        if not topic.startswith(self.prefix + "/"):
            return None
        parts = topic[len(self.prefix) + 1:].split("/")
        if len(parts) == 3 and parts[0] == "audio" and parts[2] in ("input", "output"):
            kind, room = TopicKind(parts[2]), parts[1]
        elif len(parts) == 2 and parts[0] in ("wake", "control", "status"):
            kind, room = TopicKind(parts[0]), parts[1]
        else:
            return None
        return (kind, room) if ROOM_ID.match(room) else None


# --- JSON helpers -------------------------------------------------------------------------------------


def _load(payload: bytes) -> dict[str, Any]:
    try:
        data = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MessageError(f"not UTF-8 JSON: {exc}", "malformed_json") from None
    if not isinstance(data, dict):
        raise MessageError("payload must be a JSON object", "malformed_json")
    if data.get("v") != VERSION or isinstance(data.get("v"), bool):
        raise MessageError(f"unsupported version {data.get('v')!r} (expected {VERSION})", "bad_version")
    return data


def _dump(data: dict[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in data.items() if v is not None}, separators=(",", ":")).encode()


def _check_keys(data: Mapping[str, Any], required: set[str], optional: set[str]) -> None:
    missing = required - data.keys()
    if missing:
        raise MessageError(f"missing field(s): {', '.join(sorted(missing))}")
    unknown = data.keys() - required - optional
    if unknown:
        raise MessageError(f"unknown field(s): {', '.join(sorted(unknown))}")


def _str(data: Mapping[str, Any], key: str, *, max_len: int = 256) -> str:
    value = data[key]
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise MessageError(f"{key} must be a non-empty string of at most {max_len} characters")
    return value


def _number(data: Mapping[str, Any], key: str, lo: float, hi: float) -> float:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not lo <= value <= hi:
        raise MessageError(f"{key} must be a number in {lo}..{hi}")
    return float(value)


def _time(data: Mapping[str, Any], key: str = "at") -> datetime:
    value = data[key]
    if not isinstance(value, str):
        raise MessageError(f"{key} must be an ISO 8601 timestamp")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise MessageError(f"{key} must be an ISO 8601 timestamp") from None
    if moment.tzinfo is None:
        raise MessageError(f"{key} must carry a time zone (e.g. Z)")
    return moment.astimezone(UTC)


def _room(data: Mapping[str, Any]) -> str:
    try:
        return check_room_id(data["room_id"])
    except MessageError as exc:
        raise MessageError(str(exc)) from None


# --- messages -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WakeEvent:
    """A wake word was heard in a room (server → satellite): ``{v, room_id, word, score, at}``."""

    room_id: str
    word: str
    score: float
    at: datetime = field(default_factory=utcnow)

    def __post_init__(self) -> None:
        check_room_id(self.room_id)
        if not 0.0 <= self.score <= 1.0:
            raise MessageError("score must be in 0..1")

    def to_bytes(self) -> bytes:
        return _dump({"v": VERSION, "room_id": self.room_id, "word": self.word, "score": self.score,
                      "at": iso(self.at)})

    @classmethod
    def from_bytes(cls, payload: bytes) -> WakeEvent:
        data = _load(payload)
        _check_keys(data, {"v", "room_id", "word", "score", "at"}, set())
        return cls(_room(data), _str(data, "word", max_len=64), _number(data, "score", 0.0, 1.0), _time(data))


class ControlAction(StrEnum):
    VOLUME = "volume"  # value: integer 0..100
    MUTE = "mute"  # value: absent
    UNMUTE = "unmute"  # value: absent
    COMMAND = "command"  # value: a command name, e.g. "stop", "cancel", "reboot"


@dataclass(frozen=True)
class ControlMessage:
    """Volume, mute or a room command (both directions): ``{v, room_id, action, value?, at, origin}``.

    ``origin`` is ``"server"`` for the server's messages, else the satellite's name; a bus ignores the echo
    of its own origin.
    """

    room_id: str
    action: ControlAction
    value: int | str | None = None
    origin: str = "server"
    at: datetime = field(default_factory=utcnow)

    def __post_init__(self) -> None:
        check_room_id(self.room_id)
        object.__setattr__(self, "action", ControlAction(self.action))
        if self.action is ControlAction.VOLUME:
            if isinstance(self.value, bool) or not isinstance(self.value, int) or not 0 <= self.value <= 100:
                raise MessageError("volume value must be an integer 0..100")
        elif self.action is ControlAction.COMMAND:
            if not isinstance(self.value, str) or not 0 < len(self.value) <= 64:
                raise MessageError("command value must be a non-empty string of at most 64 characters")
        elif self.value is not None:
            raise MessageError(f"{self.action.value} takes no value")
        if not isinstance(self.origin, str) or not 0 < len(self.origin) <= 64:
            raise MessageError("origin must be a non-empty string of at most 64 characters")

    def to_bytes(self) -> bytes:
        return _dump({"v": VERSION, "room_id": self.room_id, "action": self.action.value, "value": self.value,
                      "at": iso(self.at), "origin": self.origin})

    @classmethod
    def from_bytes(cls, payload: bytes) -> ControlMessage:
        data = _load(payload)
        _check_keys(data, {"v", "room_id", "action", "at", "origin"}, {"value"})
        action = data["action"]
        if action not in {a.value for a in ControlAction}:
            raise MessageError(f"action must be one of {', '.join(a.value for a in ControlAction)}")
        return cls(_room(data), ControlAction(action), data.get("value"), _str(data, "origin", max_len=64),
                   _time(data))


@dataclass(frozen=True)
class StatusMessage:
    """A satellite's heartbeat: ``{v, room_id, at, name?, uptime_s?, ...}``; other fields kept in ``extra``."""

    room_id: str
    at: datetime = field(default_factory=utcnow)
    name: str | None = None
    uptime_s: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_room_id(self.room_id)
        reserved = {"v", "room_id", "at", "name", "uptime_s"} & set(self.extra)
        if reserved:
            raise MessageError(f"extra must not repeat {', '.join(sorted(reserved))}")

    def to_bytes(self) -> bytes:
        return _dump({**self.extra, "v": VERSION, "room_id": self.room_id, "at": iso(self.at), "name": self.name,
                      "uptime_s": self.uptime_s})

    @classmethod
    def from_bytes(cls, payload: bytes) -> StatusMessage:
        data = _load(payload)
        _check_keys(data, {"v", "room_id", "at"}, set(data))
        name = _str(data, "name", max_len=128) if data.get("name") is not None else None
        uptime = _number(data, "uptime_s", 0.0, math.inf) if data.get("uptime_s") is not None else None
        extra = {k: v for k, v in data.items() if k not in {"v", "room_id", "at", "name", "uptime_s"}}
        return cls(_room(data), _time(data), name, uptime, extra)


# --- audio --------------------------------------------------------------------------------------------


def check_pcm(payload: bytes) -> bytes:
    if len(payload) % SAMPLE_WIDTH:
        raise MessageError("PCM 16-bit needs an even number of bytes", "odd_length")
    return payload


@dataclass(frozen=True)
class OutputFrame:
    """One chunk of a synthesised reply on the output topic."""

    stream_id: int
    seq: int
    pcm: bytes
    last: bool = False

    def to_bytes(self) -> bytes:
        return OUTPUT_HEADER.pack(OUTPUT_MAGIC, VERSION, FLAG_LAST if self.last else 0, self.stream_id,
                                  self.seq) + self.pcm

    @classmethod
    def from_bytes(cls, payload: bytes) -> OutputFrame:
        if len(payload) < OUTPUT_HEADER.size:
            raise MessageError("output frame shorter than its 12-byte header", "malformed_frame")
        magic, version, flags, stream_id, seq = OUTPUT_HEADER.unpack_from(payload)
        if magic != OUTPUT_MAGIC:
            raise MessageError("output frame does not start with b'AO'", "malformed_frame")
        if version != VERSION:
            raise MessageError(f"unsupported output frame version {version}", "bad_version")
        pcm = check_pcm(payload[OUTPUT_HEADER.size:])
        return cls(stream_id, seq, pcm, bool(flags & FLAG_LAST))


def output_frames(pcm: bytes, stream_id: int, chunk_bytes: int) -> list[OutputFrame]:
    """Split ``pcm`` into frames of at most ``chunk_bytes`` of audio; the last one is flagged."""
    check_pcm(pcm)
    step = max(SAMPLE_WIDTH, chunk_bytes - chunk_bytes % SAMPLE_WIDTH)
    chunks = [pcm[i:i + step] for i in range(0, len(pcm), step)] or [b""]
    return [OutputFrame(stream_id, seq, chunk, last=seq == len(chunks) - 1) for seq, chunk in enumerate(chunks)]
