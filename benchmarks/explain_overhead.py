"""Explanation recording on the chat path: its overhead against chat without recording, in the same run.

The scripted model answers, so generation is ~0 and every figure is the chat path itself.

1. The chat path (the issue's figure): one set of services in this process, ``ChatService.chat`` called
   in alternating blocks with recording on (``chat.explanations`` the store: every answer's steps,
   candidates with their scores, prompt sections, one sealed row) and off (None: the null recorder).
   Nothing else differs. ratio = p50 on / p50 off; target ≤ 1.1×.
2. Served: two servers side by side as subprocesses on loopback (``assistant serve``), one with
   ``sovereign_intelligence.enabled = true``, one with false; ``POST /v1/chat`` in alternating blocks, a
   bare Starlette endpoint on the same uvicorn as the floor. The flag also switches the sovereignty score
   and the immune view, so this ratio is recording plus whatever those add, plus two processes' noise.
3. What building and storing one explanation costs (``TurnRecorder.finish`` + the sealed insert), p50
   over real explanations.

Run in two configurations: memory off (the chat pipeline alone, the harshest ratio), and memory on
(MiniLM embedding, retrieval over seeded memories, learning: the default, where there are memories to
record).

    .venv/bin/python benchmarks/explain_overhead.py [--requests 300] [--block 25]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.chat_overhead import create_key, free_port, percentile, server, timed_posts  # noqa: E402

MESSAGES = ["Where does my sister Anna live?", "What do I usually drink in the morning?",
            "When is the violin lesson?", "ping"]
SEED = ["My sister Anna lives in Reykjavik.", "I drink green tea every morning.",
        "My violin lesson is on Thursdays at five.", "The spare key is under the blue flowerpot.",
        "I prefer window seats on trains.", "My dentist is Dr. Ortega on Main Street."]


def write_config(data_dir: Path, *, recording: bool, memory: bool) -> Path:
    lines = [
        "[server]", f'data_dir = "{data_dir}"', 'log_level = "warning"',
        "[security]", "rate_limit_enabled = false",
        "[memory]", f"enabled = {'true' if memory else 'false'}",
        "[inference]", 'backend = "scripted"',
        "[sovereign_intelligence]", f"enabled = {'true' if recording else 'false'}",
    ]
    path = data_dir / "bench.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run(requests: int, block: int, memory: bool) -> dict[str, float]:
    testing = {"ASSISTANT_TESTING": "1"}  # the scripted model is a test double, refused otherwise
    with ExitStack() as stack:
        bases, auths = {}, {}
        for name, recording in (("on", True), ("off", False)):
            data = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            config = write_config(data, recording=recording, memory=memory)
            key = create_key(config)
            port = free_port()
            cmd = [sys.executable, "-m", "api.cli", "serve", "--config", str(config), "--port", str(port)]
            bases[name] = stack.enter_context(server(cmd, port, testing))
            auths[name] = {"Authorization": f"Bearer {key}"}
        floor_port = free_port()
        floor = stack.enter_context(server([sys.executable, "-m", "uvicorn", "benchmarks._floor_app:app", "--port",
                                            str(floor_port), "--log-level", "warning"], floor_port))
        client = stack.enter_context(httpx.Client(timeout=60))
        if memory:
            for name in bases:
                for text in SEED:
                    client.post(f"{bases[name]}/v1/memories", json={"content": text, "summary": text},
                                headers=auths[name]).raise_for_status()
        times: dict[str, list[float]] = {"on": [], "off": [], "floor": []}

        def body(i: int) -> dict:
            return {"message": MESSAGES[i % len(MESSAGES)], "max_tokens": 1}

        for name in bases:  # warm-up (and check recording really is on where it should be)
            timed_posts(client, f"{bases[name]}/v1/chat", body(0), 20, auths[name])
        timed_posts(client, f"{floor}/floor", body(0), 20)
        reply = client.post(f"{bases['on']}/v1/chat", json=body(0), headers=auths["on"]).json()
        explained = client.get(f"{bases['on']}/api/chat/{reply['id']}/explain", headers=auths["on"])
        assert explained.status_code == 200, explained.text
        off = client.post(f"{bases['off']}/v1/chat", json=body(0), headers=auths["off"]).json()
        assert client.get(f"{bases['off']}/api/chat/{off['id']}/explain",
                          headers=auths["off"]).status_code == 503
        steps = len(explained.json()["steps"])
        for n in range(requests // block):
            order = ("on", "off") if n % 2 == 0 else ("off", "on")
            for name in order:
                for i in range(block):
                    start = time.perf_counter()
                    client.post(f"{bases[name]}/v1/chat", json=body(i), headers=auths[name]).raise_for_status()
                    times[name].append((time.perf_counter() - start) * 1000)
            times["floor"] += timed_posts(client, f"{floor}/floor", body(0), block)
    p = {f"{k}_p{q}_ms": percentile(v, q) for k, v in times.items() for q in (50, 95)}
    p["ratio_p50"] = p["on_p50_ms"] / p["off_p50_ms"]
    p["overhead_on_p50_ms"] = p["on_p50_ms"] - p["floor_p50_ms"]
    p["overhead_off_p50_ms"] = p["off_p50_ms"] - p["floor_p50_ms"]
    p["overhead_ratio_p50"] = p["overhead_on_p50_ms"] / p["overhead_off_p50_ms"]
    p["steps_per_explanation"] = steps
    return p


def in_process(requests: int, block: int, memory: bool) -> dict[str, float]:
    """``ChatService.chat`` with recording on and off on the same services, alternating blocks."""
    os.environ.setdefault("ASSISTANT_TESTING", "1")
    from assistant.chat.service import ChatRequest
    from assistant.config import Settings
    from assistant.llm.scripted import ScriptedChatModel
    from assistant.services import build_services

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.load(server={"data_dir": tmp}, inference={"backend": "scripted"},
                                 memory={"enabled": memory})  # memory on: MiniLM, as configured by default
        services = build_services(settings, chat_model=ScriptedChatModel())
        try:
            user = services.keys.owner_user_id()
            for text in SEED if memory else ():
                services.memory.add(str(user), text)
            store, chat = services.explanations, services.chat
            times: dict[str, list[float]] = {"on": [], "off": []}

            async def go() -> None:
                for i in range(20):  # warm-up
                    await chat.chat(user, ChatRequest(MESSAGES[i % len(MESSAGES)], max_tokens=1))
                for n in range(requests // block):
                    for name in (("on", "off") if n % 2 == 0 else ("off", "on")):
                        chat.explanations = store if name == "on" else None
                        for i in range(block):
                            start = time.perf_counter()
                            await chat.chat(user, ChatRequest(MESSAGES[i % len(MESSAGES)], max_tokens=1))
                            times[name].append((time.perf_counter() - start) * 1000)

            asyncio.run(go())
            recorded = services.db.scalar("SELECT count(*) FROM explanations")
        finally:
            services.close()
    p = {f"{k}_p{q}_ms": percentile(v, q) for k, v in times.items() for q in (50, 95)}
    p["ratio_p50"] = p["on_p50_ms"] / p["off_p50_ms"]
    p["recorded"] = recorded
    return p


def record_cost(n: int) -> dict[str, float]:
    """In process: building (``finish``, the summary) and storing (JSON, seal, insert) one real
    explanation, on real services (scripted model, hashing embedder, memories seeded)."""
    os.environ.setdefault("ASSISTANT_TESTING", "1")
    from assistant.chat.service import ChatRequest
    from assistant.config import Settings
    from assistant.extended.explain import TurnRecorder
    from assistant.llm.scripted import ScriptedChatModel
    from assistant.services import build_services

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.load(server={"data_dir": tmp}, inference={"backend": "scripted"},
                                 memory={"embedding_backend": "hashing"})
        services = build_services(settings, chat_model=ScriptedChatModel())
        try:
            user = services.keys.owner_user_id()
            for text in SEED:
                services.memory.add(str(user), text)
            captured: list[tuple] = []
            original = services.chat.save_explanation

            def capture(user_id, rec, *args):  # noqa: ANN001, ANN002, ANN202
                captured.append((user_id, rec, args))
                return original(user_id, rec, *args)

            services.chat.save_explanation = capture
            for i in range(20):
                asyncio.run(services.chat.chat(user, ChatRequest(MESSAGES[i % len(MESSAGES)])))
            build, store = [], []
            for i in range(n):
                user_id, rec, (message_id, conversation_id, created_at, finished, defence, guard) = \
                    captured[i % len(captured)]
                start = time.perf_counter()
                explanation = rec.finish(message_id=message_id, conversation_id=conversation_id,
                                         created_at=created_at, engine="scripted", model=finished.model,
                                         usage=finished.usage, finish_reason=finished.finish_reason,
                                         defence={**defence, "verdicts": [v.as_dict() for v in guard.seen]})
                middle = time.perf_counter()
                services.explanations.save(user_id, explanation)
                store.append((time.perf_counter() - middle) * 1000)
                build.append((middle - start) * 1000)
            size = len(json.dumps(explanation.as_dict()))
            assert isinstance(rec, TurnRecorder)
        finally:
            services.close()
    return {"build_p50_ms": statistics.median(build), "store_p50_ms": statistics.median(store),
            "record_p50_ms": statistics.median([a + b for a, b in zip(build, store, strict=True)]),
            "json_chars": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="per server and configuration")
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument("--record-samples", type=int, default=500)
    args = parser.parse_args()
    out: dict[str, dict] = {}
    for memory in (False, True):
        label = "memory on" if memory else "memory off"
        r = in_process(args.requests, args.block, memory)
        out[f"chat path, {label}"] = r
        print(f"chat path ({label}): ChatService.chat p50 with recording {r['on_p50_ms']:.2f} ms (p95 "
              f"{r['on_p95_ms']:.2f}), without {r['off_p50_ms']:.2f} ms (p95 {r['off_p95_ms']:.2f}); ratio p50 "
              f"{r['ratio_p50']:.3f}x (target <= 1.1: {'MET' if r['ratio_p50'] <= 1.1 else 'MISSED'}); "
              f"{r['recorded']} explanations recorded", flush=True)
    for memory in (False, True):
        label = "memory on" if memory else "memory off"
        r = run(args.requests, args.block, memory)
        out[f"served, {label}"] = r
        print(f"served ({label}): /v1/chat p50 with recording {r['on_p50_ms']:.2f} ms (p95 {r['on_p95_ms']:.2f}), without "
              f"{r['off_p50_ms']:.2f} ms (p95 {r['off_p95_ms']:.2f}), floor {r['floor_p50_ms']:.2f} ms; "
              f"ratio p50 {r['ratio_p50']:.3f}x; "
              f"overhead above the floor {r['overhead_on_p50_ms']:.2f} vs {r['overhead_off_p50_ms']:.2f} ms = "
              f"{r['overhead_ratio_p50']:.3f}x; {r['steps_per_explanation']} steps per explanation", flush=True)
    c = record_cost(args.record_samples)
    out["record"] = c
    print(f"in process: one explanation built in {c['build_p50_ms']:.3f} ms and stored (sealed) in "
          f"{c['store_p50_ms']:.3f} ms, p50 {c['record_p50_ms']:.3f} ms; {c['json_chars']} characters of JSON")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
