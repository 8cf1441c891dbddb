"""`assistant serve` started as a user starts it, once per optional section, with the real components.

Each test writes a TOML config into a fresh data directory, starts the console script as a subprocess
(``ASSISTANT_TESTING=1`` so the config may name the scripted engine and the hashing embedder: none of
the routes called here needs a model, so no model is loaded; ``PYTHONPATH`` is the repository), waits for
``/health``, takes the API key that ``serve`` prints on a first start, calls one route of each section,
and stops the server with SIGTERM: it must exit 0 without a traceback, having closed its services
(the database's write-ahead log is gone).

Sections are grouped so that three server starts cover them all:

- every tool capability against its real backend: ``[weather]``, ``[web_search]``, ``[transit]`` (the
  replay server of recorded answers), ``[calendar]``, ``[tasks]``, ``[contacts]`` (Radicale),
  ``[email]`` (Dovecot and aiosmtpd), ``[code_execution]`` (bubblewrap) and ``[reminders]``:
  ``GET /v1/tools`` lists each capability's tools;
- ``[voice]`` with a real mosquitto: ``GET /v1/voice/status`` reports the bus connected, a room is
  created and listed (the start that crashed with ``'VoiceService' object has no attribute 'dropped'``);
- ``[messenger]`` and ``[agentic]``, and a ``[voice]`` section whose broker is unreachable: the server
  starts (the bus keeps retrying in the background; ``mqtt_connected`` is false), the webhook answers
  its subscription check and an agentic task runs to its end.

A broken section that cannot work at all (a wake word that does not exist) stops the start with the
documented message: see ``test_cli.py::test_serve_refuses_a_voice_engine_that_cannot_run``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from assistant.testing.replay import ReplayServer
from assistant.tools import calendar, code, contacts, mail, reminders, tasks, transit, weather, web_search
from assistant.tools.base import Capability
from tests.integration.support import free_port
from tests.integration.tools.dav_server import DavServer, dav_server_fixture  # noqa: F401
from tests.integration.tools.mail_server import (  # noqa: F401
    PASSWORD,
    USER,
    DovecotServer,
    SmtpSink,
    dovecot_server_fixture,
    smtp_server_fixture,
)
from tests.integration.tools.replay_server import replay_server_fixture  # noqa: F401
from tests.integration.voice.mosquitto import Mosquitto, mosquitto  # noqa: F401

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
START_SECS = 240  # a bound against hangs (voice engines load at start), not a timing assertion
TESTING_DOUBLES = {"inference": {"backend": "scripted"}, "memory": {"embedding_backend": "hashing"}}


def assistant_command() -> list[str]:
    """The console script installed next to this interpreter, as a user runs it."""
    script = Path(sys.executable).with_name("assistant")
    return [str(script)] if script.exists() else [sys.executable, "-m", "api.cli"]


def toml(sections: dict[str, dict[str, Any]]) -> str:
    """A TOML document of nested tables (JSON's strings, numbers, booleans and lists are TOML's too)."""
    lines: list[str] = []

    def table(name: str, values: dict[str, Any]) -> None:
        lines.append(f"[{name}]")
        lines.extend(f"{k} = {json.dumps(v)}" for k, v in values.items() if not isinstance(v, dict))
        for k, v in values.items():
            if isinstance(v, dict):
                table(f"{name}.{k}", v)

    for name, values in sections.items():
        table(name, values)
    return "\n".join(lines) + "\n"


@dataclass
class Served:
    process: subprocess.Popen[str]
    base_url: str
    output: list[str] = field(default_factory=list)
    key: str | None = None

    @property
    def log(self) -> str:
        return "".join(self.output)

    @property
    def headers(self) -> dict[str, str]:
        assert self.key, f"serve printed no API key:\n{self.log}"
        return {"Authorization": f"Bearer {self.key}"}

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.get(f"{self.base_url}{path}", headers=self.headers, timeout=60, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.post(f"{self.base_url}{path}", headers=self.headers, timeout=60, **kwargs)

    def until(self, what: str, check: Callable[[], bool], secs: float = 60) -> None:
        deadline = time.monotonic() + secs  # a bound against hangs, not a timing assertion
        while not check():
            assert time.monotonic() < deadline, f"{what} never happened; server output:\n{self.log}"
            time.sleep(0.1)


def _read(served: Served) -> None:
    assert served.process.stdout is not None
    for line in served.process.stdout:
        served.output.append(line)
        if served.key is None and line.strip().startswith("ak_"):
            served.key = line.strip()


@contextmanager
def serve(tmp_path: Path, sections: dict[str, dict[str, Any]]) -> Iterator[Served]:
    """``assistant serve --config`` with ``sections`` (over the test doubles) until /health answers; on
    exit SIGTERM, and the server must stop cleanly."""
    port = free_port()
    config = tmp_path / "assistant.toml"
    config.write_text(toml({"server": {"data_dir": str(tmp_path / "data"), "port": port},
                            **TESTING_DOUBLES, **sections}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env.update(ASSISTANT_TESTING="1", PYTHONPATH=str(REPO))
    process = subprocess.Popen([*assistant_command(), "serve", "--config", str(config)], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    served = Served(process, f"http://127.0.0.1:{port}")
    reader = threading.Thread(target=_read, args=(served,), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + START_SECS
        while True:
            assert process.poll() is None, f"serve exited with {process.returncode}:\n{served.log}"
            assert time.monotonic() < deadline, f"/health never answered:\n{served.log}"
            try:
                if httpx.get(f"{served.base_url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        assert (tmp_path / "data" / "assistant.db-wal").exists()  # open in WAL mode (see the check at the end)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        reader.join(timeout=10)
    assert process.returncode == 0, f"serve exited with {process.returncode} after SIGTERM:\n{served.log}"
    assert "Traceback" not in served.log, served.log
    # the services were closed: SQLite checkpoints and removes its write-ahead log when the last connection closes
    assert (tmp_path / "data" / "assistant.db").exists()
    assert not (tmp_path / "data" / "assistant.db-wal").exists(), "the database was not closed"


def tool_names(*capabilities: Capability) -> set[str]:
    return {tool.name for capability in capabilities for tool in capability.tools}


# --- every tool capability --------------------------------------------------------------------------


def test_serve_with_every_tool_section(tmp_path: Path, replay_server: ReplayServer, dav_server: DavServer,
                                       dovecot_server: DovecotServer, smtp_server: SmtpSink) -> None:
    dav = {"username": dav_server.username, "password": dav_server.password, "timeout_secs": 20}
    sections = {
        **replay_server.settings_overrides(timeout_secs=20),  # [weather], [web_search], [transit]
        "calendar": {"url": dav_server.calendar_url, **dav},
        "tasks": {"url": dav_server.tasks_url, **dav},
        "contacts": {"url": dav_server.addressbook_url, **dav},
        "email": {"imap_host": dovecot_server.host, "imap_port": dovecot_server.port, "imap_security": "none",
                  "smtp_host": smtp_server.host, "smtp_port": smtp_server.port, "smtp_security": "none",
                  "username": USER, "password": PASSWORD, "from_address": f"{USER}@example.org"},
        "code_execution": {"enabled": True},
        "reminders": {"enabled": True},
    }
    with serve(tmp_path, sections) as server:
        response = server.get("/v1/tools")
        assert response.status_code == 200, response.text
        listed = {tool["name"] for tool in response.json()["tools"]}
        for capability in (weather.CAPABILITY, web_search.CAPABILITY, transit.CAPABILITY, calendar.CAPABILITY,
                           tasks.CAPABILITY, contacts.CAPABILITY, mail.CAPABILITY, mail.DRAFTS_CAPABILITY,
                           code.CAPABILITY, reminders.CAPABILITY):
            missing = tool_names(capability) - listed
            assert not missing, f"[{capability.name}] tools not listed: {missing}; listed {listed}\n{server.log}"


# --- voice with a real broker ----------------------------------------------------------------------


def test_serve_with_voice_and_a_real_broker(tmp_path: Path, mosquitto: Mosquitto) -> None:  # noqa: F811
    with serve(tmp_path, {"voice": {"mqtt": {"host": mosquitto.host, "port": mosquitto.port}}}) as server:
        server.until("the MQTT connection", lambda: server.get("/v1/voice/status").json()["mqtt_connected"])
        status = server.get("/v1/voice/status").json()
        assert status["enabled"] and status["wake_word_available"], status
        room = server.post("/v1/voice/rooms", json={"name": "Kitchen"})
        assert room.status_code == 200, room.text
        assert server.get("/v1/voice/rooms").json() == {"rooms": [room.json()], "total": 1}


# --- messenger, agentic, and voice with a broker that is not there ------------------------------------


def test_serve_with_messenger_agentic_and_an_unreachable_broker(tmp_path: Path) -> None:
    sections = {
        "messenger": {"enabled": True, "verify_token": "smoke-verify", "app_secret": "smoke-secret",
                      "access_token": "smoke-access", "api_base_url": f"http://127.0.0.1:{free_port()}"},
        "agentic": {"enabled": True, "total_timeout_minutes": 2},
        "voice": {"mqtt": {"host": "127.0.0.1", "port": free_port()}},  # nothing listens there
    }
    with serve(tmp_path, sections) as server:
        challenge = httpx.get(f"{server.base_url}/v1/webhooks/messenger", timeout=30, params={
            "hub.mode": "subscribe", "hub.verify_token": "smoke-verify", "hub.challenge": "1158201444"})
        assert (challenge.status_code, challenge.text) == (200, "1158201444")
        refused = httpx.get(f"{server.base_url}/v1/webhooks/messenger", timeout=30, params={
            "hub.mode": "subscribe", "hub.verify_token": "wrong", "hub.challenge": "1"})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN"

        created = server.post("/v1/agentic/tasks", json={"description": "Say hello"})
        assert created.status_code == 201, created.text
        task_id = created.json()["task_id"]
        final = {"completed", "failed", "cancelled", "timed_out"}
        server.until("the agentic task's end", lambda: server.get(f"/v1/agentic/tasks/{task_id}").json()["status"]
                     in final)
        assert server.get(f"/v1/agentic/tasks/{task_id}").json()["status"] == "completed"
        assert [t["task_id"] for t in server.get("/v1/agentic/tasks").json()["tasks"]] == [task_id]

        status = server.get("/v1/voice/status").json()  # the server started; the bus keeps trying
        assert status["enabled"] and not status["mqtt_connected"], status
