"""A satellite simulator: streams a recording into a room over the voice bus and plays back the reply.

It does what a microphone-and-speaker satellite does, with a WAV file for a microphone: heartbeats on the
status topic every ``heartbeat_secs``, PCM16 16 kHz mono on the input topic in ``chunk_ms`` chunks, paced
at real time (a chunk leaves when it would have been recorded), then ``tail_silence_ms`` of silence so
the server's voice-activity detector sees the end of speech. Replies arrive as output frames
(:class:`~assistant.voice.messages.OutputFrame`); each new stream id is a new reply. After a complete
reply the simulator "plays" it (sleeps its duration when real time) and sends the control message
``command`` / ``playback_done`` (see ``docs/voice-bus.md``, "Playback complete").

Everything it sees is reported as a :class:`SatelliteEvent` to ``on_event`` and kept in order. It uses
:class:`~assistant.voice.bus.VoiceBus` in the satellite role; the ``assistant satellite`` command wraps it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Self

from assistant.config import MqttSettings
from assistant.voice.audio import BYTES_PER_SECOND, SAMPLE_WIDTH, duration_s
from assistant.voice.bus import VoiceBus
from assistant.voice.messages import (
    ControlAction,
    ControlMessage,
    OutputFrame,
    StatusMessage,
    WakeEvent,
    check_room_id,
)

log = logging.getLogger("assistant.voice.satellite")

MAX_CHUNK_MS = 2000  # the bus accepts at most 64 KiB per input message
PLAYBACK_DONE = "playback_done"


class SatelliteError(RuntimeError):
    """The simulator could not do its job (e.g. the broker did not accept the connection in time)."""


class EventKind(StrEnum):
    CONNECTED = "connected"
    HEARTBEAT = "heartbeat"
    STREAM_START = "stream_start"
    STREAM_END = "stream_end"
    WAKE = "wake"
    CONTROL = "control"
    OUTPUT_START = "output_start"
    OUTPUT_END = "output_end"
    PLAYBACK_DONE = "playback_done"


@dataclass(frozen=True)
class SatelliteEvent:
    """``at_s``: seconds since :meth:`Satellite.start`; ``kind``: an :class:`EventKind` value."""

    at_s: float
    kind: str
    detail: str = ""


@dataclass
class SatelliteResult:
    """Every reply's PCM, concatenated in order of arrival, and every event."""

    reply_pcm: bytes
    events: list[SatelliteEvent] = field(default_factory=list)
    replies: int = 0


def pcm_bytes(ms: int) -> int:
    """Bytes of PCM16 16 kHz mono in ``ms`` milliseconds (always even)."""
    return BYTES_PER_SECOND * ms // 1000


def chunk_pcm(pcm: bytes, chunk_ms: int) -> list[bytes]:
    """``pcm`` cut into ``chunk_ms`` chunks; the last one may be shorter."""
    step = pcm_bytes(chunk_ms)
    return [pcm[i:i + step] for i in range(0, len(pcm), step)]


def send_offsets(chunks: list[bytes]) -> list[float]:
    """When each chunk is due, in seconds after the stream starts: the moment its last sample was recorded."""
    offsets, total = [], 0
    for chunk in chunks:
        total += len(chunk)
        offsets.append(total / BYTES_PER_SECOND)
    return offsets


class Satellite:
    """One simulated satellite in ``room_id``. :meth:`start` waits up to ``connect_timeout`` seconds for the
    broker. ``clock``/``sleep`` pace streaming and playback (injectable for tests); ``bus_factory`` builds the
    bus (default :class:`VoiceBus`) with the simulator's callbacks."""

    def __init__(self, room_id: str, mqtt: MqttSettings, *, heartbeat_secs: float = 5.0, chunk_ms: int = 40,
                 realtime: bool = True, tail_silence_ms: int = 1500,
                 on_event: Callable[[SatelliteEvent], None] | None = None, connect_timeout: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 bus_factory: Callable[..., VoiceBus] = VoiceBus):
        check_room_id(room_id)
        if not 0 < chunk_ms <= MAX_CHUNK_MS:
            raise ValueError(f"chunk_ms must be 1..{MAX_CHUNK_MS} (got {chunk_ms})")
        if heartbeat_secs <= 0:
            raise ValueError(f"heartbeat_secs must be positive (got {heartbeat_secs})")
        if tail_silence_ms < 0:
            raise ValueError(f"tail_silence_ms must be 0 or more (got {tail_silence_ms})")
        self.room_id = room_id
        self.mqtt = mqtt
        self.origin = f"satellite-{room_id}"[:64]
        self.heartbeat_secs = heartbeat_secs
        self.chunk_ms = chunk_ms
        self.realtime = realtime
        self.tail_silence_ms = tail_silence_ms
        self.connect_timeout = connect_timeout
        self.on_event = on_event
        self.clock = clock
        self.sleep = sleep
        self.events: list[SatelliteEvent] = []
        self._events_lock = threading.Lock()
        self._lock = threading.Lock()
        self._replies: queue.Queue[tuple[int, bytes]] = queue.Queue()
        self._stream_id: int | None = None  # the reply being assembled
        self._parts: dict[int, bytes] = {}
        self._finished_id: int | None = None
        self._stop = threading.Event()
        self._heartbeats: threading.Thread | None = None
        self._t0: float | None = None
        self.bus = bus_factory(mqtt, role="satellite", origin=self.origin, on_output=self._on_output,
                               on_wake=self._on_wake, on_control=self._on_control)

    # --- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect (waiting up to ``connect_timeout``), send a first heartbeat, keep sending them."""
        if self._t0 is not None:
            return
        self._t0 = self.clock()
        self._stop.clear()
        self.bus.start()
        if not self.bus.wait_connected(self.connect_timeout):
            self.bus.stop()
            self._t0 = None
            reason = getattr(self.bus, "last_error", None)
            raise SatelliteError(f"could not connect to the MQTT broker at {self.mqtt.host}:{self.mqtt.port} "
                                 f"within {self.connect_timeout:g} s" + (f": {reason}" if reason else ""))
        self._emit(EventKind.CONNECTED, f"{self.mqtt.host}:{self.mqtt.port} as {self.origin}")
        self._heartbeat()
        self._heartbeats = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{self.room_id}",
                                            daemon=True)
        self._heartbeats.start()

    def stop(self) -> None:
        """Stop heartbeats and disconnect; safe to call twice."""
        self._stop.set()
        if self._heartbeats is not None:
            self._heartbeats.join()
            self._heartbeats = None
        if self._t0 is not None:
            self.bus.stop()
            self._t0 = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_secs):
            self._heartbeat()

    def _heartbeat(self) -> None:
        uptime = round(self._elapsed(), 3)
        self.bus.publish_status(StatusMessage(self.room_id, name=self.origin, uptime_s=uptime))
        self._emit(EventKind.HEARTBEAT, f"uptime {uptime:.1f}s")

    # --- microphone -----------------------------------------------------------------------------------

    def stream(self, pcm: bytes) -> None:
        """Send ``pcm`` (PCM16 16 kHz mono) then ``tail_silence_ms`` of silence in ``chunk_ms`` chunks,
        each when it would have been recorded if ``realtime`` (the schedule is absolute, so pacing does not
        drift), else as fast as possible."""
        if len(pcm) % SAMPLE_WIDTH:
            raise ValueError(f"PCM 16-bit needs an even number of bytes, got {len(pcm)}")
        chunks = chunk_pcm(pcm + bytes(pcm_bytes(self.tail_silence_ms)), self.chunk_ms)
        self._emit(EventKind.STREAM_START, f"{duration_s(pcm):.2f}s audio + {self.tail_silence_ms} ms silence "
                                           f"in {len(chunks)} chunks of {self.chunk_ms} ms")
        start = self.clock()
        for chunk, due in zip(chunks, send_offsets(chunks), strict=True):
            if self.realtime:
                delay = start + due - self.clock()
                if delay > 0:
                    self.sleep(delay)
            self.bus.publish_audio(self.room_id, chunk)
        self._emit(EventKind.STREAM_END, f"{len(chunks)} chunks, {sum(map(len, chunks))} bytes")

    # --- speaker --------------------------------------------------------------------------------------

    def wait_reply(self, timeout: float) -> bytes | None:
        """The next complete reply's PCM, or None when none is complete within ``timeout`` seconds."""
        try:
            return self._replies.get(timeout=timeout)[1]
        except queue.Empty:
            return None

    def play(self, pcm: bytes) -> None:
        """'Play' a reply (sleep its duration when real time), then tell the server: ``playback_done``."""
        if self.realtime:
            self.sleep(duration_s(pcm))
        self.bus.publish_control(ControlMessage(self.room_id, ControlAction.COMMAND, PLAYBACK_DONE,
                                                origin=self.origin))
        self._emit(EventKind.PLAYBACK_DONE, f"{duration_s(pcm):.2f}s played")

    def run(self, pcm: bytes, *, reply_timeout: float = 120.0, linger_secs: float = 0.0) -> SatelliteResult:
        """Start, stream ``pcm``, wait up to ``reply_timeout`` for a reply and play it, then keep playing
        further replies for ``linger_secs``; always stops. ``replies`` is 0 when no reply came."""
        replies: list[bytes] = []
        try:
            self.start()
            self.stream(pcm)
            reply = self.wait_reply(reply_timeout)
            if reply is not None:
                replies.append(reply)
                self.play(reply)
                deadline = self.clock() + linger_secs
                while (remaining := deadline - self.clock()) > 0:
                    more = self.wait_reply(remaining)
                    if more is None:
                        break
                    replies.append(more)
                    self.play(more)
        finally:
            self.stop()
        return SatelliteResult(b"".join(replies), list(self.events), len(replies))

    # --- bus callbacks (paho's network thread) --------------------------------------------------------

    def _on_output(self, room_id: str, frame: OutputFrame) -> None:
        if room_id != self.room_id:
            return
        with self._lock:
            if frame.stream_id != self._stream_id:
                if frame.stream_id == self._finished_id:
                    return  # a redelivered frame of a reply already complete
                self._stream_id, self._parts = frame.stream_id, {}
                self._emit(EventKind.OUTPUT_START, f"stream {frame.stream_id}")
            self._parts[frame.seq] = frame.pcm
            if not frame.last:
                return
            if sorted(self._parts) != list(range(frame.seq + 1)):
                log.warning("satellite %s: reply stream %d is missing frames", self.room_id, frame.stream_id)
            pcm = b"".join(self._parts[seq] for seq in sorted(self._parts))
            self._finished_id, self._stream_id, self._parts = frame.stream_id, None, {}
            self._emit(EventKind.OUTPUT_END, f"stream {frame.stream_id} {duration_s(pcm):.2f}s")
        self._replies.put((frame.stream_id, pcm))

    def _on_wake(self, event: WakeEvent) -> None:
        if event.room_id == self.room_id:
            self._emit(EventKind.WAKE, f"{event.word} {event.score:.2f}")

    def _on_control(self, message: ControlMessage) -> None:
        if message.room_id == self.room_id:
            value = "" if message.value is None else f" {message.value}"
            self._emit(EventKind.CONTROL, f"{message.action.value}{value} from {message.origin}")

    # --- events ---------------------------------------------------------------------------------------

    def _elapsed(self) -> float:
        return 0.0 if self._t0 is None else self.clock() - self._t0

    def _emit(self, kind: EventKind, detail: str) -> None:
        event = SatelliteEvent(round(self._elapsed(), 3), kind.value, detail)
        with self._events_lock:
            self.events.append(event)
            if self.on_event is not None:
                self.on_event(event)
