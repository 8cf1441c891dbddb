"""The speaker-identification companion service (spec: internal port 8084): the in-process speaker
embedder (the configured in-process engine, ge2e by default) over HTTP, so several servers or satellites share one loaded model.
``assistant speaker-service --port 8084`` serves it; the ``remote`` speaker engine
(:class:`assistant.voice.speaker.RemoteEmbedder`) is its client.

HTTP interface (JSON responses; errors use the API's envelope ``{"error": {"code", "message", ...}}``):

- ``GET /health`` -> ``{"status": "ok", "engine": "ge2e", "dim": 256}``
- ``POST /v1/embed`` with the audio as the body: a WAV or FLAC file (``Content-Type: audio/wav`` or
  ``audio/flac``, any rate and channels) or raw PCM16 LE 16 kHz mono (``application/octet-stream``),
  0.5 s to 60 s, at most 2 MiB -> ``{"embedding": [dim floats, L2-normalised], "dim": 256}``.
  An empty, unreadable, odd-length, too short or too long body is 422 ``VALIDATION_ERROR``; over 2 MiB
  is 413 ``PAYLOAD_TOO_LARGE``; an engine failure is 503 ``ENGINE_ERROR``.

Profiles and matching stay in the main server: this service only turns audio into embeddings. It listens
on 127.0.0.1 by default; with a token (``--token`` or ``ASSISTANT_COMPANION_TOKEN``) every request needs
``Authorization: Bearer <token>`` (401 otherwise), and without one it refuses to bind beyond loopback
(see :mod:`api.companions`).
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Request
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from api.companions import companion_app
from assistant.config import SpeakerIdSettings
from assistant.errors import AssistantError, ConfigError
from assistant.voice.audio import decode_upload
from assistant.voice.speaker import SpeakerEmbedder, create_embedder
from assistant.voice.speakers import MAX_SAMPLE_BYTES

IN_PROCESS_ENGINE = "ge2e"  # what the service runs when the settings name the remote engine (itself)

EmbedderFactory = Callable[[SpeakerIdSettings], SpeakerEmbedder]
_BINARY = {"schema": {"type": "string", "format": "binary", "maxLength": MAX_SAMPLE_BYTES}}


class Health(BaseModel):
    status: str
    engine: str
    dim: int


class Embedding(BaseModel):
    embedding: list[float]
    dim: int


async def _read_body(request: Request) -> bytes:
    """The body, refused as soon as it passes :data:`MAX_SAMPLE_BYTES`."""
    too_large = AssistantError(f"a sample is at most {MAX_SAMPLE_BYTES} bytes", code="PAYLOAD_TOO_LARGE")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_SAMPLE_BYTES:
        raise too_large
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > MAX_SAMPLE_BYTES:
            raise too_large
    return bytes(body)


def create_app(settings: SpeakerIdSettings, embedder_factory: EmbedderFactory | None = None, *,
               token: str | None = None) -> FastAPI:
    """The service for ``settings`` (engine ``remote`` means this service, so it runs ``ge2e``),
    protected by ``token`` when given. ``embedder_factory(settings)`` makes the embedder (default
    :func:`create_embedder`); it is built and checked now, so a missing model or a dimension other than
    ``embedding_dim`` raises ConfigError."""
    engine = IN_PROCESS_ENGINE if settings.engine == "remote" else settings.engine
    served = settings.model_copy(update={"engine": engine, "url": None, "token": None})
    embedder = (embedder_factory or create_embedder)(served)
    if embedder.dim != served.embedding_dim:
        raise ConfigError(f"speaker engine {engine!r} produces {embedder.dim}-dim embeddings but "
                          f"embedding_dim is {served.embedding_dim}")

    app = companion_app("Speaker-identification companion service", __doc__, token)
    app.state.embedder = embedder

    @app.get("/health", response_model=Health)
    async def health() -> Health:
        return Health(status="ok", engine=engine, dim=embedder.dim)

    @app.post("/v1/embed", response_model=Embedding, openapi_extra={"requestBody": {"required": True, "content": {
        "audio/wav": _BINARY, "audio/flac": _BINARY, "application/octet-stream": _BINARY}}})
    async def embed(request: Request) -> Embedding:
        """The speaker embedding of the sample (L2-normalised)."""
        body = await _read_body(request)
        pcm = await run_in_threadpool(decode_upload, body, request.headers.get("content-type"))
        vector = await run_in_threadpool(embedder.embed, pcm)
        return Embedding(embedding=[float(x) for x in vector], dim=len(vector))

    return app
