"""User B never reaches user A's resources: one table over every route that addresses a user resource.

Three keys: an admin key, and two user keys A and B (each its own user id). For every row, A (or the
admin, for catalog entries) creates the resource the row names; then the row's caller sends the row's
request with A's id. The owner rules (docs/security.md) say what must come back:

- user resources (memories, conversations, snippets, agentic tasks, agent profiles, voice rooms, speaker
  profiles, tool runs, knowledge-graph nodes, dream sessions and insights, quarantined memories, sanitation
  results and defence patterns, privacy-budget charges, precache predictions, red-team runs and reports, training feedback, runs and adapters,
  distillation runs, catalog
  executions and approvals):
  B gets 404 `NOT_FOUND`, B's lists and searches
  never hold A's item, and no answer to B carries A's text or user id;
- catalog entries are shared: everyone lists and executes them, only an admin creates or deletes them
  (B gets 403 `FORBIDDEN`); deciding an approval and reading the catalog's audit log (every user's runs)
  need an admin key too (403);
- an admin key sees every user's executions, approvals and rooms;
- dream mode acts on the key's own user only: B's pause, resume and cancel find no session of B's (409,
  A's untouched), and a trigger naming A's user id is 404, for B and for the admin alike.

After each row A's resource is checked to be unchanged. Every resource is made with a marker text so a
leak of its content shows up in any answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

import numpy as np
import pytest
from fastapi.testclient import TestClient

from assistant.dream.types import InsightType
from assistant.services import Services
from assistant.testing.graph import ScriptedExtractor
from assistant.voice.audio import float_to_pcm
from assistant.voice.speakers import SpeakerRegistry, SpeakerStore

MARK = "alpha-private-7f3a"  # in every resource A creates; never in an answer to B
RAW = {"Content-Type": "application/octet-stream"}
CATALOG = "/v1/commands/catalog"
K = "/api/v1/knowledge"


class FakeSpeakerEmbedder:
    """A unit vector derived from the sample's bytes (no model)."""

    dim = 256

    def embed(self, pcm: bytes) -> np.ndarray:
        vector = np.random.default_rng(len(pcm) + pcm[0]).normal(size=self.dim).astype(np.float32)
        return vector / np.linalg.norm(vector)


def speech(seed: int) -> bytes:
    return float_to_pcm(np.random.default_rng(seed).normal(0.0, 0.1, 24_000))  # 1.5 s: enrolment needs 1 s of speech


@dataclass
class World:
    client: TestClient
    services: Services
    keys: dict[str, dict[str, str]]  # "admin", "a", "b" -> headers
    a_user: str

    def call(self, who: str, method: str, path: str, body: Any = None) -> Any:
        if isinstance(body, bytes):
            return self.client.request(method, path, content=body, headers={**self.keys[who], **RAW})
        return self.client.request(method, path, json=body, headers=self.keys[who])

    def ok(self, who: str, method: str, path: str, body: Any = None) -> dict:
        response = self.call(who, method, path, body)
        assert response.status_code in (200, 201, 202), response.text
        return response.json()

    def wait(self, who: str, path: str, done: Callable[[dict], bool]) -> dict:
        deadline = time.monotonic() + 60  # a bound against hangs, not a timing assertion
        while True:
            found = self.ok(who, "GET", path)
            if done(found) or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def entry(self, who: str = "admin", **fields: Any) -> str:
        body = {"name": f"Echo {uuid4().hex[:8]}", "description": MARK, "command": f"echo {MARK}",
                "category": "system", "risk_level": "low", "os": "any", **fields}
        return self.ok(who, "POST", CATALOG, body)["id"]


# --- what A makes, and how A checks it is unchanged -----------------------------------------------


def make_memory(w: World) -> str:
    return w.ok("a", "POST", "/v1/memories", {"content": f"My locker code is {MARK}", "summary": MARK})["id"]


def make_conversation(w: World) -> str:
    return w.ok("a", "POST", "/v1/chat", {"message": f"Remember {MARK}"})["conversation_id"]


def make_snippet(w: World) -> str:
    return w.ok("a", "POST", "/v1/snippets", {"title": f"Note {MARK}", "content": MARK})["id"]


def make_profile(w: World) -> str:
    return w.ok("a", "POST", "/v1/agent-profiles", {"name": "alphabot", "role": MARK})["id"]


def make_task(w: World) -> str:
    task_id = w.ok("a", "POST", "/v1/agentic/tasks", {"description": f"Plan {MARK}", "require_approval": True}
                   )["task_id"]
    task = w.wait("a", f"/v1/agentic/tasks/{task_id}", lambda t: t["status"] == "awaiting_approval")
    assert task["status"] == "awaiting_approval", task
    return task_id


def make_room(w: World) -> str:
    return w.ok("a", "POST", "/v1/voice/rooms", {"name": f"Study {MARK}"})["id"]


def make_speaker(w: World) -> str:
    return w.ok("a", "POST", f"/v1/voice/speakers/enroll?name=Alpha-{MARK}", speech(1))["id"]


def make_tool_run(w: World) -> str:
    w.services.chat_model.enqueue(tool_calls=[("store_memory", {"content": f"Sister {MARK}", "memory_type": "fact"})])
    w.services.chat_model.enqueue("Noted.")
    reply = w.ok("a", "POST", "/v1/chat", {"message": "My sister is called Anna"})
    assert [r["tool"] for r in reply["tool_runs"]] == ["store_memory"]
    return reply["conversation_id"]


def make_catalog_entry(w: World) -> str:
    return w.entry("admin")


def make_execution(w: World) -> str:
    return w.ok("a", "POST", f"{CATALOG}/{w.entry()}/execute")["execution_id"]


def make_approval(w: World) -> str:
    return w.ok("a", "POST", f"{CATALOG}/{w.entry(requires_approval=True)}/execute")["approval_id"]


NODE = "Quixotia"  # a capitalised word: a node of A's knowledge graph


def make_node(w: World) -> str:
    assert w.services.graph is not None
    w.services.graph.extractor = ScriptedExtractor()  # whatever the configured one: capitalised words are nodes
    w.ok("a", "POST", "/v1/memories", {"content": f"{NODE} harbour {MARK}", "summary": MARK})
    assert w.services.graph.wait_idle()
    return next(n["id"] for n in w.ok("a", "GET", f"{K}/graph")["nodes"] if n["name"] == NODE)


D = "/v1/dream"


def make_dream_session(w: World) -> str:
    session = w.ok("a", "POST", f"{D}/trigger")
    assert w.services.dream is not None
    assert w.services.dream.wait(w.a_user, 60).status.value == "completed"
    return session["id"]


def make_insight(w: World) -> str:
    assert w.services.dream is not None
    insight, _ = w.services.dream.store.add_insight(w.a_user, InsightType.HYPOTHESIS, f"Title {MARK}",
                                                    f"You like {MARK}", 0.9, [], f"cross-user:{MARK}")
    return insight.id


def make_dream_user(w: World) -> str:
    """A's user id (A has no dream yet): the ``user_id`` another key names in a trigger."""
    return w.a_user


SAN = "/v1/sanitation"


def make_quarantined(w: World) -> str:
    """A memory of A's that sanitation set aside (as a run quarantines it)."""
    ident = make_memory(w)
    w.services.memory.quarantine(w.a_user, ident, f"stale: {MARK}")
    return ident


def make_pattern(w: World) -> str:
    assert w.services.sanitation is not None
    pattern = w.services.sanitation.store.add_pattern(w.a_user, f"{MARK} (now|please)", source="dev_corpus")
    assert pattern is not None
    return pattern.id


def make_sanitation_session(w: World) -> str:
    """A dream session of A's with a sanitation result (stored as a dream cycle's run stores it)."""
    from assistant.sanitation.types import SanitationResult

    assert w.services.sanitation is not None
    session, now = str(uuid4()), time.time()
    w.services.db.execute("INSERT INTO dream_sessions (id, user_id, status, total_cycles, created_ts, updated_ts) "
                          "VALUES (?, ?, 'completed', 1, ?, ?)", (session, w.a_user, now, now))
    w.services.sanitation.store.save_result(SanitationResult(
        id=str(uuid4()), user_id=w.a_user, session_id=session, cycle=1, trigger="dream", status="completed",
        started_at="2026-01-01T00:00:00Z", quarantined=[{"memory_id": "m", "verdict": "stale", "reason": MARK,
                                                         "by": "temporal", "winner_id": None}]))
    return session


PRIVACY = "/api/v1/privacy"


def make_privacy_charge(w: World) -> str:
    """A charge to A's privacy budget (an aggregate query over A's memories): its ledger entry's id."""
    make_memory(w)
    return w.ok("a", "GET", f"{PRIVACY}/memory-stats?epsilon=0.1")["charge"]["id"]


EXPLAIN = "/api/chat/{id}/explain"


def make_answer(w: World) -> str:
    """An answer to A (its explanation recorded): its message id."""
    return w.ok("a", "POST", "/v1/chat", {"message": f"Remember {MARK}"})["id"]


PRE = "/api/v1/precache"


def make_precache(w: World) -> str:
    """A query A asks at this time of day on 8 of 10 days, precached for A: its prediction's id."""
    from datetime import UTC, datetime

    from tests.assistant.extended.precache_support import FakeThermal, seed_days

    assert w.services.precache is not None
    w.services.precache.thermal = FakeThermal(40.0)
    seed_days(w.services, w.a_user, f"Where is my {MARK} parcel?", 8, datetime.now(UTC), hour=None)
    (predicted,) = w.ok("a", "POST", f"{PRE}/refresh")["predictions"]
    return predicted["id"]


RT = "/api/red-team"
DIST = "/api/distillation"


def make_distillation_run(w: World) -> str:
    """A distillation run of A's (a fake teacher; its fake training run ends active): its id."""
    from assistant.config.extended import LoraSettings
    from assistant.learning.types import RunState
    from tests.assistant.learning.distill_fakes import FakeTeacher, FakeTraining

    distil, training = w.services.distillation, FakeTraining()
    distil.teachers, distil.training, distil.poll_secs = (lambda user_id: FakeTeacher()), training, 0.01
    distil.lora = LoraSettings(enabled=True, min_samples=3)
    run_id = w.ok("a", "POST", f"{DIST}/start", {"prompts": [f"{MARK} question {i}" for i in range(3)]})["run_id"]
    w.wait("a", f"{DIST}/status", lambda s: s["phase"] == "training")
    training.finish(RunState.ACTIVE)
    assert w.wait("a", f"{DIST}/status", lambda s: s["phase"] == "active")["run_id"] == run_id
    return run_id


TRAIN = "/api/training"


def make_training_answer(w: World) -> str:
    """An answer of A's that A rated -1 with a preferred answer: the answer's message id."""
    message = w.ok("a", "POST", "/v1/chat", {"message": f"Where is {MARK}?"})["id"]
    w.ok("a", "POST", f"{TRAIN}/feedback", {"message_id": message, "rating": -1, "preferred_answer": MARK})
    return message


def make_training_run(w: World) -> str:
    """A training run of A's on A's feedback (fake trainer, scorer and converter), ended active: its id."""
    from tests.assistant.learning.training_support import base_file, use_fakes

    assert w.services.training is not None
    use_fakes(w.services)
    w.services.training.base_model = base_file(w.services.data_dir)
    for _ in range(w.services.settings.lora.min_samples):
        make_training_answer(w)
    run_id = w.ok("a", "POST", f"{TRAIN}/start")["id"]
    assert w.wait("a", f"{TRAIN}/runs/{run_id}", lambda r: r["finished_at"] is not None)["state"] == "active"
    return run_id


OPT = "/api/optimization"


def make_optimization_run(w: World) -> str:
    """A cold-start optimisation run of A's (a small LoCoMo-shaped file), finished: its id."""
    from tests.assistant.learning.test_optimize import locomo_file

    optimizer = w.services.optimization
    assert optimizer is not None
    optimizer.settings = optimizer.settings.model_copy(
        update={"dataset_path": locomo_file(w.services.settings.data_dir), "max_iterations": 3})
    run_id = w.ok("a", "POST", f"{OPT}/run", {})["id"]
    assert w.wait("a", f"{OPT}/status", lambda s: s["state"] != "running")["state"] == "completed"
    return run_id


FED = "/api/v1/federated"


def make_federated_round(w: World) -> str:
    """A federated round of A's with A's peer (named with the marker), which could not be reached: its id."""
    from assistant.learning.federated import KnownPeer
    from assistant.learning.federated_identity import load_identity
    from assistant.learning.federated_transport import PeerUnreachable
    from assistant.testing.federated import StaticAdapters, write_peft_adapter

    class Unreachable:
        def exchange(self, *args: Any, **kwargs: Any) -> Any:
            raise PeerUnreachable("connection refused")

    federated = w.services.federated
    assert federated is not None
    peer = load_identity(w.services.data_dir / "peer.key")
    federated.peers = [KnownPeer(MARK, "http://peer.test", "key", peer.public_key, peer.instance_id, w.a_user)]
    federated.adapters, federated.transport = StaticAdapters(), Unreachable()
    federated.adapters.set_active(w.a_user, write_peft_adapter(w.services.data_dir / "adapter-a"), 3)
    response = w.call("a", "POST", f"{FED}/sync", {})
    assert response.status_code == 502, response.text
    return response.json()["error"]["details"]["round_id"]


def make_red_team_run(w: World) -> str:
    """A red-team run of A's (the detector alone: no engine needed), finished: its id."""
    run_id = w.ok("a", "POST", f"{RT}/run", {"max_attacks": 6, "seed": 3, "chat": False})["run_id"]
    assert w.wait("a", f"{RT}/runs/{run_id}", lambda r: r["status"] != "running")["status"] == "completed"
    return run_id


MAKE: dict[str, Callable[[World], str]] = {
    "dream_session": make_dream_session, "insight": make_insight, "dream_user": make_dream_user,
    "quarantined": make_quarantined, "pattern": make_pattern, "sanitation_session": make_sanitation_session,
    "node": make_node,
    "red_team_run": make_red_team_run,
    "federated_round": make_federated_round,
    "training_answer": make_training_answer,
    "training_run": make_training_run,
    "distillation_run": make_distillation_run,
    "optimization_run": make_optimization_run,
    "precache": make_precache,
    "answer": make_answer,
    "privacy_charge": make_privacy_charge,
    "memory": make_memory, "conversation": make_conversation, "snippet": make_snippet, "profile": make_profile,
    "task": make_task, "room": make_room, "speaker": make_speaker, "tool_run": make_tool_run,
    "catalog_entry": make_catalog_entry, "execution": make_execution, "approval": make_approval,
}


def intact(w: World, resource: str, ident: str) -> None:
    """A (the admin for a catalog entry) still finds the resource as it was made."""
    match resource:
        case "memory":
            assert MARK in w.ok("a", "GET", f"/v1/memories/{ident}")["content"]
        case "conversation":
            assert w.ok("a", "POST", "/v1/chat", {"message": "again", "conversation_id": ident}
                        )["conversation_id"] == ident
        case "snippet":
            assert w.ok("a", "GET", f"/v1/snippets/{ident}")["content"] == MARK
        case "profile":
            assert w.ok("a", "GET", f"/v1/agent-profiles/{ident}")["role"] == MARK
        case "task":
            assert w.ok("a", "GET", f"/v1/agentic/tasks/{ident}")["status"] == "awaiting_approval"
        case "room":
            assert w.ok("a", "GET", f"/v1/voice/rooms/{ident}")["volume"] == 80
        case "speaker":
            mine = w.ok("a", "GET", "/v1/voice/speakers")["speakers"]
            assert [(s["id"], s["enrollment_count"]) for s in mine] == [(ident, 1)]
        case "tool_run":
            assert len(w.ok("a", "GET", f"/v1/tools/runs?conversation_id={ident}")["runs"]) == 1
        case "catalog_entry":
            assert w.ok("admin", "GET", f"{CATALOG}/{ident}")["description"] == MARK
        case "execution":
            assert w.ok("a", "GET", f"{CATALOG}/executions/{ident}")["execution_id"] == ident
        case "approval":
            assert w.ok("a", "GET", f"/v1/approvals/{ident}")["status"] == "pending"
        case "dream_session":
            assert w.ok("a", "GET", f"{D}/sessions/{ident}")["status"] == "completed"
            assert w.ok("a", "GET", f"{D}/status")["session"]["id"] == ident
        case "insight":
            found = w.ok("a", "GET", f"{D}/insights/{ident}")
            assert (found["title"], found["status"]) == (f"Title {MARK}", "active")
        case "dream_user":
            assert w.ok("a", "GET", f"{D}/sessions")["total"] == 0  # nobody started a dream for A
        case "quarantined":
            listed = w.ok("a", "GET", "/v1/memories/quarantine")["memories"]
            assert [(m["id"], m["quarantine_reason"]) for m in listed] == [(ident, f"stale: {MARK}")]
        case "pattern":
            assert [p["id"] for p in w.ok("a", "GET", f"{SAN}/defense-patterns")["patterns"]] == [ident]
        case "sanitation_session":
            assert w.ok("a", "GET", f"{SAN}/results/{ident}")["results"][0]["quarantined"][0]["reason"] == MARK
        case "privacy_charge":
            assert [e["id"] for e in w.ok("a", "GET", f"{PRIVACY}/budget")["ledger"]] == [ident]
        case "answer":
            found = w.ok("a", "GET", EXPLAIN.replace("{id}", ident))
            assert found["message_id"] == ident and found["steps"]
        case "precache":
            (predicted,) = w.ok("a", "GET", f"{PRE}/status")["predictions"]
            assert (predicted["id"], predicted["fresh"]) == (ident, True) and MARK in predicted["query"]
        case "training_answer":
            samples = w.ok("a", "GET", f"{TRAIN}/status")["samples"]
            assert (samples["feedback"], samples["negative"], samples["positive"]) == (1, 1, 0)
        case "training_run":
            assert w.ok("a", "GET", f"{TRAIN}/runs/{ident}")["state"] == "active"
            assert w.ok("a", "GET", f"{TRAIN}/status")["active_adapter"]["run_id"] == ident
        case "distillation_run":
            assert w.ok("a", "GET", f"{DIST}/status")["run_id"] == ident
        case "optimization_run":
            assert w.ok("a", "GET", f"{OPT}/status")["run"]["id"] == ident
            assert w.ok("a", "GET", f"{OPT}/history?run_id={ident}")["total"] == 3
        case "federated_round":
            (found,) = w.ok("a", "GET", f"{FED}/status")["rounds"]
            assert (found["id"], found["status"], found["peers"][0]["name"]) == (ident, "failed", MARK)
        case "red_team_run":
            assert w.ok("a", "GET", f"{RT}/report")["id"] == ident
            assert w.ok("a", "GET", "/api/v1/immune/status")["red_team"]["latest"]["run_id"] == ident
        case "node":
            node = w.ok("a", "GET", f"{K}/nodes/{ident}")
            assert node["name"] == NODE and [s["summary"] for s in node["sources"]] == [MARK]


# --- the table --------------------------------------------------------------------------------------

ABSENT, PRESENT = "absent", "present"  # for 200 rows: A's id and text must not / must be in the answer


@dataclass(frozen=True)
class Row:
    resource: str
    who: str
    method: str
    path: str  # "{id}" is A's resource id
    body: Any = None
    status: int = 404
    seen: str = ABSENT

    @property
    def id(self) -> str:
        return f"{self.resource}:{self.who}:{self.method} {self.path}"


def rows(resource: str, *items: tuple) -> list[Row]:
    return [Row(resource, *item) for item in items]


M, S, P, T, R = "/v1/memories", "/v1/snippets", "/v1/agent-profiles", "/v1/agentic/tasks", "/v1/voice/rooms"
TABLE: list[Row] = [
    # explanations: an answer's provenance is its user's alone; the cognitive load reads the caller's activity
    *rows("answer", ("b", "GET", EXPLAIN), ("admin", "GET", EXPLAIN), ("b", "GET", "/api/v1/cognitive-load", None, 200),
          ("admin", "GET", "/api/v1/cognitive-load", None, 200)),
    # precache prediction: each key sees and refreshes its own user's predicted queries only
    *rows("precache", ("b", "GET", f"{PRE}/status", None, 200), ("admin", "GET", f"{PRE}/status", None, 200),
          ("b", "POST", f"{PRE}/refresh", None, 200), ("admin", "POST", f"{PRE}/refresh", {}, 200)),
    # the privacy budget: each key sees and spends its own user's budget only
    *rows("privacy_charge", ("b", "GET", f"{PRIVACY}/budget", None, 200), ("admin", "GET", f"{PRIVACY}/budget", None, 200),
          ("b", "GET", f"{PRIVACY}/memory-stats?epsilon=0.1", None, 200),
          ("b", "GET", f"{PRIVACY}/quality?epsilon=0.1", None, 200)),
    # dream mode: the admin key is the installation owner's, another user as far as A's dream goes
    *rows("dream_session", ("b", "GET", f"{D}/sessions/{{id}}"), ("b", "GET", f"{D}/sessions/{{id}}/journal"),
          ("admin", "GET", f"{D}/sessions/{{id}}"), ("admin", "GET", f"{D}/sessions/{{id}}/journal?phase=nrem"),
          ("b", "GET", f"{D}/sessions", None, 200), ("b", "GET", f"{D}/status", None, 200),
          ("b", "POST", f"{D}/pause", None, 409), ("b", "POST", f"{D}/resume", None, 409),
          ("b", "POST", f"{D}/cancel", None, 409)),
    *rows("insight", ("b", "GET", f"{D}/insights/{{id}}"), ("admin", "GET", f"{D}/insights/{{id}}"),
          ("b", "PUT", f"{D}/insights/{{id}}", {"title": "overwritten"}),
          ("b", "PUT", f"{D}/insights/{{id}}", {"status": "dismissed"}),
          ("b", "POST", f"{D}/insights/{{id}}/confirm"), ("b", "POST", f"{D}/insights/{{id}}/dismiss", {}),
          ("b", "POST", f"{D}/insights/{{id}}/merge"), ("b", "GET", f"{D}/insights", None, 200),
          ("b", "GET", f"{D}/insights?type=hypothesis&status=active", None, 200)),
    *rows("dream_user", ("b", "POST", f"{D}/trigger", {"user_id": "{id}"}),
          ("admin", "POST", f"{D}/trigger", {"user_id": "{id}"})),
    # sanitation and the quarantine: A's alone (the admin key is another user here too)
    *rows("quarantined", ("b", "POST", f"{M}/{{id}}/restore"), ("admin", "POST", f"{M}/{{id}}/restore", {}),
          ("b", "GET", f"{M}/quarantine", None, 200), ("admin", "GET", f"{M}/quarantine", None, 200)),
    *rows("pattern", ("b", "DELETE", f"{SAN}/defense-patterns/{{id}}"),
          ("admin", "DELETE", f"{SAN}/defense-patterns/{{id}}"), ("b", "GET", f"{SAN}/defense-patterns", None, 200)),
    *rows("sanitation_session", ("b", "GET", f"{SAN}/results/{{id}}"), ("admin", "GET", f"{SAN}/results/{{id}}"),
          ("b", "GET", f"{SAN}/results", None, 200), ("b", "GET", f"{SAN}/latest")),
    # red team: a run and its report are A's alone (the admin key is another user here too)
    *rows("red_team_run", ("b", "GET", f"{RT}/runs/{{id}}"), ("admin", "GET", f"{RT}/runs/{{id}}?attacks=true"),
          ("b", "GET", f"{RT}/report"), ("admin", "GET", f"{RT}/report?attacks=true"),
          ("b", "GET", "/api/v1/immune/status", None, 200)),
    # distillation: a run is A's alone (the admin key is another user here too)
    *rows("distillation_run", ("b", "GET", f"{DIST}/status?run_id={{id}}"),
          ("admin", "GET", f"{DIST}/status?run_id={{id}}"), ("b", "POST", f"{DIST}/cancel"),
          ("b", "GET", f"{DIST}/status", None, 200)),
    # optimisation: A's runs, trials and applied parameters are A's alone (the admin key is another user here too)
    *rows("optimization_run", ("b", "GET", f"{OPT}/history?run_id={{id}}", None, 200),
          ("admin", "GET", f"{OPT}/history", None, 200), ("b", "GET", f"{OPT}/status", None, 200),
          ("b", "POST", f"{OPT}/cancel")),
    # training: feedback on A's answer, A's runs and adapter are A's alone (the admin key is another user here too)
    *rows("training_answer", ("b", "POST", f"{TRAIN}/feedback", {"message_id": "{id}", "rating": 1}),
          ("admin", "POST", f"{TRAIN}/feedback", {"message_id": "{id}", "rating": 1, "preferred_answer": "mine"}),
          ("b", "GET", f"{TRAIN}/status", None, 200)),
    *rows("training_run", ("b", "GET", f"{TRAIN}/runs/{{id}}"), ("admin", "GET", f"{TRAIN}/runs/{{id}}"),
          ("b", "POST", f"{TRAIN}/runs/{{id}}/cancel"), ("b", "GET", f"{TRAIN}/status", None, 200),
          ("admin", "GET", f"{TRAIN}/status", None, 200)),
    # federated sync: A's rounds, peers and adapter are A's alone (the admin key is another user here too)
    *rows("federated_round", ("b", "GET", f"{FED}/status", None, 200), ("admin", "GET", f"{FED}/status", None, 200),
          ("b", "POST", f"{FED}/sync", {}, 409), ("b", "POST", f"{FED}/sync", {"peers": [MARK]}, 422)),
    # the admin key is the installation owner's: another user, as far as A's graph goes
    *rows("node", ("b", "GET", f"{K}/nodes/{{id}}"), ("admin", "GET", f"{K}/nodes/{{id}}"),
          ("b", "GET", f"{K}/graph?center={{id}}"), ("b", "GET", f"{K}/graph", None, 200),
          ("b", "GET", f"{K}/graph?min_retention=0", None, 200), ("b", "GET", f"{K}/search?q={NODE}", None, 200)),
    *rows("memory", ("b", "GET", f"{M}/{{id}}"), ("b", "GET", f"{M}/{{id}}/history"), ("b", "DELETE", f"{M}/{{id}}"),
          ("b", "GET", M, None, 200), ("b", "GET", f"{M}/search?q={MARK}", None, 200)),
    *rows("conversation", ("b", "POST", "/v1/chat", {"message": "hi", "conversation_id": "{id}"}),
          ("b", "POST", "/v1/chat/stream", {"message": "hi", "conversation_id": "{id}"})),
    *rows("snippet", ("b", "GET", f"{S}/{{id}}"), ("b", "GET", f"{S}/{{id}}/resolved"),
          ("b", "PUT", f"{S}/{{id}}", {"content": "overwritten"}), ("b", "DELETE", f"{S}/{{id}}"),
          ("b", "GET", S, None, 200), ("b", "GET", f"{S}/search?q={MARK}", None, 200)),
    *rows("profile", ("b", "GET", f"{P}/{{id}}"), ("b", "PUT", f"{P}/{{id}}", {"role": "overwritten"}),
          ("b", "DELETE", f"{P}/{{id}}"), ("b", "GET", P, None, 200),
          # in chat another user's profile is an unknown reference: 422 naming the field, as for any id
          ("b", "POST", "/v1/chat", {"message": "hi", "mentioned_profile_ids": ["{id}"]}, 422)),
    *rows("task", ("b", "GET", f"{T}/{{id}}"), ("b", "GET", f"{T}/{{id}}/stream"),
          ("b", "POST", f"{T}/{{id}}/cancel"), ("b", "POST", f"{T}/{{id}}/approve"), ("b", "GET", T, None, 200)),
    *rows("room", ("b", "GET", f"{R}/{{id}}"), ("b", "PATCH", f"{R}/{{id}}", {"volume": 5}),
          ("b", "DELETE", f"{R}/{{id}}"), ("b", "GET", f"{R}/{{id}}/session"), ("b", "GET", R, None, 200),
          ("admin", "GET", R, None, 200, PRESENT), ("admin", "GET", f"{R}/{{id}}", None, 200, PRESENT)),
    *rows("speaker", ("b", "DELETE", "/v1/voice/speakers/{id}"), ("b", "GET", "/v1/voice/speakers", None, 200),
          # B enrolling under A's profile name makes B's own profile; A's is not touched
          ("b", "POST", f"/v1/voice/speakers/enroll?name=Alpha-{MARK}", speech(2), 201)),
    *rows("tool_run", ("b", "GET", "/v1/tools/runs", None, 200),
          ("b", "GET", "/v1/tools/runs?conversation_id={id}", None, 200)),
    *rows("catalog_entry", ("b", "DELETE", f"{CATALOG}/{{id}}", None, 403),
          ("b", "POST", CATALOG, {"name": "Mine", "description": "x", "command": "id", "category": "system",
                                  "risk_level": "low", "os": "any"}, 403)),
    *rows("execution", ("b", "GET", f"{CATALOG}/executions/{{id}}"), ("b", "GET", f"{CATALOG}/executions", None, 200),
          ("admin", "GET", f"{CATALOG}/executions/{{id}}", None, 200, PRESENT),
          ("admin", "GET", f"{CATALOG}/executions", None, 200, PRESENT)),
    *rows("execution", ("b", "GET", f"{CATALOG}/audit", None, 200, ABSENT)),  # a user sees only their own events
    # deciding needs an admin key (other than the requester's): a user key is refused before any lookup
    *rows("approval", ("b", "GET", "/v1/approvals/{id}"), ("b", "POST", "/v1/approvals/{id}/approve", None, 403),
          ("b", "POST", "/v1/approvals/{id}/deny", {"reason": "mine now"}, 403),
          ("b", "GET", "/v1/approvals", None, 200),
          ("b", "GET", "/v1/approvals?status=pending", None, 200),
          ("admin", "GET", "/v1/approvals/{id}", None, 200, PRESENT),
          ("admin", "GET", "/v1/approvals", None, 200, PRESENT)),
]
ERROR_CODES = {403: "FORBIDDEN", 404: "NOT_FOUND", 409: "CONFLICT", 422: "VALIDATION_ERROR"}


def fill(value: Any, ident: str) -> Any:
    if isinstance(value, str):
        return value.replace("{id}", ident)
    if isinstance(value, list):
        return [fill(v, ident) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, ident) for k, v in value.items()}
    return value


@pytest.fixture
def world(make_settings, make_services, make_client, model) -> World:
    services = make_services(make_settings(voice={"rooms": {"default_volume": 80}}, cognitive_load={"enabled": True},
                                           red_team={"enabled": True}, federated={"enabled": True},
                                           optimization={"enabled": True, "seed": 5},
                                           lora={"enabled": True, "min_samples": 2, "auto_start": False},
                                           distillation={"enabled": True, "teacher_base_url": "http://teacher:8000",
                                                         "teacher_model": "big"}), model)
    assert services.voice is not None
    services.voice.speakers = SpeakerRegistry(SpeakerStore(services.db, services.sealer),
                                              services.settings.voice.speaker_id, FakeSpeakerEmbedder())
    admin, _ = services.keys.create("admin", role="admin")  # the installation owner's key: the admin
    keys, a_user = {"admin": {"Authorization": f"Bearer {admin}"}}, ""
    for name in ("a", "b"):
        key, principal = services.keys.create(f"user-{name}", user_id=uuid4())
        keys[name] = {"Authorization": f"Bearer {key}"}
        a_user = a_user or str(principal.user_id)
    return World(make_client(services), services, keys, a_user)


@pytest.mark.parametrize("row", TABLE, ids=lambda row: row.id)
def test_another_user_never_reaches_the_resource(world: World, row: Row) -> None:
    ident = MAKE[row.resource](world)
    response = world.call(row.who, row.method, fill(row.path, ident), fill(row.body, ident))
    assert response.status_code == row.status, response.text
    text = response.text
    if row.status >= 400:
        assert response.json()["error"]["code"] == ERROR_CODES[row.status]
    if row.seen == PRESENT:
        assert ident in text
    else:
        assert ident not in text or row.status >= 400  # an error may name the id the caller sent
        assert MARK not in text.replace(f"Alpha-{MARK}", "")  # (the name B gave its own speaker profile)
        assert world.a_user not in text
    intact(world, row.resource, ident)


def test_every_user_resource_has_rows_for_another_user() -> None:
    """Each resource of the owner rules is in the table, for reads, changes and lists."""
    assert set(MAKE) == {row.resource for row in TABLE}
    for resource in MAKE:
        methods = {row.method for row in TABLE if row.resource == resource and row.who == "b"}
        assert methods, resource


def test_the_graph_stream_carries_only_the_callers_events(make_settings) -> None:  # noqa: ANN001
    """B's stream, even from the first stored event, holds B's events only (uvicorn on loopback: the
    TestClient would wait for the endless stream to end)."""
    import httpx

    from assistant.llm.scripted import ScriptedChatModel
    from assistant.services import build_services
    from tests.api.test_api_knowledge import Events
    from tests.integration.support import LiveServer

    services = build_services(make_settings(security={"rate_limit_enabled": False}), chat_model=ScriptedChatModel())
    assert services.graph is not None
    services.graph.extractor = ScriptedExtractor()
    keys = {name: {"Authorization": f"Bearer {services.keys.create(name, user_id=uuid4())[0]}"} for name in "ab"}
    with LiveServer(services) as server, httpx.Client(base_url=server.base_url, timeout=30) as http:
        assert http.post("/v1/memories", json={"content": f"{NODE} harbour {MARK}", "summary": MARK},
                         headers=keys["a"]).status_code == 201
        assert services.graph.wait_idle()
        with http.stream("GET", f"{K}/graph/stream", headers={**keys["b"], "Last-Event-ID": "0"}) as response:
            assert http.post("/v1/memories", json={"content": "Bravo is mine", "summary": "b"},
                             headers=keys["b"]).status_code == 201
            events = Events(response).take(1)
    assert [(seq, name, data["name"]) for seq, name, data in events] == [(1, "NodeCreated", "Bravo")]
    assert NODE not in str(events) and MARK not in str(events)
