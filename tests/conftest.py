"""Shared fixtures of the unit and API tests: settings in a temporary data directory, services with
the scripted model, a TestClient over the app, and API keys.

Everything here uses real storage (SQLite and DuckDB files under ``tmp_path``); the only fake is
:class:`assistant.llm.scripted.ScriptedChatModel`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from assistant.config import Settings, deep_merge
from assistant.llm.scripted import ScriptedChatModel
from assistant.services import Services, build_services

# The scripted model and the hashing embedder are test doubles, refused unless this is set
# (assistant/testing/guard.py); set before anything builds services, inherited by the notebooks
# nbval runs in this process and by the servers the tests start as subprocesses.
os.environ.setdefault("ASSISTANT_TESTING", "1")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``ASSISTANT_*`` variable of the surrounding shell leaks into a test's settings."""
    for name in list(os.environ):
        if name.upper().startswith("ASSISTANT_") and name != "ASSISTANT_TESTING":
            monkeypatch.delenv(name)


@pytest.fixture
def make_settings(tmp_path: Path, clean_env: None) -> Callable[..., Settings]:
    """``make_settings(security={"rate_limit_rpm": 3})``: settings for the scripted backend whose
    data directory is this test's ``tmp_path``; keyword sections are merged over that."""

    def make(**sections: Any) -> Settings:
        base: dict[str, Any] = {
            "server": {"data_dir": str(tmp_path / "data")},
            "inference": {"backend": "scripted"},
            "memory": {"embedding_backend": "hashing"},  # deterministic and instant; MiniLM in integration
            # Every registered tool on every message (the default, stated here so the scripted
            # model's calls always reach the loop whatever the default); the "auto" selection has its
            # own tests (tests/assistant/tools/test_selection.py).
            "tool_calling": {"selection": "all"},
            # The cognitive load's answer format depends on the wall clock (its circadian component):
            # off here so that prompts are the same at any hour; its tests turn it on with a fixed
            # clock (tests/assistant/extended/test_cognitive.py, tests/api/test_api_explain.py).
            "cognitive_load": {"enabled": False},
        }
        return Settings.load(**deep_merge(base, sections))

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def model() -> ScriptedChatModel:
    """The model fake; with nothing enqueued it answers ``You said: <last user message>``."""
    return ScriptedChatModel()


@pytest.fixture
def make_services() -> Iterator[Callable[..., Services]]:
    """``make_services(settings, chat_model)``; every Services built is closed afterwards."""
    built: list[Services] = []

    def make(settings: Settings, chat_model: Any = None) -> Services:
        services = build_services(settings, chat_model=chat_model if chat_model is not None else ScriptedChatModel())
        built.append(services)
        return services

    yield make
    for services in built:
        services.close()


@pytest.fixture
def services(make_services: Callable[..., Services], settings: Settings, model: ScriptedChatModel) -> Services:
    return make_services(settings, model)


@pytest.fixture
def make_client(make_services: Callable[..., Services]) -> Iterator[Callable[[Services], TestClient]]:
    """A TestClient per Services; one event loop per client, as under uvicorn. Clients close
    before their services (this fixture depends on ``make_services``)."""
    clients: list[TestClient] = []

    def make(services: Services) -> TestClient:
        client = TestClient(create_app(services))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[[Services], TestClient], services: Services) -> TestClient:
    return make_client(services)


@pytest.fixture
def api_key(services: Services) -> str:
    key, _ = services.keys.create("test")
    return key


@pytest.fixture
def auth(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


@pytest.fixture
def read_only_auth(services: Services) -> dict[str, str]:
    key, _ = services.keys.create("reader", role="read-only")
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def admin_key(services: Services) -> str:
    """An admin key of the owner (the ``api_key`` fixture is the owner's ``user`` key)."""
    key, _ = services.keys.create("admin", role="admin")
    return key


@pytest.fixture
def admin_auth(admin_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {admin_key}"}


@pytest.fixture
def second_admin_auth(services: Services) -> dict[str, str]:
    """An admin key of another user than the owner: it may decide the owner's approval requests."""
    from uuid import uuid4

    key, _ = services.keys.create("second admin", user_id=uuid4(), role="admin")
    return {"Authorization": f"Bearer {key}"}


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """``[(event, data)]`` of a text/event-stream body; data is decoded JSON when it parses."""
    events: list[tuple[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data_lines = "message", []
        has_data = False
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                has_data = True
                data_lines.append(value)
        if not has_data:
            continue
        raw = "\n".join(data_lines)
        try:
            data: Any = json.loads(raw)
        except json.JSONDecodeError:
            data = raw
        events.append((name, data))
    return events


@pytest.fixture
def sse() -> Callable[[str], list[tuple[str, Any]]]:
    """The Server-Sent Events parser, as a fixture so test modules need not import conftest."""
    return parse_sse
