"""A precache hit against the retrieval it replaces, with the packaged MiniLM embedder.

Setup (not measured): a fresh data directory; ``--memories`` memories for one user (generated facts
about places, people and habits, embedded with MiniLM); a history of ``--queries`` distinct questions,
each asked at this time of day on 8 of 10 days (stored as chat messages, sealed, moved to the earlier
days); one refresh (its duration is printed).

Measured, ``--rounds`` times per query, alternating:

* baseline: ``MemoryStore.retrieve_for_prompt(user, query, vector)``, what the chat does without a
  precache (the query vector is computed once beforehand: the chat embeds the message either way);
* precache: ``Precache.lookup(user, query, vector)``, a hit (it also touches the memories, as the
  retrieval does).

Each hit is checked against the retrieval at that moment (the same code without its touch): context,
memories and order must be equal. A hit's touch makes the user's entries stale (their memories' recency
moved); the benchmark waits for the background recomputation (not on the chat path) and prints its time.

Printed: p50 and p90 of each, the ratio of the p50s, the recomputation time, how many hits were equal, and
the status's ``time_saved_ms``. Nothing here is a test: tests never assert times.

    .venv/bin/python benchmarks/precache.py [--memories 2000] [--queries 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.clock import iso  # noqa: E402
from assistant.config import Settings  # noqa: E402
from assistant.extended.precache_entries import retrieve_untouched  # noqa: E402
from assistant.extended.thermal import ThermalReading  # noqa: E402
from assistant.llm.scripted import ScriptedChatModel  # noqa: E402
from assistant.memory.store import NewMemory  # noqa: E402
from assistant.memory.types import MemoryType  # noqa: E402
from assistant.services import build_services  # noqa: E402

USER = "00000000-0000-0000-0000-0000000000b1"
PLACES = ["Berlin", "Lisbon", "Oslo", "Porto", "Vienna", "Kyoto", "Quito", "Lagos", "Perth", "Tromsø"]
PEOPLE = ["Anna", "Bilal", "Chen", "Dora", "Emeka", "Farah", "Goran", "Hana", "Ines", "Jonas"]
THINGS = ["the weather", "the train to work", "the gym", "the bakery", "the dentist", "the garden", "the budget",
          "the car", "the team meeting", "the book club"]


class NoSensor:
    def read(self) -> ThermalReading:
        return ThermalReading(None)


def fact(n: int) -> str:
    return (f"{PEOPLE[n % 10]} told me about {THINGS[(n // 10) % 10]} in {PLACES[(n // 100) % 10]} "
            f"on visit {n}; it matters on weekdays.")


def question(n: int) -> str:
    return f"What did {PEOPLE[n % 10]} say about {THINGS[(n * 3 + n // 10) % 10]} in {PLACES[(n + n // 10) % 10]}?"


def seed(services, queries: int, now: datetime) -> None:  # noqa: ANN001 - Services
    for day in range(1, 11):
        at = now - timedelta(days=day)
        for n in range(queries if day <= 8 else 1):
            text = question(n) if day <= 8 else f"Note number {day}"
            conversation, _, _ = services.conversations.record_exchange(
                user_id=USER, conversation_id=None, user_message=text, reply="ok", model="scripted",
                prompt_tokens=1, completion_tokens=1)
            services.db.execute("UPDATE messages SET created_at = ? WHERE conversation_id = ?",
                                (iso(at), conversation))


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.load(server={"data_dir": tmp}, inference={"backend": "scripted"},
                                 memory={"embedding_backend": "sentence-transformers"})
        services = build_services(settings, chat_model=ScriptedChatModel())
        try:
            precache, memory = services.precache, services.memory
            assert precache is not None and memory is not None
            precache.thermal = NoSensor()
            memory.add_many(USER, [NewMemory(fact(n), None, MemoryType.FACT) for n in range(args.memories)])
            seed(services, args.queries, datetime.now(UTC))
            began = time.perf_counter()
            report = precache.refresh()
            print(f"refresh: {report.predicted} predicted, {report.cached} precomputed in "
                  f"{(time.perf_counter() - began) * 1000:.0f} ms (thermal: {report.thermal})")
            texts = [question(n) for n in range(args.queries)]
            vectors = memory.embedder.embed(texts)
            base, hits, refills, same = [], [], [], 0
            for _ in range(args.rounds):
                for text, vector in zip(texts, vectors, strict=True):
                    reference = retrieve_untouched(memory, USER, text, vector)  # what a retrieval returns now
                    start = time.perf_counter()
                    hit = precache.lookup(USER, text, vector)
                    hits.append((time.perf_counter() - start) * 1000)
                    assert hit is not None, text
                    same += [m.memory.id for m in hit[1]] == [m.memory.id for m in reference[1]] \
                        and hit[0] == reference[0]
                    start = time.perf_counter()
                    precache.settle()  # the hit's touch made the user's entries stale: recomputed in the background
                    refills.append((time.perf_counter() - start) * 1000)
                    start = time.perf_counter()
                    memory.retrieve_for_prompt(USER, text, vector)
                    base.append((time.perf_counter() - start) * 1000)
                    precache.settle()
            status = precache.status(USER)
            print(f"memories {args.memories}, queries {args.queries}, rounds {args.rounds}")
            print(f"retrieve_for_prompt: p50 {percentile(base, 50):.2f} ms, p90 {percentile(base, 90):.2f} ms")
            print(f"precache lookup:     p50 {percentile(hits, 50):.2f} ms, p90 {percentile(hits, 90):.2f} ms")
            print(f"background recompute after a recall ({len(texts)} entries, off the chat path): p50 "
                  f"{percentile(refills, 50):.0f} ms")
            print(f"hits equal to the retrieval at that moment (context, memories and order): {same} of {len(hits)}")
            print(f"ratio of p50s (retrieval / lookup): {percentile(base, 50) / percentile(hits, 50):.1f}x")
            print(f"status: hits {status['hits']}, hit rate {status['hit_rate']}, "
                  f"time saved {status['time_saved_ms']:.0f} ms")
        finally:
            services.close()


if __name__ == "__main__":
    main()
