"""The dream-mode routes (/v1/dream): a whole session through the API, its journal and pages, the state
conflicts (409 naming the state), 404s, X-API-Key, roles, 503 while disabled, bad input as the envelope,
insights, and memory writes counting as activity.

Real storage, the scripted model and the hashing embedder. Journal entries come from a fake step
(:class:`Journaling`) whose operations the test applies (APPLIERS patched): the journal's shape and
filters do not depend on what NREM and REM find; one test runs the configured steps as they are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from api.routes.docs import OPENAPI_URL
from assistant.dream.journal import APPLIERS, Applied
from assistant.dream.service import default_steps
from assistant.dream.session import PhaseContext
from assistant.dream.types import InsightStatus, InsightType, Operation, SessionStatus
from assistant.services import Services

D = "/v1/dream"
OTHER_ID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"
default_steps()  # imports NREM and REM, which register their appliers: a test replaces one after that


class Journaling:
    """A step that journals ``times`` DecayApplied operations per phase; waits on ``gate`` before each."""

    def __init__(self, name: str, times: int = 2, gate: threading.Event | None = None):
        self.name, self.times, self.gate = name, times, gate

    def run(self, ctx: PhaseContext) -> None:
        for n in range(self.times):
            if self.gate is not None:
                self.gate.wait(30)
            ctx.record(Operation.DECAY_APPLIED, f"{self.name}:{ctx.session.id}:{ctx.cycle}:{ctx.phase}:{n}",
                       {"step": self.name, "n": n}, memories=[f"m{n}"], before={"importance": 0.5})


@dataclass
class Dreaming:
    client: TestClient
    services: Services
    auth: dict[str, str]
    user: str
    gate: threading.Event

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        return self.client.request(method, path, json=body, headers=self.auth if headers is None else headers)

    def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        response = self.call(method, path, body)
        assert response.status_code == status, response.text
        return response.json() if response.content else None

    def error(self, method: str, path: str, status: int, body: Any = None, **kw: Any) -> dict:
        response = self.call(method, path, body, **kw)
        assert response.status_code == status, response.text
        return response.json()["error"]

    def steps(self, nrem: list, rem: list) -> None:
        assert self.services.dream is not None
        self.services.dream.nrem_steps, self.services.dream.rem_steps = nrem, rem

    def finish(self) -> dict:
        assert self.services.dream is not None
        self.services.dream.wait(self.user, 60)
        return self.ok("GET", f"{D}/status")["session"]


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []

    def apply(deps, entry) -> Applied:  # noqa: ANN001
        seen.append(entry.id)
        return Applied(after={"importance": 0.45})

    monkeypatch.setitem(APPLIERS, Operation.DECAY_APPLIED, apply)
    return seen


@pytest.fixture
def dreaming(make_settings, make_services, make_client, applied) -> Iterator[Dreaming]:  # noqa: ANN001
    services = make_services(make_settings(dream={"max_cycles": 2, "re_idle_secs": 3600},
                                           security={"rate_limit_enabled": False}))
    assert services.dream is not None
    services.dream.poll_secs = 0.02
    key, principal = services.keys.create("dreamer", user_id=uuid4())
    world = Dreaming(make_client(services), services, {"Authorization": f"Bearer {key}"}, str(principal.user_id),
                     threading.Event())
    world.steps([Journaling("n")], [Journaling("r", times=1)])
    yield world
    world.gate.set()  # never leave a run waiting


# --- a whole session ----------------------------------------------------------------------------------


def test_a_triggered_session_runs_and_its_journal_reads_back(dreaming: Dreaming) -> None:
    w = dreaming
    assert w.ok("GET", f"{D}/status")["session"] is None
    assert w.ok("GET", f"{D}/sessions") == {"sessions": [], "total": 0, "limit": 20, "offset": 0}
    started = w.ok("POST", f"{D}/trigger", status=202)
    assert (started["status"], started["phase"], started["current_cycle"], started["total_cycles"]) == (
        "running", "nrem", 1, 2)
    assert started["user_id"] == w.user and started["trigger"] == "manual"
    final = w.finish()
    assert final["id"] == started["id"] and final["status"] == "completed" and final["completed_at"]
    assert final["counts"] == {"DecayApplied": 6}  # 2 cycles x (2 NREM + 1 REM)
    assert w.ok("GET", f"{D}/sessions/{started['id']}") == final

    page = w.ok("GET", f"{D}/sessions/{started['id']}/journal")
    assert page["total"] == 6 and len(page["entries"]) == 6
    assert [(e["cycle_number"], e["phase"]) for e in page["entries"]] == [
        (1, "NREM"), (1, "NREM"), (1, "REM"), (2, "NREM"), (2, "NREM"), (2, "REM")]
    first = page["entries"][0]
    assert first["operation"] == "DecayApplied" and first["status"] == "applied"
    assert first["affected_memory_ids"] == ["m0"] and first["details"]["step"] == "n"
    assert first["before_snapshot"] == {"importance": 0.5} and first["after_snapshot"] == {"importance": 0.45}
    assert [e["seq"] for e in page["entries"]] == sorted(e["seq"] for e in page["entries"])


def journal(w: Dreaming, session_id: str, query: str) -> dict:
    return w.ok("GET", f"{D}/sessions/{session_id}/journal?{query}")


def test_journal_filters_and_pages(dreaming: Dreaming) -> None:
    w = dreaming
    session_id = w.ok("POST", f"{D}/trigger", status=202)["id"]
    w.finish()
    for phase in ("NREM", "nrem", "Nrem"):
        found = journal(w, session_id, f"phase={phase}")
        assert found["total"] == 4 and {e["phase"] for e in found["entries"]} == {"NREM"}
    assert journal(w, session_id, "phase=rem&cycle=2")["total"] == 1
    assert journal(w, session_id, "cycle=1")["total"] == 3
    assert journal(w, session_id, "cycle=3")["total"] == 0
    assert journal(w, session_id, "operation=decayapplied&status=APPLIED")["total"] == 6
    assert journal(w, session_id, "operation=MemoryConsolidated")["total"] == 0
    assert journal(w, session_id, "status=failed")["total"] == 0
    bare = journal(w, session_id, "snapshots=false")["entries"]
    assert all(e["before_snapshot"] is None and e["after_snapshot"] is None for e in bare)
    everything = journal(w, session_id, "limit=100")["entries"]
    pages = [journal(w, session_id, f"limit=4&offset={offset}") for offset in (0, 4, 8)]
    assert [len(p["entries"]) for p in pages] == [4, 2, 0] and {p["total"] for p in pages} == {6}
    assert [e["id"] for p in pages for e in p["entries"]] == [e["id"] for e in everything]


def test_sessions_page_newest_first_with_the_total(dreaming: Dreaming) -> None:
    w = dreaming
    w.steps([], [])
    ids = []
    for _ in range(3):
        ids.append(w.ok("POST", f"{D}/trigger", {}, status=202)["id"])
        w.finish()
    listed = w.ok("GET", f"{D}/sessions?limit=2")
    assert listed["total"] == 3 and [s["id"] for s in listed["sessions"]] == ids[::-1][:2]
    rest = w.ok("GET", f"{D}/sessions?limit=2&offset=2")
    assert rest["total"] == 3 and [s["id"] for s in rest["sessions"]] == [ids[0]]
    assert w.ok("GET", f"{D}/status")["session"]["id"] == ids[-1]


def test_the_configured_steps_run_over_memories_written_through_the_api(make_settings, make_services,
                                                                        make_client) -> None:  # noqa: ANN001
    """Whatever NREM and REM do today: the session completes, and its counts agree with its journal."""
    services = make_services(make_settings(dream={"max_cycles": 2}, security={"rate_limit_enabled": False}))
    key, principal = services.keys.create("night", user_id=uuid4())
    client, auth = make_client(services), {"X-API-Key": key}
    for text in ("I run every Sunday morning.", "I run every Sunday morning!", "My sister Anna lives in Porto.",
                 "Anna works at the harbour in Porto.", "I prefer tea to coffee."):
        assert client.post("/v1/memories", json={"content": text, "summary": text}, headers=auth).status_code == 201
    started = client.post(f"{D}/trigger", json={"user_id": str(principal.user_id)}, headers=auth)
    assert started.status_code == 202, started.text
    assert services.dream is not None
    services.dream.wait(str(principal.user_id), 120)
    session = client.get(f"{D}/sessions/{started.json()['id']}", headers=auth).json()
    assert session["status"] == "completed", session
    entries = client.get(f"{D}/sessions/{session['id']}/journal?status=applied&limit=1000", headers=auth).json()
    assert entries["total"] == len(entries["entries"])
    assert {e["operation"] for e in entries["entries"]} <= set(session["counts"])


# --- states: 409 naming the state ---------------------------------------------------------------------


def test_conflicts_name_the_state(dreaming: Dreaming) -> None:
    w = dreaming
    w.steps([Journaling("n", times=3, gate=w.gate)], [])
    error = w.error("POST", f"{D}/pause", 409)
    assert error["code"] == "CONFLICT" and "none" in error["message"] and error["details"]["status"] == "none"
    session_id = w.ok("POST", f"{D}/trigger", status=202)["id"]

    error = w.error("POST", f"{D}/trigger", 409)
    assert "already running" in error["message"] and error["details"] == {"session_id": session_id,
                                                                          "status": "running"}
    error = w.error("POST", f"{D}/resume", 409)
    assert "running" in error["message"] and error["details"]["status"] == "running"

    paused = w.ok("POST", f"{D}/pause")
    assert (paused["status"], paused["paused_reason"]) == ("paused", "requested")
    w.gate.set()  # the operation under way finishes; the run then waits for a resume
    error = w.error("POST", f"{D}/pause", 409, {})
    assert "paused" in error["message"] and error["details"]["status"] == "paused"
    assert "already paused" in w.error("POST", f"{D}/trigger", 409)["message"]
    assert w.ok("GET", f"{D}/status")["session"]["status"] == "paused"

    resumed = w.ok("POST", f"{D}/resume", {})
    assert resumed["status"] == "running" and resumed["paused_reason"] is None
    final = w.finish()
    assert final["status"] == "completed"
    for action in ("pause", "resume", "cancel"):
        error = w.error("POST", f"{D}/{action}", 409)
        assert error["details"]["status"] == "completed" and "completed" in error["message"], action


def test_cancel_fails_a_running_or_paused_session(dreaming: Dreaming) -> None:
    w = dreaming
    w.steps([Journaling("n", times=50, gate=w.gate)], [])
    w.ok("POST", f"{D}/trigger", status=202)
    w.ok("POST", f"{D}/pause")
    w.gate.set()
    cancelled = w.ok("POST", f"{D}/cancel")
    assert cancelled["status"] == "failed" and "cancelled" in cancelled["reason"] and cancelled["completed_at"]
    assert w.ok("GET", f"{D}/status")["session"]["status"] == "failed"
    assert w.error("POST", f"{D}/cancel", 409)["details"]["status"] == "failed"
    # what was applied before the cancel stays journaled
    entries = w.ok("GET", f"{D}/sessions/{cancelled['id']}/journal?limit=1000")
    assert entries["total"] == cancelled["counts"].get("DecayApplied", 0) < 50


# --- activity -----------------------------------------------------------------------------------------


def test_memory_writes_count_as_activity_and_pause_a_running_dream(dreaming: Dreaming) -> None:
    w = dreaming
    assert w.services.dream is not None
    w.ok("GET", "/v1/memories")
    w.ok("GET", "/v1/memories/search?q=tea")
    assert w.ok("GET", f"{D}/status")["idle_seconds"] is None  # never active: reading is not activity
    w.steps([Journaling("n", times=3, gate=w.gate)], [])
    w.ok("POST", f"{D}/trigger", status=202)
    memory = w.ok("POST", "/v1/memories", {"content": "I moved to Porto.", "summary": "moved"}, status=201)
    w.gate.set()
    deadline = time.monotonic() + 30  # a bound against hangs, not a timing assertion
    while w.ok("GET", f"{D}/status")["session"]["status"] != "paused" and time.monotonic() < deadline:
        time.sleep(0.02)
    status = w.ok("GET", f"{D}/status")
    assert status["session"]["status"] == "paused" and status["session"]["paused_reason"] == "user_returned"
    assert status["idle_seconds"] is not None and status["idle_seconds"] < status["idle_threshold_secs"]
    before = w.services.dream.activity.last_active(w.user)
    time.sleep(0.01)
    assert w.call("DELETE", f"/v1/memories/{memory['id']}").status_code == 204
    assert w.services.dream.activity.last_active(w.user) > before
    w.ok("POST", f"{D}/cancel")


# --- 404, keys, roles, 503 ----------------------------------------------------------------------------


def test_unknown_sessions_insights_and_users_are_404(dreaming: Dreaming) -> None:
    w = dreaming
    for method, path, body in (("GET", f"{D}/sessions/{OTHER_ID}", None),
                               ("GET", f"{D}/sessions/{OTHER_ID}/journal", None),
                               ("GET", f"{D}/insights/{OTHER_ID}", None),
                               ("PUT", f"{D}/insights/{OTHER_ID}", {"title": "x"}),
                               ("POST", f"{D}/insights/{OTHER_ID}/confirm", None),
                               ("POST", f"{D}/insights/{OTHER_ID}/dismiss", {}),
                               ("POST", f"{D}/insights/{OTHER_ID}/merge", None)):
        error = w.error(method, path, 404, body)
        assert error["code"] == "NOT_FOUND", (method, path)
    unknown = w.error("POST", f"{D}/trigger", 404, {"user_id": OTHER_ID})
    other = w.services.keys.create("other", user_id=uuid4())[1]
    another = w.error("POST", f"{D}/trigger", 404, {"user_id": str(other.user_id)})
    assert unknown["message"] == another["message"] and str(other.user_id) not in another["message"]
    assert w.ok("GET", f"{D}/sessions")["total"] == 0  # nothing started
    mine = w.ok("POST", f"{D}/trigger", {"user_id": w.user.upper()}, status=202)  # the key's own, any case
    assert mine["user_id"] == w.user


def test_x_api_key_and_roles(dreaming: Dreaming) -> None:
    w = dreaming
    key, _ = w.services.keys.create("x", user_id=uuid4())
    reader, _ = w.services.keys.create("reader", role="read-only", user_id=uuid4())
    assert w.call("GET", f"{D}/status", headers={"X-API-Key": key}).status_code == 200
    started = w.call("POST", f"{D}/trigger", headers={"X-API-Key": key})
    assert started.status_code == 202, started.text
    assert w.call("GET", f"{D}/sessions/{started.json()['id']}", headers={"X-API-Key": key}).status_code == 200
    assert w.call("GET", f"{D}/config", headers={"X-API-Key": reader}).status_code == 200
    assert w.call("GET", f"{D}/insights", headers={"Authorization": f"Bearer {reader}"}).status_code == 200
    for method, path in (("POST", f"{D}/trigger"), ("POST", f"{D}/pause"), ("PUT", f"{D}/insights/{OTHER_ID}")):
        assert w.error(method, path, 403, {}, headers={"X-API-Key": reader})["code"] == "FORBIDDEN"
    for headers in ({}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer wrong", "X-API-Key": key}):
        assert w.error("GET", f"{D}/status", 401, headers=headers)["code"] == "UNAUTHORIZED"
    assert "X-API-Key" in w.error("GET", f"{D}/status", 401, headers={})["message"]


def dream_operations(client: TestClient) -> list[tuple[str, str]]:
    document = client.get(OPENAPI_URL).json()
    return [(method.upper(), path.replace("{session_id}", OTHER_ID).replace("{insight_id}", OTHER_ID))
            for path, ops in document["paths"].items() if path.startswith(D) for method in ops]


def test_every_route_is_503_naming_the_key_while_disabled(make_settings, make_services,
                                                          make_client) -> None:  # noqa: ANN001
    services = make_services(make_settings(dream={"enabled": False}))
    assert services.dream is None and services.metrics.dream is None
    client = make_client(services)
    key, _ = services.keys.create("k")
    operations = dream_operations(client)
    assert len(operations) == 15
    for method, path in operations:
        response = client.request(method, f"{path}?phase=bogus&limit=0", json={"x": 1}, headers={"X-API-Key": key})
        assert response.status_code == 503, (method, path, response.text)
        error = response.json()["error"]
        assert error["code"] == "SERVICE_UNAVAILABLE" and "dream.enabled" in error["message"]
    assert "assistant_dream_" not in client.get("/metrics/prometheus").text


def test_the_config_is_the_dream_section(dreaming: Dreaming) -> None:
    config = dreaming.ok("GET", f"{D}/config")
    settings = dreaming.services.settings.dream
    assert config == settings.model_dump(mode="json")
    assert config["max_cycles"] == 2 and config["nrem"]["merge_threshold"] == 0.85 and len(config["schedule"].split()) == 6


# --- bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "field", "says"), [
    ("phase=deep", "phase", "NREM, REM"),
    ("operation=MemoryEaten", "operation", "MemoryConsolidated"),
    ("status=done", "status", "applied"),
    ("cycle=0", "cycle", "greater than or equal to 1"),
    ("cycle=x", "cycle", "integer"),
    ("limit=0", "limit", "greater than or equal to 1"),
    ("limit=1001", "limit", "less than or equal to 1000"),
    ("offset=-1", "offset", "greater than or equal to 0"),
    ("snapshots=maybe", "snapshots", "boolean"),
])
def test_bad_journal_queries_are_422_naming_the_field(dreaming: Dreaming, query: str, field: str, says: str) -> None:
    session_id = dreaming.ok("POST", f"{D}/trigger", status=202)["id"]
    dreaming.finish()
    error = dreaming.error("GET", f"{D}/sessions/{session_id}/journal?{query}", 422)
    assert error["code"] == "VALIDATION_ERROR" and error["details"]["fields"][0]["field"] == field
    assert says in error["message"], error


@pytest.mark.parametrize(("method", "path", "body", "status", "says"), [
    ("GET", f"{D}/insights?type=insightful", None, 422, "pattern, connection, suggestion, hypothesis"),
    ("GET", f"{D}/insights?status=gone", None, 422, "active, confirmed, dismissed, expired"),
    ("GET", f"{D}/insights?limit=-1", None, 422, "limit"),
    ("GET", f"{D}/sessions?limit=201", None, 422, "less than or equal to 200"),
    ("GET", f"{D}/sessions?offset=1000000001", None, 422, "offset"),
    ("GET", f"{D}/sessions/not-a-uuid", None, 422, "session_id"),
    ("GET", f"{D}/insights/42", None, 422, "insight_id"),
    ("POST", f"{D}/trigger", {"user_id": "me"}, 422, "user_id"),
    ("POST", f"{D}/trigger", {"user_id": None}, 422, "omit the field"),
    ("POST", f"{D}/trigger", {"user": "x"}, 422, "user"),
    ("POST", f"{D}/trigger", [1], 400, "JSON object"),
    ("POST", f"{D}/pause", {"now": True}, 422, "now"),
    ("PUT", f"{D}/insights/{OTHER_ID}", {}, 422, "nothing to update"),
    ("PUT", f"{D}/insights/{OTHER_ID}", {"title": "  "}, 422, "blank"),
    ("PUT", f"{D}/insights/{OTHER_ID}", {"title": "a\nb"}, 422, "one line"),
    ("PUT", f"{D}/insights/{OTHER_ID}", {"title": None}, 422, "omit the field"),
    ("PUT", f"{D}/insights/{OTHER_ID}", {"status": "archived"}, 422, "active, confirmed, dismissed, expired"),
    ("PUT", f"{D}/insights/{OTHER_ID}", {"confidence": 1}, 422, "confidence"),
])
def test_bad_input_is_the_envelope_with_a_precise_message(dreaming: Dreaming, method: str, path: str, body: Any,
                                                          status: int, says: str) -> None:
    error = dreaming.error(method, path, status, body)
    assert error["request_id"] and says in error["message"], error
    response = dreaming.client.post(f"{D}/trigger", content=b'{"user_id": ',
                                    headers={**dreaming.auth, "Content-Type": "application/json"})
    assert response.status_code == 400 and "malformed JSON" in response.json()["error"]["message"]
    assert dreaming.ok("GET", f"{D}/sessions")["total"] == 0  # nothing started


# --- insights -----------------------------------------------------------------------------------------


def add_insight(w: Dreaming, kind: InsightType = InsightType.HYPOTHESIS, confidence: float = 0.95,
                user: str | None = None, n: int = 0) -> str:
    assert w.services.dream is not None
    insight, _ = w.services.dream.store.add_insight(user or w.user, kind, f"Sunday runs {n}",
                                                    f"You run on Sunday mornings ({n}).", confidence, [],
                                                    f"test:{kind}:{n}:{user}")
    return insight.id


def test_insights_list_filters_and_pages(dreaming: Dreaming) -> None:
    w = dreaming
    ids = [add_insight(w, kind, n=n) for n, kind in enumerate(
        [InsightType.PATTERN, InsightType.HYPOTHESIS, InsightType.HYPOTHESIS, InsightType.SUGGESTION])]
    add_insight(w, user=str(uuid4()))  # another user's: never listed or counted
    assert w.services.dream is not None
    w.services.dream.store.update_insight(w.services.dream.store.insight(w.user, ids[2]),
                                          status=InsightStatus.DISMISSED)
    everything = w.ok("GET", f"{D}/insights")
    assert everything["total"] == 4 and [i["id"] for i in everything["insights"]] == ids[::-1]
    assert w.ok("GET", f"{D}/insights?type=Hypothesis")["total"] == 2
    assert [i["id"] for i in w.ok("GET", f"{D}/insights?type=HYPOTHESIS&status=active")["insights"]] == [ids[1]]
    assert w.ok("GET", f"{D}/insights?status=dismissed")["insights"][0]["status"] == "dismissed"
    page = w.ok("GET", f"{D}/insights?limit=3&offset=3")
    assert page["total"] == 4 and [i["id"] for i in page["insights"]] == [ids[0]]
    one = w.ok("GET", f"{D}/insights/{ids[0]}")
    assert one["insight_type"] == "pattern" and one["title"] == "Sunday runs 0" and one["evidence_count"] == 0
    assert set(one) >= {"id", "insight_type", "title", "content", "confidence", "status", "evidence_count",
                        "source_memory_ids", "created_at"}


class FakeInsights:
    """Records what the routes ask of the insight service; answers from the real store."""

    ACTIONS = ("update", "confirm", "dismiss", "merge")

    def __init__(self, real: Any):
        self.real, self.calls = real, []

    def __getattr__(self, name: str) -> Any:
        if name not in self.ACTIONS:
            return getattr(self.real, name)

        def act(user: str, insight_id: str, *extra: Any) -> Any:
            self.calls.append((name, user, insight_id, *extra))
            return self.real.get(user, insight_id)

        return act


def test_insight_actions_reach_the_service_for_the_owner_only(dreaming: Dreaming) -> None:
    w = dreaming
    assert w.services.dream is not None
    fake = FakeInsights(w.services.dream.insights)
    w.services.dream.insights = fake
    mine, theirs = add_insight(w), add_insight(w, user=str(uuid4()), n=1)
    w.ok("PUT", f"{D}/insights/{mine}", {"title": " New title ", "status": "Dismissed"})
    w.ok("POST", f"{D}/insights/{mine}/confirm")
    w.ok("POST", f"{D}/insights/{mine}/dismiss", {})
    w.ok("POST", f"{D}/insights/{mine}/merge")
    assert fake.calls == [("update", w.user, mine, {"title": "New title", "status": InsightStatus.DISMISSED}),
                          ("confirm", w.user, mine), ("dismiss", w.user, mine), ("merge", w.user, mine)]
    for method, action in (("PUT", ""), ("POST", "/confirm"), ("POST", "/dismiss"), ("POST", "/merge")):
        w.error(method, f"{D}/insights/{theirs}{action}", 404, {"title": "x"} if method == "PUT" else None)
    assert len(fake.calls) == 4  # another user's insight never reached the service


def test_insight_lifecycle_through_the_api(dreaming: Dreaming) -> None:
    """With the real insight service: update, confirm (merged into memory), dismiss, 409 naming the state."""
    w = dreaming
    hypothesis, pattern, other = add_insight(w), add_insight(w, InsightType.PATTERN, n=1), add_insight(w, n=2)
    updated = w.ok("PUT", f"{D}/insights/{pattern}", {"title": "Weekly runs", "content": "You run every Sunday."})
    assert (updated["title"], updated["content"], updated["status"]) == ("Weekly runs", "You run every Sunday.",
                                                                         "active")
    confirmed = w.ok("POST", f"{D}/insights/{hypothesis}/confirm")
    assert confirmed["status"] == "confirmed" and confirmed["memory_id"]
    memory = w.ok("GET", f"/v1/memories/{confirmed['memory_id']}")
    assert memory["memory_type"] == "DreamInsight"
    dismissed = w.ok("POST", f"{D}/insights/{other}/dismiss")
    assert dismissed["status"] == "dismissed"
    error = w.error("POST", f"{D}/insights/{other}/confirm", 409)
    assert error["code"] == "CONFLICT" and "dismissed" in error["message"]
    error = w.error("PUT", f"{D}/insights/{hypothesis}", 409, {"status": "active"})
    assert "confirmed" in error["message"]
    merged = w.ok("POST", f"{D}/insights/{pattern}/merge")
    assert merged["memory_id"] and w.ok("POST", f"{D}/insights/{pattern}/merge")["memory_id"] == merged["memory_id"]


def test_the_trigger_of_one_user_leaves_another_users_session_alone(dreaming: Dreaming) -> None:
    w = dreaming
    w.steps([Journaling("n", times=3, gate=w.gate)], [])
    w.ok("POST", f"{D}/trigger", status=202)
    other, principal = w.services.keys.create("other", user_id=uuid4())
    w.steps([], [])
    response = w.call("POST", f"{D}/trigger", headers={"X-API-Key": other})
    assert response.status_code == 202 and response.json()["user_id"] == str(principal.user_id)
    assert w.services.dream is not None
    assert w.services.dream.wait(str(principal.user_id), 60).status is SessionStatus.COMPLETED
    assert w.call("POST", f"{D}/pause", headers={"X-API-Key": other}).status_code == 409  # theirs is over
    assert w.ok("GET", f"{D}/status")["session"]["status"] == "running"
    w.gate.set()
    assert w.finish()["status"] == "completed"

