"""Hole 1 of issue 11, repeated as an attacker would: `assistant serve` started as a user starts it
(a subprocess, a config file holding API keys, a secret in its environment), then catalog entries
made with an ADMIN key try to read the 32 bytes of memory.key, the SQLite header of assistant.db,
config.toml with its keys and the server's /proc/<pid>/environ, by path and by search, and to
reach a port the test opens on loopback. Every attempt runs and fails: no output holds any of the
secret bytes (raw, hex or base64), and the port is reached only by an entry that says
``network = true``. (A user key cannot even create entries: 403, tested with the roles.)
Without bwrap the same server answers 503 and runs nothing."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import httpx
import pytest
from fastapi.testclient import TestClient

from assistant.catalog import SandboxedRunner
from assistant.services import Services
from tests.integration.support import free_port
from tests.integration.tools.sandbox_server import HostListener, host_listener_fixture  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.skipif(os.name != "posix", reason="bubblewrap is Linux only")]

BASE = "/v1/commands/catalog"
SQLITE_HEADER = b"SQLite format 3\x00"


@dataclass
class Served:
    url: str
    pid: int
    data_dir: Path
    config: Path
    admin_key: str
    user_key: str
    environ_secret: str

    def secrets(self) -> dict[str, bytes]:
        return {"memory.key": (self.data_dir / "memory.key").read_bytes(), "assistant.db": SQLITE_HEADER,
                "config admin key": self.admin_key.encode(), "config user key": self.user_key.encode(),
                "environment": self.environ_secret.encode()}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("escape")
    data, port = root / "data", free_port()
    admin_key, user_key = f"ak_admin_{uuid4().hex}", f"ak_user_{uuid4().hex}"
    config = root / "config.toml"
    config.write_text(
        f'[server]\ndata_dir = "{data}"\nport = {port}\n'
        '[inference]\nbackend = "scripted"\n[memory]\nembedding_backend = "hashing"\n'
        '[security]\nrate_limit_enabled = false\n'
        f'[security.api_keys]\n"{user_key}" = "{uuid4()}"\n'
        f'"{admin_key}" = {{ user_id = "{uuid4()}", role = "admin" }}\n'
        '[commands]\nexecution_timeout_secs = 20\n')
    secret = f"escape-env-{uuid4().hex}"
    env = {**os.environ, "ASSISTANT_TESTING": "1", "ESCAPE_TEST_SECRET": secret}
    proc = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--config", str(config)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"serve exited: {proc.stdout.read()}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("serve did not come up")
            time.sleep(0.2)
        assert secret.encode() in Path(f"/proc/{proc.pid}/environ").read_bytes()  # it is there to steal
        yield Served(url, proc.pid, data, config, admin_key, user_key, secret)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def admin(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {served.admin_key}"},
                      timeout=60) as client:
        yield client


def run_entry(admin: httpx.Client, command: str, **fields: object) -> dict:
    body = {"name": f"escape {uuid4().hex[:8]}", "command": command, "category": "other", "risk_level": "low",
            "os": "any", **fields}
    created = admin.post(BASE, json=body)
    assert created.status_code == 201, created.text
    executed = admin.post(f"{BASE}/{created.json()['id']}/execute")
    assert executed.status_code == 200, executed.text
    return executed.json()


def leaked(output: str, secrets: dict[str, bytes]) -> list[str]:
    """The names of the secrets found in ``output`` as text, hex or base64."""
    found = []
    for name, value in secrets.items():
        forms = {value.decode("latin-1"), value.hex(), base64.b64encode(value).decode()}
        if name == "assistant.db":
            forms.add("SQLite format 3")
        if any(form and form in output for form in forms):
            found.append(name)
    return found


def attempts(served: Served) -> dict[str, str]:
    """What an attacker would try, each dumping what it read as base64 and as text."""
    dump = "base64 -w0 {0}; echo; cat {0}"
    return {
        "memory.key": dump.format(served.data_dir / "memory.key"),
        "assistant.db": f"head -c 16 {served.data_dir / 'assistant.db'} | base64; cat {served.data_dir}/*",
        "config.toml": dump.format(served.config),
        "server environ": dump.format(f"/proc/{served.pid}/environ"),
        "every environ": "for f in /proc/[0-9]*/environ; do echo $f; base64 -w0 $f; echo; done",
        "search": "find / -xdev \\( -name memory.key -o -name assistant.db -o -name config.toml \\) 2>&1 | head",
        "home": "ls -la ~ /root /home 2>&1; cat ~/.bash_history 2>&1 | head",
        "fd": "ls -l /proc/self/fd /proc/1/fd 2>&1; cat /proc/1/cmdline | tr '\\0' ' '",
    }


@pytest.mark.parametrize("target", ["memory.key", "assistant.db", "config.toml", "server environ", "every environ",
                                    "search", "home", "fd"])
def test_an_admin_made_entry_reads_no_secret(served: Served, admin: httpx.Client, target: str) -> None:
    result = run_entry(admin, attempts(served)[target])
    output = result["stdout"] + result["stderr"]
    assert leaked(output, served.secrets()) == [], output[:2000]
    assert str(served.data_dir) not in result["stdout"] and str(served.config) not in result["stdout"]


def test_each_read_fails_as_missing(served: Served, admin: httpx.Client) -> None:
    for path in (served.data_dir / "memory.key", served.data_dir / "assistant.db", served.config,
                 Path(f"/proc/{served.pid}/environ")):
        result = run_entry(admin, f"cat {path}")
        assert result["status"] == "failed" and "No such file or directory" in result["stderr"], result


def test_no_network_unless_the_entry_says_so(served: Served, admin: httpx.Client,
                                             host_listener: HostListener) -> None:
    connect = f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{host_listener.port} && head -n 1 <&3'"
    offline = run_entry(admin, connect)
    assert offline["status"] == "failed" and "hello from the host" not in offline["stdout"]
    assert host_listener.accepted == []
    online = run_entry(admin, connect, network=True)
    assert online["stdout"] == "hello from the host\n" and len(host_listener.accepted) == 1


def test_without_bwrap_nothing_runs_and_the_answer_is_503(services: Services, make_client: Callable[..., TestClient],
                                                          admin_auth: dict[str, str]) -> None:
    runner = services.catalog.runner
    assert isinstance(runner, SandboxedRunner)
    runner.sandbox.bwrap = "/nonexistent/bwrap"
    client = make_client(services)
    created = client.post(BASE, json={"name": "uptime again", "command": "uptime", "category": "system",
                                      "risk_level": "low", "os": "any"}, headers=admin_auth)
    answer = client.post(f"{BASE}/{created.json()['id']}/execute", headers=admin_auth)
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["code"] == "SERVICE_UNAVAILABLE" and "no sandbox" in error["message"]
    assert "never run unsandboxed" in error["message"] and error["request_id"]
    assert client.get(f"{BASE}/executions", headers=admin_auth).json() == []
