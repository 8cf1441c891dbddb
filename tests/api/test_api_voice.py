"""/v1/voice: rooms, sessions, status; 503 while voice is disabled (except status)."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest

from assistant.voice.messages import ControlAction, ControlMessage

MISSING = "00000000-0000-4000-8000-000000000000"
ROOM_KEYS = {"id", "owner_user_id", "name", "is_online", "volume", "muted", "last_seen", "created_at"}
SESSION_KEYS = {"id", "room_id", "speaker_id", "conversation_id", "state", "follow_up_window_ms", "exchange_count",
                "started_at", "last_activity_at"}


@pytest.fixture
def voice_services(make_settings, make_services, model):
    return make_services(make_settings(voice={"rooms": {"default_volume": 80}}), model)


@pytest.fixture
def vclient(make_client, voice_services):
    return make_client(voice_services)


@pytest.fixture
def vauth(voice_services) -> dict[str, str]:
    key, _ = voice_services.keys.create("voice")
    return {"Authorization": f"Bearer {key}"}


def create(vclient, vauth, name: str = "Kitchen") -> dict:
    response = vclient.post("/v1/voice/rooms", json={"name": name}, headers=vauth)
    assert response.status_code == 200, response.text
    return response.json()


def test_disabled_voice_answers_503_except_status(client, auth) -> None:
    calls = [("get", "/v1/voice/rooms", None), ("post", "/v1/voice/rooms", {"name": "x"}),
             ("get", f"/v1/voice/rooms/{MISSING}", None), ("patch", f"/v1/voice/rooms/{MISSING}", {"volume": 1}),
             ("delete", f"/v1/voice/rooms/{MISSING}", None), ("get", f"/v1/voice/rooms/{MISSING}/session", None)]
    for method, path, body in calls:
        response = client.request(method, path, json=body, headers=auth)
        assert response.status_code == 503, (method, path)
        error = response.json()["error"]
        assert error["code"] == "SERVICE_UNAVAILABLE"
        assert "add a [voice] section" in error["message"]
    status = client.get("/v1/voice/status", headers=auth)
    assert status.status_code == 200
    assert status.json() == {"enabled": False, "wake_word_available": False, "speaker_id_available": False,
                             "mqtt_connected": False, "active_rooms": 0, "active_sessions": 0}


def test_routes_need_a_key(vclient) -> None:
    for path in ("/v1/voice/rooms", "/v1/voice/status"):
        assert vclient.get(path).status_code == 401


def test_create_list_get_delete(vclient, vauth) -> None:
    room = create(vclient, vauth)
    assert set(room) == ROOM_KEYS
    assert (room["name"], room["is_online"], room["volume"], room["muted"], room["last_seen"]) == \
        ("Kitchen", False, 80, False, None)
    other = create(vclient, vauth, "Hall")
    listed = vclient.get("/v1/voice/rooms", headers=vauth).json()
    assert listed == {"rooms": [room, other], "total": 2}
    assert vclient.get(f"/v1/voice/rooms/{room['id']}", headers=vauth).json() == room
    assert vclient.delete(f"/v1/voice/rooms/{room['id']}", headers=vauth).status_code == 204
    assert vclient.get(f"/v1/voice/rooms/{room['id']}", headers=vauth).status_code == 404
    assert vclient.delete(f"/v1/voice/rooms/{room['id']}", headers=vauth).status_code == 404
    assert vclient.get("/v1/voice/rooms", headers=vauth).json()["total"] == 1


def test_rooms_belong_to_the_key_user_that_made_them(vclient, vauth, voice_services) -> None:
    """Another user's room is 404 on every route and missing from its list; an admin key sees and
    changes every room; names are unique per owner."""
    sent: list[ControlMessage] = []
    voice_services.voice.rooms.publisher = type("P", (), {"publish_control": lambda self, m: sent.append(m)})()
    keys = voice_services.keys
    users = {}
    for name in ("alice", "bob"):
        key, principal = keys.create(name, user_id=uuid4())
        users[name] = ({"Authorization": f"Bearer {key}"}, str(principal.user_id))
    (alice, alice_id), (bob, _) = users["alice"], users["bob"]
    room = create(vclient, alice)
    assert room["owner_user_id"] == alice_id
    bobs = create(vclient, bob, "kitchen")  # the same name is no conflict across owners
    path = f"/v1/voice/rooms/{room['id']}"
    for method, url, body in (("get", path, None), ("patch", path, {"volume": 5}), ("delete", path, None),
                              ("get", f"{path}/session", None)):
        response = vclient.request(method, url, json=body, headers=bob)
        assert response.status_code == 404, (method, url)
        assert response.json()["error"]["code"] == "NOT_FOUND" and alice_id not in response.text
    assert sent == []
    assert vclient.get("/v1/voice/rooms", headers=bob).json() == {"rooms": [bobs], "total": 1}
    assert vclient.get("/v1/voice/rooms", headers=alice).json() == {"rooms": [room], "total": 1}
    assert vclient.get("/v1/voice/rooms", headers=vauth).json()["total"] == 0  # the owner's user key: its own
    admin_key, _ = keys.create("admin", role="admin")
    admin = {"Authorization": f"Bearer {admin_key}"}
    assert vclient.get("/v1/voice/rooms", headers=admin).json()["total"] == 2  # the admin sees all
    assert vclient.patch(path, json={"volume": 7}, headers=admin).json()["volume"] == 7
    assert vclient.delete(path, headers=alice).status_code == 204


def test_create_errors(vclient, vauth) -> None:
    create(vclient, vauth)
    assert vclient.post("/v1/voice/rooms", json={"name": "KITCHEN"}, headers=vauth).json()["error"]["code"] == \
        "CONFLICT"
    for body in ({}, {"name": ""}, {"name": 3}, {"name": "x" * 101}, {"name": "a", "extra": 1}):
        response = vclient.post("/v1/voice/rooms", json=body, headers=vauth)
        assert response.status_code == 422, body
        assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert vclient.post("/v1/voice/rooms", content=b"{", headers={**vauth, "Content-Type": "application/json"}
                        ).status_code == 400
    assert vclient.get("/v1/voice/rooms/not-a-uuid", headers=vauth).status_code == 422


def test_patch_volume_and_mute_publishes_control(vclient, vauth, voice_services) -> None:
    sent: list[ControlMessage] = []
    voice_services.voice.rooms.publisher = type("P", (), {"publish_control": lambda self, m: sent.append(m)})()
    room = create(vclient, vauth)
    response = vclient.patch(f"/v1/voice/rooms/{room['id']}", json={"volume": 35}, headers=vauth)
    assert response.status_code == 200 and response.json()["volume"] == 35 and not response.json()["muted"]
    assert vclient.patch(f"/v1/voice/rooms/{room['id']}", json={"muted": True}, headers=vauth).json()["muted"]
    assert [(m.action, m.value) for m in sent] == [(ControlAction.VOLUME, 35), (ControlAction.MUTE, None)]
    for body in ({"volume": 101}, {"volume": -1}, {"muted": "loud"}, {"colour": 1}):
        assert vclient.patch(f"/v1/voice/rooms/{room['id']}", json=body, headers=vauth).status_code == 422, body
    assert vclient.patch(f"/v1/voice/rooms/{MISSING}", json={"volume": 3}, headers=vauth).status_code == 404


def test_session_route(vclient, vauth, voice_services) -> None:
    room = create(vclient, vauth)
    path = f"/v1/voice/rooms/{room['id']}/session"
    response = vclient.get(path, headers=vauth)
    assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
    assert "no active voice session" in response.json()["error"]["message"]
    assert vclient.get(f"/v1/voice/rooms/{MISSING}/session", headers=vauth).status_code == 404
    sessions = voice_services.voice.sessions
    sessions.start_or_resume_session(room["id"], conversation_id="conv-1")
    body = vclient.get(path, headers=vauth).json()
    assert set(body) == SESSION_KEYS
    assert (body["state"], body["room_id"], body["conversation_id"], body["exchange_count"], body["speaker_id"]) == \
        ("listening", room["id"], "conv-1", 0, None)
    for step, state in ((sessions.mark_processing, "processing"), (sessions.mark_responding, "responding"),
                        (sessions.enter_follow_up, "follow_up")):
        step(room["id"])
        assert vclient.get(path, headers=vauth).json()["state"] == state
    status = vclient.get("/v1/voice/status", headers=vauth).json()
    assert status["enabled"] and status["active_sessions"] == 1
    real = sessions.clock
    sessions.clock = lambda: real() + timedelta(milliseconds=10_001)  # the follow-up window has passed
    assert vclient.get(path, headers=vauth).status_code == 404
    assert vclient.get("/v1/voice/status", headers=vauth).json()["active_sessions"] == 0


def test_deleting_a_room_ends_its_session(vclient, vauth, voice_services) -> None:
    room = create(vclient, vauth)
    voice_services.voice.sessions.start_or_resume_session(room["id"])
    assert vclient.delete(f"/v1/voice/rooms/{room['id']}", headers=vauth).status_code == 204
    assert voice_services.voice.sessions.get_active_session(room["id"]) is None


def test_status_counts_online_rooms(vclient, vauth, voice_services) -> None:
    room = create(vclient, vauth)
    create(vclient, vauth, "Hall")
    assert vclient.get("/v1/voice/status", headers=vauth).json() == {
        "enabled": True, "wake_word_available": False, "speaker_id_available": False, "mqtt_connected": False,
        "active_rooms": 0, "active_sessions": 0}
    voice_services.voice.rooms.heartbeat(room["id"])
    assert vclient.get("/v1/voice/status", headers=vauth).json()["active_rooms"] == 1
    assert vclient.get(f"/v1/voice/rooms/{room['id']}", headers=vauth).json()["is_online"]
