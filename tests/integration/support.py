"""Helpers that start real components: uvicorn on loopback with real services, SSE parsing."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from api.cli import uvicorn_options
from api.main import create_app
from assistant.config import Settings
from assistant.services import Services, build_services
from assistant.voice.audio import decode_audio

SPEAKER_CLIPS = Path(__file__).resolve().parents[2].parent / "shared" / "benchmarks" / "speaker"


def speaker_clips() -> dict[str, list[bytes]]:
    """The 5 LibriSpeech readers x 10 clips of ``../shared/benchmarks/speaker``: reader id -> the clips as
    PCM16 16 kHz mono, in file order. Fails (never skips) when they are missing."""
    assert SPEAKER_CLIPS.is_dir(), f"the benchmark clips are missing: {SPEAKER_CLIPS}"
    found = {d.name: [decode_audio(f) for f in sorted(d.glob("*.flac"))] for d in sorted(SPEAKER_CLIPS.iterdir())
             if d.is_dir()}
    assert len(found) == 5 and all(len(c) == 10 for c in found.values()), "the benchmark clips are incomplete"
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, services: Services):
        self.services = services
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        options = {**uvicorn_options(services.settings), "host": "127.0.0.1", "port": self.port, "log_level": "warning"}
        config = uvicorn.Config(create_app(services), **options)  # as `assistant serve` runs it
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.services.close()


def serve(tmp_path: Path, **overrides: object) -> tuple[LiveServer, str]:
    """Build services on ``tmp_path`` with ``overrides`` and serve them; returns (server, api key)."""
    overrides.setdefault("server", {})
    overrides["server"] = {"data_dir": str(tmp_path), **overrides["server"]}  # type: ignore[dict-item]
    services = build_services(Settings.load(**overrides))
    key, _ = services.keys.create("integration")
    return LiveServer(services), key


def parse_sse(text_lines: list[str]) -> list[tuple[str, str]]:
    """(event, data) pairs from Server-Sent Events lines."""
    events, event, data = [], "message", []
    for line in text_lines:
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            events.append((event, "\n".join(data)))
            event, data = "message", []
    if data:
        events.append((event, "\n".join(data)))
    return events


def stream_chat(client: httpx.Client, base: str, headers: dict[str, str], body: dict) -> tuple[int, list[tuple[str, str]]]:
    with client.stream("POST", f"{base}/v1/chat/stream", json=body, headers=headers, timeout=300) as response:
        if response.status_code != 200:
            response.read()
            return response.status_code, [("error", response.text)]
        return 200, parse_sse(list(response.iter_lines()))
