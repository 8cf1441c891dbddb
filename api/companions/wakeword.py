"""The wake-word companion service (spec: internal port 8083): the in-process wake word engine
(pyopen-wakeword) for many audio streams, over HTTP. ``assistant wakeword-service --port 8083`` serves it;
the ``remote`` wake word engine (:class:`assistant.voice.wake.RemoteWakeWord`) is its client.

HTTP interface (JSON unless stated; errors use the API's envelope ``{"error": {"code", "message", ...}}``):

- ``GET /health`` -> ``{"status": "ok", "engine": "pyopen-wakeword", "words": [configured words]}``
- ``GET /v1/words`` -> ``{"words": [configured words], "available": [packaged words]}``
- ``POST /v1/streams/{stream_id}/audio`` with a body of raw PCM16 LE 16 kHz mono (``Content-Type:
  application/octet-stream`` or ``audio/L16``; at most 64 KiB = 2.048 s per request) ->
  ``{"detections": [{"word", "score", "at_s"}]}``. The stream's engine is created on first use and keeps
  partial 80 ms steps between requests; ``at_s`` counts the seconds of audio that stream has received.
  Detection: score >= max(the configured sensitivity, the word's calibrated threshold; see
  :mod:`assistant.voice.wake_thresholds`), then 1.0 s of audio without any detection.
- ``DELETE /v1/streams/{stream_id}`` -> 204: forget the stream (audio and model state); 404 if unknown.

``stream_id`` matches ``^[A-Za-z0-9_.-]{1,64}$`` (422 otherwise). A body of odd length or another content
type -> 422 ``VALIDATION_ERROR``; a body over 64 KiB -> 413 ``PAYLOAD_TOO_LARGE``. At most
:data:`MAX_STREAMS` streams are kept: the least recently used one is forgotten to admit a new one.
It listens on 127.0.0.1 by default; with a token (``--token`` or ``ASSISTANT_COMPANION_TOKEN``) every
request needs ``Authorization: Bearer <token>`` (401 otherwise), and without one it refuses to bind
beyond loopback (see :mod:`api.companions`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import FastAPI, Path, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from api.companions import companion_app
from assistant.config import WakeWordSettings
from assistant.errors import AssistantError, NotFoundError, ValidationFailed
from assistant.voice.wake import (
    MAX_REQUEST_BYTES,
    PACKAGED_WORDS,
    STREAM_ID,
    WakeDetection,
    WakeWordEngine,
    check_words,
    create_wake_word,
)

ENGINE_ID = "pyopen-wakeword"
MAX_STREAMS = 64
AUDIO_TYPES = frozenset({"", "application/octet-stream", "audio/l16"})

EngineFactory = Callable[[WakeWordSettings, str], WakeWordEngine]
StreamId = Annotated[str, Path(pattern=f"^{STREAM_ID.pattern}$", description="e.g. the room id")]


class Health(BaseModel):
    status: str
    engine: str
    words: list[str]


class Words(BaseModel):
    words: list[str]
    available: list[str]


class Detection(BaseModel):
    word: str
    score: float
    at_s: float


class Detections(BaseModel):
    detections: list[Detection]


class _Stream:
    def __init__(self, engine: WakeWordEngine):
        self.engine = engine
        self.lock = threading.Lock()  # one request at a time per stream: the engine is stateful


class Streams:
    """The engines of the streams, created on first use; past ``max_streams`` the least recently used goes."""

    def __init__(self, settings: WakeWordSettings, factory: EngineFactory, max_streams: int = MAX_STREAMS):
        self._settings = settings
        self._factory = factory
        self._max = max_streams
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self._lock = threading.Lock()

    def process(self, stream_id: str, pcm: bytes) -> list[WakeDetection]:
        stream = self._get_or_create(stream_id)
        with stream.lock:
            return stream.engine.process(pcm)

    def _get_or_create(self, stream_id: str) -> _Stream:
        with self._lock:
            stream = self._streams.get(stream_id)
            if stream is None:
                stream = self._streams[stream_id] = _Stream(self._factory(self._settings, stream_id))
                while len(self._streams) > self._max:
                    _close(self._streams.popitem(last=False)[1])
            self._streams.move_to_end(stream_id)
            return stream

    def forget(self, stream_id: str) -> bool:
        """Close the stream's engine; False if there was none."""
        with self._lock:
            stream = self._streams.pop(stream_id, None)
        if stream is None:
            return False
        _close(stream)
        return True

    def __len__(self) -> int:
        return len(self._streams)

    def close(self) -> None:
        with self._lock:
            streams, self._streams = list(self._streams.values()), OrderedDict()
        for stream in streams:
            _close(stream)


def _close(stream: _Stream) -> None:
    with stream.lock:  # waits for a request in progress
        stream.engine.close()


async def _read_pcm(request: Request) -> bytes:
    """The raw PCM body, refused early when over the limit, of the wrong type or of odd length."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in AUDIO_TYPES:
        raise ValidationFailed(f"the body must be raw PCM16 LE 16 kHz mono (Content-Type: application/octet-stream),"
                               f" got Content-Type {kind!r}",
                               fields=[{"field": "content-type", "error": f"unsupported type {kind!r}"}])
    too_large = AssistantError(f"an audio request carries at most {MAX_REQUEST_BYTES} bytes (2.048 s); "
                               "split longer audio", code="PAYLOAD_TOO_LARGE")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_REQUEST_BYTES:
        raise too_large
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > MAX_REQUEST_BYTES:
            raise too_large
    if len(body) % 2:
        raise ValidationFailed(f"raw PCM 16-bit needs an even number of bytes, got {len(body)}",
                               fields=[{"field": "body", "error": "odd length"}])
    return bytes(body)


def create_app(settings: WakeWordSettings, engine_factory: EngineFactory | None = None, *,
               token: str | None = None) -> FastAPI:
    """The service for ``settings.words`` at ``settings.sensitivity`` (``engine``, ``url`` and ``token`` are
    ignored: the service always runs the engine in-process, and is protected by ``token`` when given).
    ``engine_factory(settings, stream_id)`` makes a stream's engine (default
    :func:`assistant.voice.wake.create_wake_word`). Raises ConfigError for unknown words."""
    served = settings.model_copy(update={"engine": ENGINE_ID, "url": None, "token": None})
    words = list(check_words(served.words))
    factory = engine_factory or create_wake_word
    factory(served, "startup-check").close()  # a broken engine fails now, not on the first audio
    streams = Streams(served, factory)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        streams.close()

    app = companion_app("Wake-word companion service", __doc__, token, lifespan=lifespan)
    app.state.streams = streams

    @app.get("/health", response_model=Health)
    async def health() -> Health:
        return Health(status="ok", engine=ENGINE_ID, words=words)

    @app.get("/v1/words", response_model=Words)
    async def list_words() -> Words:
        """The configured words, and every packaged word the service could be configured with."""
        return Words(words=words, available=list(PACKAGED_WORDS))

    @app.post("/v1/streams/{stream_id}/audio", response_model=Detections,
              openapi_extra={"requestBody": {"required": True, "content": {"application/octet-stream": {
                  "schema": {"type": "string", "format": "binary", "maxLength": MAX_REQUEST_BYTES}}}}})
    async def post_audio(stream_id: StreamId, request: Request) -> Detections:
        """Feed the stream's next audio; the wake words detected in it."""
        pcm = await _read_pcm(request)
        found = await run_in_threadpool(streams.process, stream_id, pcm)
        return Detections(detections=[Detection(word=d.word, score=d.score, at_s=d.at_s) for d in found])

    @app.delete("/v1/streams/{stream_id}", status_code=204)
    async def delete_stream(stream_id: StreamId) -> Response:
        """Forget the stream; its next audio starts a fresh one (``at_s`` from 0)."""
        if not await run_in_threadpool(streams.forget, stream_id):
            raise NotFoundError(f"no wake word stream {stream_id!r}")
        return Response(status_code=204)

    return app
