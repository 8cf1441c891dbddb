"""Retrieval-parameter optimisation on LoCoMo: R@5 of the tuned parameters against the defaults, on
conversations the study never saw.

The five LoCoMo dev conversations (``../shared/benchmarks/locomo/locomo_dev5.json``, read in place) are
stored once with the packaged MiniLM as the cold-start objective stores them
(:mod:`assistant.learning.optimize_locomo`: each session on its date, questions one day after the last).
The study (optuna TPE, in memory, ``--trials`` trials, ``--exploration`` weight) runs on the first
``--tune`` conversations, split as the service splits them (held-out conversations decide what is
applied); the parameters are then measured on the remaining conversations, which took no part in it.
R@5 here is the objective's: recall of the evidence turns among the first 5 memories the prompt would
carry (threshold, limit, relevance order and budget applied), categories 1-4.

    .venv/bin/python benchmarks/optimization.py [--trials 60] [--tune 3] [--seed 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tqdm.auto import tqdm  # noqa: E402

from assistant.learning import optimize_study as studies  # noqa: E402
from assistant.learning.optimize_locomo import locomo_cases  # noqa: E402
from assistant.learning.optimize_score import Batch, split  # noqa: E402
from assistant.memory.evaluation import default_path  # noqa: E402
from assistant.memory.records import HybridWeights  # noqa: E402
from assistant.memory.scoring import RelevanceWeights  # noqa: E402
from assistant.memory.tuning import RetrievalParams  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="path of locomo_dev5.json")
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--tune", type=int, default=3, help="conversations the study runs on (the rest held back)")
    parser.add_argument("--exploration", type=float, default=1.0, help="optimization.exploration_weight")
    parser.add_argument("--validation-fraction", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from assistant.embeddings.sentence_transformers import SentenceTransformerEmbedder

    started = time.perf_counter()
    path = args.data or default_path()
    cases = locomo_cases(path, SentenceTransformerEmbedder(), progress=lambda it: tqdm(list(it), desc="storing",
                                                                                       unit="conv"))
    embedded = time.perf_counter() - started
    groups = sorted({c.group for c in cases})
    tuned_on, held_back = groups[: args.tune], groups[args.tune:]
    study_cases = [c for c in cases if c.group in tuned_on]
    held = Batch([c for c in cases if c.group in held_back], k=5)
    tuning_cases, validation_cases = split(study_cases, args.validation_fraction)
    tuning, validation = Batch(tuning_cases, k=5), Batch(validation_cases, k=5)
    defaults = RetrievalParams(0.5, 5, RelevanceWeights(), HybridWeights(), 0.95)
    study = studies.open_study(None, "benchmark", args.exploration, args.seed)
    t0 = time.perf_counter()
    result = studies.run_trials(study, defaults, tuning, validation, args.trials, progress=True)
    per_trial_ms = (time.perf_counter() - t0) / max(1, len(result.outcomes)) * 1000
    best = result.best
    applied = result.applied[-1] if result.applied else None
    chosen = defaults.with_values(applied.values) if applied else defaults
    best_params = defaults.with_values(best.values) if best else defaults
    figures = {
        "defaults": held.score(defaults), "best_trial": held.score(best_params), "applied": held.score(chosen),
    }
    print(f"\nLoCoMo dev: {len(cases)} questions with evidence (categories 1-4); study on {', '.join(tuned_on)} "
          f"({len(tuning)} tuning + {len(validation)} validation questions), held back {', '.join(held_back)} "
          f"({len(held)} questions); {len(result.outcomes)} trials, {per_trial_ms:.0f} ms a trial "
          f"(embedding {embedded:.0f} s, once)")
    print(f"  tuning side:    defaults {result.baseline.recall:.3f}  best trial {best.score.recall:.3f}")
    print(f"  validation:     defaults {result.baseline_validation.recall:.3f}  applied "
          f"{(applied.validation.recall if applied else result.baseline_validation.recall):.3f}")
    for name, score in figures.items():
        print(f"  held back, R@5: {name:10s} {score.recall:.3f}  (mean memories per prompt {score.injected:.2f})")
    base = figures["defaults"].recall
    for name in ("best_trial", "applied"):
        ratio = figures[name].recall / base if base else float("inf")
        print(f"  {name} / defaults on the held-back conversations: {ratio:.2f}x")
    print(f"  applied parameters: {json.dumps(chosen.flat())}")
    not_worse = figures["applied"].recall >= base
    print(f"applied R@5 on held-back >= defaults: {'YES' if not_worse else 'NO'}  [{time.perf_counter() - started:.0f} s]")
    if args.json:
        print(json.dumps({
            "benchmark": "optimization", "trials": len(result.outcomes), "tuned_on": tuned_on, "held_back": held_back,
            "held_back_r5": {k: round(v.recall, 4) for k, v in figures.items()},
            "tuning_r5": {"defaults": round(result.baseline.recall, 4), "best_trial": round(best.score.recall, 4)},
            "applied_trials": len(result.applied), "applied": chosen.flat(), "ms_per_trial": round(per_trial_ms, 1),
            "not_worse": not_worse,
        }))
    return 0 if not_worse else 1


if __name__ == "__main__":
    sys.exit(main())
