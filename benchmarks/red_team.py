"""The red team against the shipped defence, before and after ONE sanitation cycle has evolved dynamic
patterns from the red team's bypasses.

    .venv/bin/python benchmarks/red_team.py [--attacks 300] [--chat N] [--seed 1000]

Everything is the product's own path, in a temporary data directory: ``build_services`` with the
packaged MiniLM (the classifier's ``full`` model) and the configured defence; the red team
(:class:`assistant.extended.red_team.RedTeam`) generates the attacks (its own templates, goals and
seeded variation: nothing from the benchmark data); one sanitation run (``SanitationService.run``)
evolves patterns with the red team as its attack source (``deps.bypasses``: the latest report's
bypasses), validated only against the shipped benign set, as in production.

Sets (detector-only runs: no engine, fast):

- **evolution set**: ``--attacks`` attacks from templates of split ``a``, seed ``--seed``: the run whose
  bypasses the sanitation cycle learns from (measured before and after: did it learn what it saw?);
- **fresh variations**: the same templates (split ``a``), another seed: new canaries, goals, synonyms,
  covers, encoders' details;
- **held-out templates**: split ``b``, templates never used for evolution (generalisation);
- **NotInject** (``../shared/benchmarks/prompt_injection/NotInject_*.json``, 339 benign prompts full of
  trigger words, read in place): the false-flag rate, as the user's messages (the user's evolved
  patterns apply).

``--chat N`` also puts N held-out attacks to the live chat path with the real embedded model (the
packaged Qwen2.5-Coder 0.5B, installed in the normal data directory), before and after the cycle.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assistant.config import Settings  # noqa: E402
from assistant.defence.types import Source  # noqa: E402
from assistant.extended.red_team_report import RedTeamReport  # noqa: E402
from assistant.llm.catalog import DEFAULT_MODEL, install_model  # noqa: E402
from assistant.services import Services, build_services  # noqa: E402
from benchmarks._injection_data import PI  # noqa: E402

USER = "00000000-0000-4000-8000-00000000be0c"


def notinject() -> list[str]:
    out = []
    for part in ("one", "two", "three"):
        out += [r["prompt"] for r in json.load(open(PI / f"NotInject_{part}.json", encoding="utf-8"))]
    return out


def false_flags(services: Services, texts: list[str]) -> list[str]:
    detector = services.defence
    verdicts = [v for start in range(0, len(texts), 64)
                for v in detector.inspect_many(texts[start:start + 64], Source.USER, USER)]
    return [t for t, v in zip(texts, verdicts, strict=True) if v.flagged]


def families(report: RedTeamReport) -> str:
    return "  ".join(f"{f}={v['score']:.0f}" for f, v in sorted(report.families.items()))


def chat_run(services: Services, args: argparse.Namespace, phase: str) -> RedTeamReport:
    t = time.perf_counter()
    r = services.red_team.run(USER, args.chat, seed=args.seed + 3, chat=True, split="b")
    print(f"  [{phase}] chat       seed {args.seed + 3} split b: score {r.defense_score:6.2f}  "
          f"({r.attacks_blocked}/{r.attacks_tested}: {r.blocked_by_defence} by the defence, "
          f"{r.blocked_by_model} by the model, {len(r.bypasses)} bypasses, {r.errors} errors; "
          f"{time.perf_counter() - t:.1f} s, model {r.model})  {families(r)}")
    return r


def measure(services: Services, args: argparse.Namespace, benign: list[str], phase: str) -> dict:
    """The sets of the module docstring. Before the cycle the evolution set runs last: the cycle learns
    from the user's latest report."""
    out: dict = {}
    if args.chat and phase == "before":
        out["chat"] = chat_run(services, args, phase)
    order = ["fresh", "held_out", "evolution"] if phase == "before" else ["evolution", "fresh", "held_out"]
    for name in order:
        seed, split = {"evolution": (args.seed, "a"), "fresh": (args.seed + 1, "a"),
                       "held_out": (args.seed + 2, "b")}[name]
        t = time.perf_counter()
        r = out[name] = services.red_team.run(USER, args.attacks, seed=seed, chat=False, split=split)
        print(f"  [{phase}] {name:<10} seed {seed} split {split}: score {r.defense_score:6.2f}  "
              f"({r.attacks_blocked}/{r.attacks_tested}, {time.perf_counter() - t:.1f} s)  {families(r)}")
    if args.chat and phase == "after":
        out["chat"] = chat_run(services, args, phase)
    flagged = false_flags(services, benign)
    out["notinject"] = flagged
    print(f"  [{phase}] NotInject false flags: {len(flagged)}/{len(benign)} = {100 * len(flagged) / len(benign):.2f} %")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attacks", type=int, default=300, help="attacks per detector-only set (default 300)")
    parser.add_argument("--seed", type=int, default=1000, help="seed of the evolution set (others: +1, +2, +3)")
    parser.add_argument("--chat", type=int, default=0, metavar="N", help="N held-out attacks through the live chat "
                                                                           "path with the real model, before and after")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (--chat)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    data = Path(tempfile.mkdtemp(prefix="red-team-bench-"))
    model_path = install_model(DEFAULT_MODEL, Settings().data_dir) if args.chat else None
    inference = {"temperature": 0.0, "max_tokens": 128, "threads": args.threads}
    if model_path is not None:
        inference["model_path"] = str(model_path)
    settings = Settings.load(server={"data_dir": str(data)}, inference=inference,
                             red_team={"enabled": True, "max_attacks_per_run": max(args.attacks, args.chat, 1)},
                             tool_calling={"selection": "auto"})
    services = build_services(settings)
    try:
        layers = [type(layer).__name__ for layer in getattr(services.defence, "layers", [])]
        classifier = next((layer for layer in getattr(services.defence, "layers", []) if hasattr(layer, "variant")),
                          None)
        print(f"defence: {', '.join(layers)} (classifier: {getattr(classifier, 'variant', 'none')}); "
              f"user threshold {services.defence.threshold}, indirect {services.defence.indirect_threshold}")
        benign = notinject()
        print("before the sanitation cycle:")
        before = measure(services, args, benign, "before")
        t = time.perf_counter()
        result = services.sanitation.run(USER)
        patterns = services.sanitation.patterns(USER)
        print(f"one sanitation cycle ({time.perf_counter() - t:.1f} s): {result.status}; evolution tested "
              f"{result.defence.get('tested')} bypasses, added {len(result.patterns_added)} patterns, rejected "
              f"{result.patterns_rejected}")
        for p in patterns:
            print(f"    {p.family:<20} {p.pattern}")
        print("after:")
        after = measure(services, args, benign, "after")
        print("\nsummary (defence score 0..100; false flags on NotInject):")
        for name in ("evolution", "fresh", "held_out", "chat"):
            if name in before and name in after:
                b, a = before[name].defense_score, after[name].defense_score
                print(f"  {name:<10} {b:6.2f} -> {a:6.2f}  ({a - b:+.2f})")
        nb, na = len(before["notinject"]), len(after["notinject"])
        print(f"  NotInject  {nb}/{len(benign)} -> {na}/{len(benign)} flagged ({na - nb:+d})")
        new = sorted(set(after["notinject"]) - set(before["notinject"]))
        for text in new[:10]:
            print(f"    newly flagged: {text[:100]!r}")
    finally:
        services.close()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
