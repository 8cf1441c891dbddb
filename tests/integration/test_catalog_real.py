"""The catalog against the real shell in the real sandbox, over HTTP (uvicorn on loopback, services
built from settings): commands really run (echo, uname, a default entry), a sleep is killed at the
timeout with everything it started, 1 MB of output is capped, an entry that needs approval really
does not run until approved and then runs exactly once (decided by another user's admin key, never
the requester's), outputs are sealed on disk, and a deleted default stays deleted after a restart.
Entries are made and deleted with an admin key; the user key of ``serve`` executes. Commands run
sandboxed, so their side effects are observed through the executions recorded, never through host
files. No test asserts a duration."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import httpx
import pytest

from assistant.catalog import DEFAULT_ENTRIES, current_os
from assistant.config import Settings
from assistant.services import build_services
from assistant.tools.shell_sandbox import SCRIPT_PATH
from tests.integration.support import LiveServer, serve
from tests.integration.tools.sandbox_server import sandboxed_pids

pytestmark = pytest.mark.integration

TIMEOUT_SECS = 3
CAP = 65_536
OVERRIDES = {
    "inference": {"backend": "scripted"},
    "memory": {"embedding_backend": "hashing"},
    "security": {"rate_limit_enabled": False},
    "commands": {"execution_timeout_secs": TIMEOUT_SECS, "max_output_bytes": CAP},
}
BASE = "/v1/commands/catalog"


class Api:
    """``http``: the user key of ``serve`` (the owner's); ``admin``: the owner's admin key (makes
    entries); ``decider``: another user's admin key (decides the owner's requests)."""

    def __init__(self, live: LiveServer, key: str):
        self.live = live
        admin, _ = live.services.keys.create(f"admin {uuid4().hex[:6]}", role="admin")
        decider, _ = live.services.keys.create(f"decider {uuid4().hex[:6]}", user_id=uuid4(), role="admin")
        self.http, self.admin, self.decider = (
            httpx.Client(base_url=live.base_url, headers={"Authorization": f"Bearer {k}"}, timeout=60)
            for k in (key, admin, decider))

    def entry(self, command: str, **fields: object) -> dict:
        body = {"name": f"test {uuid4().hex[:8]}", "command": command, "category": "other", "risk_level": "low",
                "os": "any", **fields}
        response = self.admin.post(BASE, json=body)
        assert response.status_code == 201, response.text
        return response.json()

    def close(self) -> None:
        for client in (self.http, self.admin, self.decider):
            client.close()

    def execute(self, entry_id: str) -> httpx.Response:
        return self.http.post(f"{BASE}/{entry_id}/execute")

    def executions(self, entry_id: str) -> list[dict]:
        return self.http.get(f"{BASE}/executions", params={"catalog_id": entry_id}).json()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    live, key = serve(tmp_path, **OVERRIDES)
    with live:
        client = Api(live, key)
        yield client
        client.close()


def test_commands_really_run(api: Api) -> None:
    echo = api.execute(api.entry("echo hello from the shell")["id"])
    assert echo.status_code == 200
    assert (echo.json()["status"], echo.json()["exit_code"], echo.json()["stdout"]) == (
        "completed", 0, "hello from the shell\n")
    uname = api.execute(api.entry("uname -a", os=current_os().value)["id"]).json()
    assert uname["status"] == "completed" and os.uname().sysname in uname["stdout"]
    failing = api.execute(api.entry("ls /definitely/not/here")["id"]).json()
    assert failing["status"] == "failed" and failing["exit_code"] != 0 and "not" in failing["stderr"]


def test_a_default_entry_runs(api: Api) -> None:
    found = api.http.get(f"{BASE}/search", params={"q": "Kernel version (Linux)"}).json()
    body = api.execute(found[0]["id"]).json()
    assert body["status"] == "completed" and body["stdout"].startswith(os.uname().sysname)


def test_a_sleep_is_killed_at_the_timeout(api: Api) -> None:
    body = api.execute(api.entry("sleep 60 & echo started; wait")["id"]).json()
    assert body["status"] == "timed_out" and body["exit_code"] is None and body["stdout"] == "started\n"
    runner = api.live.services.catalog.runner.sandbox
    assert sandboxed_pids(runner, SCRIPT_PATH) == []  # the background sleep died with the sandbox


def test_a_megabyte_of_output_is_capped(api: Api) -> None:
    body = api.execute(api.entry("head -c 1048576 /dev/zero | tr '\\0' x")["id"]).json()
    assert body["status"] == "completed" and body["truncated"] is True
    assert body["stdout"] == "x" * CAP


def test_nothing_runs_until_approved_then_exactly_once(api: Api) -> None:
    entry = api.entry("echo ran", requires_approval=True)
    requested = api.execute(entry["id"])
    assert requested.status_code == 200 and requested.json()["status"] == "approval_required"
    approval_id = requested.json()["approval_id"]
    other = api.execute(entry["id"]).json()["approval_id"]  # a second request, denied below
    assert api.executions(entry["id"]) == []
    pending = api.http.get("/v1/approvals", params={"status": "pending"}).json()
    assert {a["id"] for a in pending} == {approval_id, other}

    for own in (api.http, api.admin):  # the requester's user key and the requester's own admin key
        assert own.post(f"/v1/approvals/{approval_id}/approve").status_code == 403
    assert api.executions(entry["id"]) == []
    approved = api.decider.post(f"/v1/approvals/{approval_id}/approve", json={"reason": "checked"})
    assert approved.status_code == 200 and approved.json()["status"] == "completed"
    assert [e["stdout"] for e in api.executions(entry["id"])] == ["ran\n"]
    assert api.decider.post(f"/v1/approvals/{approval_id}/approve").status_code == 409
    assert api.decider.post(f"/v1/approvals/{other}/deny").status_code == 200
    assert api.decider.post(f"/v1/approvals/{other}/approve").status_code == 409
    assert len(api.executions(entry["id"])) == 1  # once
    actions = [e["action"] for e in api.admin.get(f"{BASE}/audit", params={"catalog_id": entry["id"]}).json()]
    assert actions == ["denied", "execute", "approved", "approval_requested", "approval_requested", "created"]
    own = [e["action"] for e in api.http.get(f"{BASE}/audit", params={"catalog_id": entry["id"]}).json()]
    assert own == ["approval_requested", "approval_requested", "created"]  # a user key: its own user's events


def test_a_high_risk_entry_does_not_run_without_approval(api: Api) -> None:
    entry = api.entry("echo high", risk_level="high", requires_approval=False)
    assert entry["requires_approval"] is True
    requested = api.execute(entry["id"])
    assert requested.status_code == 200 and requested.json()["status"] == "approval_required"
    assert api.executions(entry["id"]) == []


def test_outputs_are_sealed_on_disk_and_a_deleted_default_stays_deleted(tmp_path: Path) -> None:
    secret = f"secret-{uuid4().hex}"
    live, key = serve(tmp_path, **OVERRIDES)
    with live:
        api = Api(live, key)
        execution = api.execute(api.entry(f"echo {secret}")["id"]).json()
        assert execution["stdout"] == f"{secret}\n"
        uptime = api.http.get(f"{BASE}/search", params={"q": "Uptime (Linux)"}).json()[0]
        assert api.http.delete(f"{BASE}/{uptime['id']}").status_code == 403  # a user key deletes nothing
        assert api.admin.delete(f"{BASE}/{uptime['id']}").status_code == 204
        api.close()
    on_disk = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert secret.encode() not in on_disk.replace(f"echo {secret}".encode(), b"")  # only the command text is plain

    services = build_services(Settings.load(server={"data_dir": str(tmp_path)}, **OVERRIDES))  # a restart
    key, _ = services.keys.create("after restart")
    with LiveServer(services) as live:
        api = Api(live, key)
        assert api.http.get(f"{BASE}/count").json()["count"] == len(DEFAULT_ENTRIES)  # 32 - 1 + the echo entry
        assert api.http.get(f"{BASE}/search", params={"q": "Uptime (Linux)"}).json() == []
        again = api.http.get(f"{BASE}/executions/{execution['execution_id']}").json()
        assert again["stdout"] == f"{secret}\n"
        api.close()
