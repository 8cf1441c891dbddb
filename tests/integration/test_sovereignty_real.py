"""The sovereignty score of a real running server: uvicorn on loopback, the packaged MiniLM embedder, a
real SQLite file with memories sealed under a real key file, the real socket table (psutil) and a real
process listening on the wake-word companion's port beyond loopback. Nothing asserts a time."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from assistant.extended import sovereignty_probe as probe
from tests.integration.support import serve

pytestmark = pytest.mark.integration

LISTENER = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen()
print("listening", flush=True)
time.sleep(120)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def test_the_score_of_a_real_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The wake-word companion's default port (8083) may be taken on a shared machine: the probe watches a
    # free port in its place (the server runs in this process), so the test never depends on the host.
    port = free_port()
    wake = probe.COMPANION_PORTS[8083]
    monkeypatch.setattr(probe, "COMPANION_PORTS", {**{k: v for k, v in probe.COMPANION_PORTS.items() if k != 8083},
                                                   port: wake})
    live, key = serve(tmp_path, inference={"backend": "scripted"}, security={"rate_limit_enabled": False},
                      memory={"embedding_backend": "sentence-transformers"}, knowledge_graph={"extractor": "rules"},
                      weather={"enabled": True})
    companion = subprocess.Popen([sys.executable, "-c", LISTENER, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert companion.stdout is not None and companion.stdout.readline().strip() == "listening"
        with live, httpx.Client(base_url=live.base_url, headers={"X-API-Key": key}, timeout=300) as http:
            for text in ("My locker code is 4711", "I prefer green tea", "My sister Anna lives in Porto"):
                assert http.post("/v1/memories", json={"content": text, "summary": text[:20]}).status_code == 201
            body = http.get("/api/sovereignty").json()
            check(body, port)
            # once the companion is gone, so is the finding: the score reads the live socket table
            companion.kill()
            companion.wait(timeout=30)
            after = http.get("/api/sovereignty").json()
            assert not [f for f in after["findings"]["network_isolation"] if "wake word service" in f["message"]]
            assert after["network_isolation"] > body["network_isolation"]
    finally:
        if companion.poll() is None:
            companion.kill()
            companion.wait(timeout=30)


def check(body: dict, port: int) -> None:
    dims = ("data_locality", "encryption_coverage", "secret_management", "network_isolation")
    assert body["total"] == sum(body[d] for d in dims) and all(0 <= body[d] <= 25 for d in dims)
    parts = {(d, p["part"]): p for d in dims for p in body["breakdown"][d]}
    # the memories were sealed with the key: every sampled value opened
    sealed = parts[("encryption_coverage", "sealed values")]
    assert sealed["points"] == 20.0 and "100.0%" in sealed["detail"]
    # the server's own socket, found in the socket table: loopback
    server = parts[("network_isolation", "server bind")]
    assert server["points"] == 10.0 and server["detail"] == "127.0.0.1 (listening)"
    # the process on the wake-word port, bound to every interface, without a token: a high finding with its fix
    [exposed] = [f for f in body["findings"]["network_isolation"] if "wake word service" in f["message"]]
    assert exposed["severity"] == "high" and f"0.0.0.0:{port}" in exposed["message"]
    assert "127.0.0.1" in exposed["fix"]
    assert parts[("network_isolation", "companion services")]["points"] == 0.0
    # weather goes to the public Open-Meteo API (https): remote, counted against data locality only
    assert any(f["setting"] == "weather.base_url" for f in body["findings"]["data_locality"])
    assert parts[("encryption_coverage", "TLS to remote endpoints")]["points"] == 5.0
    # the real key file: 0600, owned by this process's user
    assert parts[("secret_management", "key file")]["points"] == 8.0
