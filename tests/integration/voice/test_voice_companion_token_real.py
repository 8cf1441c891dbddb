"""The companion services as a user starts them (`assistant wakeword-service`, `assistant
speaker-service`, subprocesses with their real engines): without a token they refuse any address
but loopback; with one (flag or environment) a request without it is 401 and the server's remote
engines, given the token in their settings, work while a wrong token stops them at start-up."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from assistant.config import SpeakerIdSettings, WakeWordSettings
from assistant.errors import ConfigError
from assistant.voice.speaker import create_embedder
from assistant.voice.wake import create_wake_word
from tests.integration.support import free_port

pytestmark = pytest.mark.integration

TOKEN = "companion-token-for-the-test-0123456789"
SERVICES = ("wakeword-service", "speaker-service")


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ASSISTANT_COMPANION_TOKEN"}
    return {**env, **extra}


@pytest.mark.parametrize("service", SERVICES)
def test_beyond_loopback_without_a_token_it_refuses_to_start(service: str) -> None:
    result = subprocess.run([sys.executable, "-m", "api.cli", service, "--host", "0.0.0.0", "--port", str(free_port())],
                            capture_output=True, text=True, timeout=120, env=environment())
    assert result.returncode == 2
    assert "refusing to serve on 0.0.0.0 without a token" in result.stderr and "127.0.0.1" in result.stderr
    short = subprocess.run([sys.executable, "-m", "api.cli", service, "--token", "short", "--port", str(free_port())],
                           capture_output=True, text=True, timeout=120, env=environment())
    assert short.returncode == 2 and "at least 16 characters" in short.stderr


@contextmanager
def running(service: str, *args: str, env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "api.cli", service, "--port", str(port), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else "exited"
            try:
                httpx.get(f"{url}/health", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the service did not come up"
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_wake_word_service_with_a_token_from_the_environment() -> None:
    with running("wakeword-service", env=environment(ASSISTANT_COMPANION_TOKEN=TOKEN)) as url:
        anonymous = httpx.get(f"{url}/v1/words")
        assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "UNAUTHORIZED"
        with pytest.raises(ConfigError, match="401.*set \\[voice.wake_word\\] token"):
            create_wake_word(WakeWordSettings(engine="remote", url=url, token="wrong-token-0123456789"), "kitchen")
        engine = create_wake_word(WakeWordSettings(engine="remote", url=url, token=TOKEN), "kitchen")
        assert engine.process(b"\0\0" * 16000) == []  # a second of silence, through the token-protected service
        engine.close()


def test_the_speaker_service_with_a_token_flag() -> None:
    with running("speaker-service", "--token", TOKEN, env=environment()) as url:
        assert httpx.get(f"{url}/health").status_code == 401
        with pytest.raises(ConfigError, match="refused the token"):
            create_embedder(SpeakerIdSettings(engine="remote", url=url))
        embedder = create_embedder(SpeakerIdSettings(engine="remote", url=url, token=TOKEN))
        assert embedder.dim == 256
