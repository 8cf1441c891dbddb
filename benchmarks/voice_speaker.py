"""Speaker verification on the dev readers, leave-speakers-out: raw cosine against cohort normalisation.

Protocol (dev data only, ``../shared/benchmarks/speaker``: 5 LibriSpeech readers x 10 clips). Every
household is two enrolled readers (clips 0-2 of each, as the API enrols them) and one held-out reader who
is never enrolled: 5 x C(4, 2) = 30 households. The impostor cohort is built from the cohort sources of
``benchmarks/speaker_cohort.py`` *without* any clip of those three readers, so no trial speaker is in
the cohort, as on a real household. Trials:

- genuine: each enrolled reader's clips 3-9, identified against the household (right profile accepted);
- impostor: each of the held-out reader's 10 clips (accepted as anyone is a false accept).

``normalised_no_floor`` applies the calibrated threshold alone: its impostor acceptance shows whether a
threshold chosen for ``target_far`` on the cohort holds on speakers outside it.

Reported for ``raw`` (the spec's rule: best raw cosine above ``match_threshold`` 0.75) and ``normalised``
(the product's rule, :func:`assistant.voice.verification.decide`: the raw floor, then the household
threshold chosen from ``target_far`` on AS-norm scores): genuine acceptance, impostor false-accept rate,
and the verification EER over every (clip, profile) score of the households (raw cosine and AS-norm).
The per-household thresholds are summarised too.

    .venv/bin/python benchmarks/voice_speaker.py [--engine d-vector] [--top-k 100] [--far 0.01] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np

from assistant.config import SpeakerIdSettings
from assistant.voice.speakers import equal_error_rate
from assistant.voice.verification import build_household, decide
from benchmarks.speaker_cohort import clips as cohort_clips
from benchmarks.speaker_cohort import cohort_of, embed_clips

ENROLLED = 3
FLOOR = 0.75
RULES = ("raw", "normalised", "normalised_no_floor")


def run(engine: str = "d-vector", top_k: int = 100, far: float = 0.01, *, progress: bool = True,
        embedded: list | None = None) -> dict[str, Any]:
    from assistant.voice.speaker import create_embedder

    started = time.perf_counter()
    if embedded is None:
        embedder = create_embedder(SpeakerIdSettings(engine=engine))
        embedded = embed_clips(embedder.embed, list(cohort_clips()), progress=progress)
    readers: dict[str, list[np.ndarray]] = {}
    for clip, factor, vector in embedded:
        if clip.source == "librispeech" and factor == 1.0:
            readers.setdefault(clip.speaker, []).append(vector)
    outcomes = {rule: {"genuine": [], "impostor": []} for rule in RULES}
    scores = {"raw": ([], []), "normalised": ([], [])}
    thresholds = []
    for trio in itertools.combinations(sorted(readers), 3):
        cohort = cohort_of(embedded, engine, frozenset(trio))
        for held_out in trio:
            enrolled = [r for r in trio if r != held_out]
            household = build_household({r: np.stack(readers[r][:ENROLLED]) for r in enrolled}, cohort,
                                        top_k=top_k, target_far=far)
            thresholds.append(household.threshold)
            trials = [(r, v) for r in enrolled for v in readers[r][ENROLLED:]] + [(None, v) for v in readers[held_out]]
            for truth, vector in trials:
                raw, normed = household.score(vector)
                for i, r in enumerate(enrolled):
                    genuine = r == truth
                    scores["raw"][0 if genuine else 1].append(float(raw[i]))
                    if normed is not None:
                        scores["normalised"][0 if genuine else 1].append(float(normed[i]))
                best = int(np.argmax(raw))
                raw_pick = enrolled[best] if raw[best] > FLOOR else None
                decision = decide(household, vector, FLOOR)
                norm_pick = None if decision.index is None else enrolled[decision.index]
                alone = decide(household, vector, -1.0)  # the calibrated threshold alone: is its FAR the target's?
                alone_pick = None if alone.index is None else enrolled[alone.index]
                for rule, pick in (("raw", raw_pick), ("normalised", norm_pick), ("normalised_no_floor", alone_pick)):
                    if truth is None:
                        outcomes[rule]["impostor"].append(pick is not None)
                    else:
                        outcomes[rule]["genuine"].append(pick == truth)
    result: dict[str, Any] = {"engine": engine, "top_k": top_k, "target_far": far, "households": len(thresholds),
                              "genuine_trials": len(outcomes["raw"]["genuine"]),
                              "impostor_trials": len(outcomes["raw"]["impostor"])}
    for rule in RULES:
        same, different = scores.get(rule, ([], []))
        result[rule] = {
            "genuine_accepted": round(float(np.mean(outcomes[rule]["genuine"])), 4),
            "impostor_accepted": round(float(np.mean(outcomes[rule]["impostor"])), 4),
            "eer": round(equal_error_rate(same, different)[0], 4) if same and different else None,
        }
    known = [t for t in thresholds if t is not None]
    result["threshold"] = {"min": round(min(known), 3), "median": round(float(np.median(known)), 3),
                           "max": round(max(known), 3)} if known else None
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def report(r: dict[str, Any]) -> str:
    lines = [f"Speaker verification ({r['engine']}), {r['households']} households of 2 enrolled + 1 held-out "
             f"reader: {r['genuine_trials']} genuine, {r['impostor_trials']} impostor trials"]
    labels = {"raw": "raw cosine > 0.75", "normalised": f"floor + AS-norm (k {r['top_k']}, FAR {r['target_far']:.0%})",
              "normalised_no_floor": "AS-norm threshold alone (no floor)"}
    for rule, label in labels.items():
        x = r[rule]
        eer = "n/a" if x["eer"] is None else f"{x['eer']:.1%}"
        lines.append(f"  {label:<38} genuine accepted {x['genuine_accepted']:.1%}   impostors accepted "
                     f"{x['impostor_accepted']:.1%}   EER {eer}")
    if r["threshold"]:
        t = r["threshold"]
        lines.append(f"  household thresholds (AS-norm)         min {t['min']}  median {t['median']}  max {t['max']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="d-vector")
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--far", type=float, default=0.01)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.engine, args.top_k, args.far, progress=not args.json)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
