"""The console script as a user runs it: serve, models, keys."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.support import free_port

pytestmark = pytest.mark.integration
ASSISTANT = [sys.executable, "-m", "api.cli"]


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ASSISTANT, *args], capture_output=True, text=True, timeout=timeout,
                          env={k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")})


def test_serve_refuses_to_start_without_the_model(tmp_path):
    result = run("serve", "--data-dir", str(tmp_path), "--port", str(free_port()))
    assert result.returncode != 0
    assert "not installed" in result.stderr and "assistant models install" in result.stderr


def test_serve_refuses_an_invalid_config_naming_the_key_and_range(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[security]\nrate_limit_rpm = 0\n[sanitation]\nquarantine_ttl_days = 99\n")
    result = run("serve", "--config", str(config))
    assert result.returncode == 2
    assert "security.rate_limit_rpm" in result.stderr and "[1, 1000000]" in result.stderr
    assert "sanitation.quarantine_ttl_days" in result.stderr and "[1, 30]" in result.stderr


def test_serve_refuses_pqc_and_homomorphic_naming_the_key_and_why(tmp_path):
    config = tmp_path / "pqc.toml"
    config.write_text("[pqc]\nenabled = true\n[homomorphic]\nenabled = true\n")
    result = run("serve", "--config", str(config))
    assert result.returncode == 2
    assert "pqc.enabled" in result.stderr and "post-quantum key exchange is not implemented" in result.stderr
    assert "homomorphic.enabled" in result.stderr and "homomorphic encryption is not implemented" in result.stderr


def test_models_list_and_keys(tmp_path):
    listing = run("models", "list", "--data-dir", str(tmp_path))
    assert listing.returncode == 0
    assert "qwen2.5-coder-0.5b-instruct" in listing.stdout and "not installed" in listing.stdout

    created = run("keys", "create", "--name", "laptop", "--data-dir", str(tmp_path))
    assert created.returncode == 0
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("ak_")
    assert key.encode() not in (tmp_path / "assistant.db").read_bytes()
    duplicate = run("keys", "create", "--name", "laptop", "--data-dir", str(tmp_path))
    assert duplicate.returncode == 2 and "exists" in duplicate.stderr
    assert "laptop" in run("keys", "list", "--data-dir", str(tmp_path)).stdout


def test_serve_with_the_small_model_prints_a_key_and_answers(tmp_path, small_model_path):
    port = free_port()
    config = tmp_path / "assistant.toml"
    config.write_text(
        f'[server]\ndata_dir = "{tmp_path / "data"}"\nport = {port}\n'
        f'[inference]\nmodel = "smollm2-135m-instruct"\nmodel_path = "{small_model_path}"\nthreads = 2\n'
        f"max_tokens = 8\n"
    )
    proc = subprocess.Popen([*ASSISTANT, "serve", "--config", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        key = None
        deadline = time.monotonic() + 120
        while key is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise AssertionError("serve exited early")
            if line.strip().startswith("ak_"):
                key = line.strip()
        assert key, "serve printed no API key"
        base = f"http://127.0.0.1:{port}"
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        reply = httpx.post(f"{base}/v1/chat", json={"message": "Hello"}, timeout=120,
                           headers={"Authorization": f"Bearer {key}"})
        assert reply.status_code == 200, reply.text
        assert reply.json()["model"] == "smollm2-135m-instruct"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert Path(tmp_path / "data" / "assistant.db").exists()


def test_serve_refuses_a_voice_engine_that_cannot_run(tmp_path, small_model_path):
    config = tmp_path / "assistant.toml"
    config.write_text(
        f'[server]\ndata_dir = "{tmp_path / "data"}"\nport = {free_port()}\n'
        f'[inference]\nmodel = "smollm2-135m-instruct"\nmodel_path = "{small_model_path}"\nthreads = 2\n'
        '[voice.wake_word]\nwords = ["hey_computer"]\n'
    )
    result = run("serve", "--config", str(config), timeout=240)
    assert result.returncode == 2, result.stderr
    assert "the voice pipeline cannot start" in result.stderr and "hey_computer" in result.stderr
    assert "hey_jarvis" in result.stderr  # the words that exist are named
