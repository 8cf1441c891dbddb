"""The voice-rooms dashboard over real voice services (SQLite rooms, the session manager), in process and
over the real routes (the app's TestClient as the HTTP client's transport): the same rows, and the mute button."""

from __future__ import annotations

import httpx
import panel as pn
import pytest

from assistant.clock import iso
from assistant.services import Services
from dashboards.voice_client import HttpVoiceClient, LocalVoiceClient
from dashboards.voice_rooms import DISABLED, OFFLINE, ONLINE, ROOM_COLUMNS, SESSION_COLUMNS, VoiceRooms


@pytest.fixture
def voice_services(make_settings, make_services, model) -> Services:
    return make_services(make_settings(voice={"rooms": {"default_volume": 80}}), model)


def rows(table: pn.widgets.Tabulator) -> list[dict]:
    return table.value.to_dict("records")


def test_rooms_sessions_and_status(voice_services: Services) -> None:
    voice = voice_services.voice
    kitchen = voice.rooms.create("Kitchen")
    voice.rooms.create("Bedroom")
    voice.rooms.update(kitchen.id, volume=30, muted=True)
    seen = voice.rooms.heartbeat(kitchen.id).last_seen
    session = voice.sessions.start_or_resume_session(kitchen.id, speaker_id="alice")
    voice.sessions.mark_processing(kitchen.id)
    voice.sessions.mark_responding(kitchen.id)
    voice.wake_word_available = True

    view = VoiceRooms(LocalVoiceClient(voice))
    assert list(view.rooms_table.value.columns) == ROOM_COLUMNS
    assert sorted(rows(view.rooms_table), key=lambda r: r["name"]) == [
        {"name": "Bedroom", "online": OFFLINE, "volume": 80, "muted": False, "last_seen": "never"},
        {"name": "Kitchen", "online": ONLINE, "volume": 30, "muted": True, "last_seen": seen},
    ]
    assert list(view.sessions_table.value.columns) == SESSION_COLUMNS
    assert rows(view.sessions_table) == [{"room": "Kitchen", "state": "responding", "speaker": "alice",
                                          "exchanges": 1, "started": iso(session.started_at)}]
    status = view.status.object
    assert "| wake word engine available | yes |" in status
    assert "| speaker identification available | **no** |" in status
    assert "| MQTT connected | **no** |" in status
    assert "| rooms online | 1 |" in status
    assert "| active sessions | 1 |" in status


def test_refresh_shows_changes(voice_services: Services) -> None:
    voice = voice_services.voice
    view = VoiceRooms(LocalVoiceClient(voice))
    assert rows(view.rooms_table) == []
    assert rows(view.sessions_table) == []
    hall = voice.rooms.create("Hall")
    voice.sessions.start_or_resume_session(hall.id)
    view.refresh()
    assert [r["name"] for r in rows(view.rooms_table)] == ["Hall"]
    assert rows(view.sessions_table)[0] | {"started": None} == {"room": "Hall", "state": "listening",
                                                              "speaker": "unknown", "exchanges": 0, "started": None}
    voice.sessions.end_session(hall.id, "test")
    voice.delete_room(hall.id)
    view.refresh()
    assert rows(view.rooms_table) == []
    assert rows(view.sessions_table) == []
    assert "| active sessions | 0 |" in view.status.object


def test_panel_refreshes_periodically(voice_services: Services) -> None:
    view = VoiceRooms(LocalVoiceClient(voice_services.voice), refresh_ms=500)
    layout = view.__panel__()
    assert isinstance(layout, pn.viewable.Viewable)
    assert list(layout.select(pn.widgets.Tabulator)) == [view.rooms_table, view.sessions_table]
    assert view.callback is not None
    assert view.callback.period == 500
    assert view.callback.callback == view.refresh
    view.callback.stop()


def test_disabled_voice(services: Services) -> None:
    assert services.voice is None
    view = VoiceRooms(LocalVoiceClient(services.voice))
    assert view.status.object == DISABLED
    assert rows(view.rooms_table) == []
    view.__panel__()
    assert view.callback is None


def over_http(voice_services: Services, make_client) -> HttpVoiceClient:  # noqa: ANN001
    api = make_client(voice_services)
    key, _ = voice_services.keys.create("dashboard", role="admin")

    def handle(request: httpx.Request) -> httpx.Response:
        answer = api.request(request.method, request.url.path, params=request.url.params, content=request.content,
                             headers=dict(request.headers))
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    return HttpVoiceClient("http://api.test", key, transport=httpx.MockTransport(handle))


def test_over_http_the_same_rows_and_the_mute_button(voice_services: Services, make_client) -> None:  # noqa: ANN001
    voice = voice_services.voice
    kitchen = voice.rooms.create("Kitchen")
    voice.sessions.start_or_resume_session(kitchen.id, speaker_id="alice")
    local, remote = VoiceRooms(LocalVoiceClient(voice)), VoiceRooms(over_http(voice_services, make_client))
    assert rows(remote.rooms_table) == rows(local.rooms_table)
    assert rows(remote.sessions_table) == rows(local.sessions_table)
    assert remote.status.object == local.status.object
    changed = remote.toggle_mute(kitchen.id)
    assert changed is not None and changed["muted"] is True
    assert voice.rooms.get(kitchen.id).muted is True
    assert rows(remote.rooms_table)[0]["muted"] is True and "now muted" in remote.message.object
    remote.toggle_mute(kitchen.id)
    assert voice.rooms.get(kitchen.id).muted is False
    remote.client.close()


def test_over_http_disabled_voice_and_an_unreachable_server(services: Services, make_client) -> None:  # noqa: ANN001
    view = VoiceRooms(over_http(services, make_client))
    assert view.status.object == DISABLED and rows(view.rooms_table) == []

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    gone = VoiceRooms(HttpVoiceClient("http://api.test", "k", transport=httpx.MockTransport(refuse)))
    assert "did not answer" in gone.message.object
