"""The openai backend against a real OpenAI-compatible server: llama.cpp's own, on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

from assistant.llm.base import ChatMessage, GenerationOptions, collect
from assistant.llm.cpu_backend import ensure_cpu_backend
from assistant.llm.openai_compat import OpenAIChatModel
from tests.integration.support import free_port

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def llama_server(small_model_path, tmp_path_factory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    log = open(log_path, "w")  # a file, not a pipe: the server logs more than a pipe buffer holds
    # llama-cpp-python's server loads no CPU variant itself: it is named as a user does, with the one
    # `assistant engine cpu --path` prints (the self-tested choice of this machine)
    info = ensure_cpu_backend(model=small_model_path, threads=2)
    env = {**os.environ, **({"GGML_BACKEND_PATH": info.path} if info.path else {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(small_model_path), "--model_alias", "smollm2",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2"],
        stdout=log, stderr=subprocess.STDOUT, text=True, env=env,
    )
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {log_path.read_text()[-2000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not start")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_openai_backend_streams_and_counts_tokens(llama_server):
    model = OpenAIChatModel("smollm2", llama_server)
    health = model.health()
    assert health.healthy and isinstance(health.latency_ms, int)
    assert [m.id for m in model.models()] == ["smollm2"]
    result = collect(model.stream([ChatMessage("user", "Say hello.")], GenerationOptions(max_tokens=16, temperature=0)))
    assert result.content.strip()
    assert 0 < result.usage.completion <= 16


def test_openai_backend_reports_an_unknown_model_as_unhealthy(llama_server):
    health = OpenAIChatModel("not-served", llama_server).health()
    assert health.healthy is False and "not served" in health.detail
