"""Mesh inference with fake peers (``httpx.MockTransport``) and a fake local engine: the choice by health
and latency, the concurrency bound, timeouts and failures falling back (or not), the peer's key."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from assistant.config.extended import MeshPeer, MeshSettings
from assistant.errors import ServiceUnavailableError, ValidationFailed
from assistant.llm.base import ChatMessage
from assistant.mesh import LOCAL, Mesh, MeshRequest, Outcome, PeerFailedError, PeerTimeoutError, Reply, Usage
from assistant.mesh.peers import PeerState, ranked


def completion(text: str | None, model: str = "peer-model", **message: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, **message},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}


@dataclass
class FakePeer:
    """One peer host: its health status, how it answers, and what it received."""

    health: int = 200
    answer: Callable[[dict[str, Any]], httpx.Response] | None = None
    delay_secs: float = 0.0
    gate: threading.Event | None = None  # a forward waits for it (to hold slots)
    probes: int = 0
    requests: list[httpx.Request] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    waiting: int = 0


class FakePeers:
    """A MockTransport handler dispatching on the host (``http://<name>.test``)."""

    def __init__(self, **peers: FakePeer):
        self.peers = peers
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        peer = self.peers[request.url.host.removesuffix(".test")]
        if request.url.path == "/ready":
            peer.probes += 1
            return httpx.Response(peer.health, json={"status": "ready" if peer.health == 200 else "unavailable"})
        assert request.url.path == "/v1/chat/completions"
        body = json.loads(request.content)
        with self.lock:
            peer.requests.append(request)
            peer.bodies.append(body)
            peer.waiting += 1
        if peer.gate is not None:
            peer.gate.wait(10)
        if peer.delay_secs:
            time.sleep(peer.delay_secs)
        if peer.answer is not None:
            return peer.answer(body)
        return httpx.Response(200, json=completion(f"{request.url.host} says hi"))


class FakeLocal:
    def __init__(self) -> None:
        self.calls: list[MeshRequest] = []

    async def complete(self, user_id: Any, request: MeshRequest) -> Reply:
        self.calls.append(request)
        return Reply("local says hi", "local-model", "stop", Usage(5, 2))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def peer(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "url": f"http://{name}.test", "api_key": f"key-of-{name}", **extra}


def make_mesh(fakes: FakePeers, *peers: dict[str, Any], clock: Clock | None = None,
              **settings: Any) -> tuple[Mesh, FakeLocal]:
    local = FakeLocal()
    mesh = Mesh(MeshSettings(enabled=True, peers=list(peers), **settings), local,
                transport=httpx.MockTransport(fakes), clock=clock or Clock())
    return mesh, local


ASK = MeshRequest(messages=(ChatMessage("user", "Hello?"),), max_tokens=16, temperature=0.0)


def run(mesh: Mesh, request: MeshRequest = ASK) -> Any:
    return asyncio.run(mesh.infer("u1", request))


@pytest.fixture(autouse=True)
def _close_meshes(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN202
    made: list[Mesh] = []
    original = Mesh.__init__

    def init(self: Mesh, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Mesh, "__init__", init)
    yield
    for mesh in made:
        mesh.close()


def test_a_healthy_peer_serves_with_its_key_and_no_memory_or_tools() -> None:
    fakes = FakePeers(a=FakePeer())
    mesh, local = make_mesh(fakes, peer("a", model="big-model"))
    answer = run(mesh, MeshRequest(messages=(ChatMessage("system", "Be brief."), ChatMessage("user", "Hello?")),
                                   model="ignored-for-a", max_tokens=16, temperature=0.2))
    assert answer.served_by == "a" and answer.fallback_reason is None
    assert answer.reply.content == "a.test says hi" and answer.reply.model == "peer-model"
    assert answer.reply.usage == Usage(7, 3)
    assert answer.route[0].outcome is Outcome.SERVED and answer.latency_ms >= answer.route[0].latency_ms > 0
    sent = fakes.peers["a"].requests[0]
    assert sent.headers["authorization"] == "Bearer key-of-a"
    assert fakes.peers["a"].bodies[0] == {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello?"}],
        "stream": False, "memory": {"retrieve": False, "learn": False}, "model": "big-model", "max_tokens": 16,
        "temperature": 0.2}
    assert not local.calls
    status = mesh.status()[0]
    assert (status.healthy, status.served, status.in_flight) == (True, 1, 0)
    assert status.latency_ewma_ms == round(answer.route[0].latency_ms, 1)


def test_the_request_model_is_sent_when_the_peer_names_none() -> None:
    fakes = FakePeers(a=FakePeer())
    mesh, _ = make_mesh(fakes, peer("a"))
    run(mesh, MeshRequest(messages=ASK.messages, model="qwen"))
    assert fakes.peers["a"].bodies[0]["model"] == "qwen"
    assert "max_tokens" not in fakes.peers["a"].bodies[0]


def test_an_unhealthy_peer_is_skipped_marked_down_and_probed_again_later() -> None:
    clock = Clock()
    fakes = FakePeers(a=FakePeer(health=503), b=FakePeer())
    mesh, _ = make_mesh(fakes, peer("a"), peer("b"), clock=clock, health_interval_secs=15, down_secs=30)
    answer = run(mesh)
    assert answer.served_by == "b"
    outcomes = {a.peer: a.outcome for a in answer.route}
    assert outcomes == {"a": Outcome.UNHEALTHY, "b": Outcome.SERVED}
    assert "HTTP 503" in answer.route[0].detail
    clock.now += 20  # b's health is stale (15 s), a is still down (30 s): only b is probed
    answer = run(mesh)
    assert answer.served_by == "b" and {a.peer: a.outcome for a in answer.route}["a"] is Outcome.DOWN
    assert (fakes.peers["a"].probes, fakes.peers["b"].probes) == (1, 2)
    fakes.peers["a"].health = 200
    clock.now += 11  # a's down period is over: probed again, healthy, and not measured yet (0 ms) so chosen
    answer = run(mesh)
    assert fakes.peers["a"].probes == 2 and answer.served_by == "a"


def test_health_is_cached_for_the_interval() -> None:
    clock = Clock()
    fakes = FakePeers(a=FakePeer())
    mesh, _ = make_mesh(fakes, peer("a"), clock=clock, health_interval_secs=15)
    for _ in range(3):
        run(mesh)
    assert fakes.peers["a"].probes == 1
    clock.now += 15
    run(mesh)
    assert fakes.peers["a"].probes == 2


def test_the_lowest_latency_peer_is_chosen_and_the_preferred_one_first() -> None:
    fakes = FakePeers(a=FakePeer(), b=FakePeer())
    mesh, _ = make_mesh(fakes, peer("a"), peer("b"))
    mesh.peers["a"].succeeded(400.0)
    mesh.peers["b"].succeeded(50.0)
    answer = run(mesh)
    assert answer.served_by == "b"
    assert {a.peer: a.outcome for a in answer.route} == {"b": Outcome.SERVED, "a": Outcome.NOT_TRIED}
    assert run(mesh, MeshRequest(messages=ASK.messages, peer="a")).served_by == "a"


def test_latency_is_an_ewma_of_successful_forwards() -> None:
    state = PeerState(MeshPeer(**peer("a")), alpha=0.25)
    state.succeeded(100.0)
    state.succeeded(200.0)
    assert state.latency_ewma_ms == pytest.approx(0.25 * 200 + 0.75 * 100)
    fast = PeerState(MeshPeer(**peer("b")), alpha=0.25)
    fast.succeeded(10.0)
    for s in (state, fast):
        s.probed(0.0, None, 30)
    assert [p.name for p in ranked([state, fast], 1.0)] == ["b", "a"]
    assert [p.name for p in ranked([state, fast], 1.0, prefer="a")] == ["a", "b"]


def concurrently(mesh: Mesh, count: int, gate: threading.Event, started: Callable[[], bool]) -> list[Any]:
    """``count`` requests at once; the gate opens once ``started()`` holds (the peer's slots are taken)."""

    async def main() -> list[Any]:
        tasks = [asyncio.create_task(mesh.infer("u1", ASK)) for _ in range(count)]
        for _ in range(500):
            if started():
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        gate.set()
        return await asyncio.gather(*tasks)

    return asyncio.run(main())


def test_a_third_concurrent_request_to_a_peer_of_two_slots_goes_to_another_peer() -> None:
    gate = threading.Event()
    fakes = FakePeers(a=FakePeer(gate=gate), b=FakePeer())
    mesh, local = make_mesh(fakes, peer("a", max_concurrency=2), peer("b"))
    mesh.peers["b"].succeeded(1000.0)  # b is slower: a is everyone's first choice
    answers = concurrently(mesh, 3, gate, lambda: fakes.peers["a"].waiting >= 2)
    assert sorted(a.served_by for a in answers) == ["a", "a", "b"]
    overflow = next(a for a in answers if a.served_by == "b")
    assert {a.peer: a.outcome for a in overflow.route} == {"a": Outcome.FULL, "b": Outcome.SERVED}
    assert len(fakes.peers["a"].requests) == 2 and not local.calls
    assert mesh.status()[0].in_flight == 0


def test_a_third_concurrent_request_goes_local_when_the_only_peer_is_full() -> None:
    gate = threading.Event()
    fakes = FakePeers(a=FakePeer(gate=gate))
    mesh, local = make_mesh(fakes, peer("a", max_concurrency=2))
    answers = concurrently(mesh, 3, gate, lambda: fakes.peers["a"].waiting >= 2)
    assert sorted(a.served_by for a in answers) == ["a", "a", LOCAL]
    fallback = next(a for a in answers if a.served_by == LOCAL)
    assert "no peer can serve" in fallback.fallback_reason and "a full" in fallback.fallback_reason
    assert fallback.reply.content == "local says hi" and len(local.calls) == 1


def test_a_timeout_falls_back_to_local_and_marks_the_peer_down() -> None:
    gate = threading.Event()
    fakes = FakePeers(a=FakePeer(gate=gate))
    mesh, local = make_mesh(fakes, peer("a"), timeout_secs=0.3)
    try:
        answer = run(mesh)
    finally:
        gate.set()
    assert answer.served_by == LOCAL and answer.reply.content == "local says hi"
    assert answer.fallback_reason.startswith("peer 'a' timed out") and "0.3 s" in answer.fallback_reason
    assert answer.route[0].outcome is Outcome.TIMEOUT
    status = mesh.status()[0]
    assert status.down_until is not None and status.failed == 1 and status.healthy is False
    again = run(mesh)  # down: not asked again
    assert again.served_by == LOCAL and again.route[0].outcome is Outcome.DOWN
    assert len(fakes.peers["a"].requests) == 1


def test_without_fallback_a_timeout_is_504_and_a_failure_502() -> None:
    gate = threading.Event()
    fakes = FakePeers(a=FakePeer(gate=gate),
                      b=FakePeer(answer=lambda body: httpx.Response(503, json={"error": {"message": "engine busy"}})))
    no_fallback = MeshRequest(messages=ASK.messages, allow_fallback=False)
    mesh, local = make_mesh(fakes, peer("a"), timeout_secs=0.3)
    try:
        with pytest.raises(PeerTimeoutError) as timed_out:
            run(mesh, no_fallback)
    finally:
        gate.set()
    assert timed_out.value.code == "GATEWAY_TIMEOUT" and timed_out.value.details["peer"] == "a"
    mesh, local = make_mesh(fakes, peer("b"))
    with pytest.raises(PeerFailedError) as failed:
        run(mesh, no_fallback)
    assert failed.value.code == "UPSTREAM_ERROR" and "HTTP 503: engine busy" in failed.value.message
    with pytest.raises(ServiceUnavailableError, match="no peer can serve: b down"):
        run(mesh, no_fallback)  # b is now down
    assert not local.calls


def test_a_failed_forward_falls_back_with_the_reason() -> None:
    fakes = FakePeers(a=FakePeer(answer=lambda body: httpx.Response(401, json={"error": {
        "message": "invalid API key", "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}})))
    mesh, local = make_mesh(fakes, peer("a"))
    answer = run(mesh)
    assert answer.served_by == LOCAL and answer.fallback_reason == "peer 'a' failed: HTTP 401: invalid API key"


@pytest.mark.parametrize(("response", "reason"), [
    (httpx.Response(200, json=completion(None, tool_calls=[{"id": "c", "type": "function", "function": {
        "name": "rm", "arguments": "{}"}}])), "no text in choices[0].message.content"),
    (httpx.Response(200, text="<html>not json</html>"), "not JSON"),
    (httpx.Response(200, json={"choices": []}), "no choices[0]"),
    (httpx.Response(200, json=completion("x" * 5000)), "larger than mesh.max_answer_bytes"),
])
def test_an_answer_that_is_not_a_text_completion_is_a_failed_forward(response: httpx.Response, reason: str) -> None:
    fakes = FakePeers(a=FakePeer(answer=lambda body: response))
    mesh, _ = make_mesh(fakes, peer("a"), max_answer_bytes=4096)
    answer = run(mesh)
    assert answer.served_by == LOCAL and reason in answer.fallback_reason


def test_an_unreachable_peer_falls_back() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/ready":
            return httpx.Response(200)
        raise httpx.ConnectError("connection refused")

    mesh = Mesh(MeshSettings(enabled=True, peers=[peer("a")]), FakeLocal(), transport=httpx.MockTransport(refuse))
    try:
        answer = asyncio.run(mesh.infer("u1", ASK))
    finally:
        mesh.close()
    assert answer.served_by == LOCAL and "ConnectError: connection refused" in answer.fallback_reason


def test_local_only_and_no_peers_answer_locally_without_http() -> None:
    fakes = FakePeers(a=FakePeer())
    mesh, local = make_mesh(fakes, peer("a"))
    answer = run(mesh, MeshRequest(messages=ASK.messages, local_only=True))
    assert (answer.served_by, answer.fallback_reason, answer.route) == (LOCAL, "local_only was requested", ())
    assert fakes.peers["a"].probes == 0
    mesh, local = make_mesh(fakes)
    assert run(mesh).fallback_reason == "no peers are configured (mesh.peers)"


def test_an_unknown_preferred_peer_is_a_validation_error() -> None:
    mesh, _ = make_mesh(FakePeers(a=FakePeer()), peer("a"))
    with pytest.raises(ValidationFailed) as err:
        run(mesh, MeshRequest(messages=ASK.messages, peer="zz"))
    assert err.value.details["fields"] == [{"field": "peer", "error": "unknown peer 'zz' (mesh.peers: a)"}]


def test_the_answer_as_a_dict() -> None:
    mesh, _ = make_mesh(FakePeers(a=FakePeer()), peer("a"))
    shown = run(mesh).as_dict()
    assert shown["served_by"] == "a" and shown["usage"] == {"prompt_tokens": 7, "completion_tokens": 3,
                                                             "total_tokens": 10}
    assert shown["route"][0]["outcome"] == "served"


@pytest.mark.parametrize(("peers", "error"), [
    ([peer("a"), peer("a")], "peer names must be unique (twice: a)"),
    ([peer("local")], "'local' names the local engine"),
    ([{**peer("a"), "url": "ftp://a.test"}], "http:// or https:// base URL"),
    ([{**peer("a"), "url": "http://a.test/?x=1"}], "without query or fragment"),
    ([{**peer("a"), "max_concurrency": 0}], "greater than or equal to 1"),
])
def test_bad_peer_settings_are_refused(peers: list[dict[str, Any]], error: str) -> None:
    with pytest.raises(ValidationError, match=error.replace("(", r"\(").replace(")", r"\)")):
        MeshSettings(enabled=True, peers=peers)


def test_the_key_is_not_in_the_settings_repr() -> None:
    assert "key-of-a" not in repr(MeshSettings(peers=[peer("a")]))
    assert MeshPeer(**{**peer("a"), "url": "http://a.test/"}).url == "http://a.test"
