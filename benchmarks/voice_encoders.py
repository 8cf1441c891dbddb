"""Speaker encoders side by side: the d-vector (``d-vector``) against Resemblyzer's GE2E (``ge2e``) on the same trials.

Data: 5 LibriSpeech test-other readers x 10 clips (``shared/benchmarks/speaker``, read in place; 4 men, 1
woman; 2.5-19.9 s, 381 s in all). Neither encoder was trained on LibriSpeech test-other, but these are
the dev readers (the figures are dev figures, not "unseen"). Per engine:

- **pairs**: the cosine of every pair of clips (225 same-reader, 1,000 different-reader): EER.
- **centroids** (the enrolment protocol of ``SpeakerRegistry``): each reader enrolled with 3 clips, the
  centroid being the mean of the normalised embeddings, re-normalised; every clip not used for enrolment
  (of every reader) scored against every reader's centroid. Three folds (clips 0-2, 3-5, 6-8 enrolled):
  105 genuine and 420 impostor trials. EER; genuine and impostor acceptance at the raw-cosine floor
  0.75 (the spec's ``match_threshold``, accepted when ``score > 0.75``); the score ranges; how far the
  genuine scores sit above the floor and how many fall at or below it (per reader too); impostor
  acceptance at the threshold that accepts 90% of genuine trials; closed-set accuracy (best centroid).
  With 3-clip centroids both encoders separate these readers completely (EER 0), so the scale-free
  separation d' (distance of the means over the pooled standard deviation) and the gap between the
  lowest genuine and the highest impostor score say more. Only one reader is a woman: same-sex impostor
  trials here are men against men.
- **cost**, each engine in a fresh process holding numpy and the clips: the import time and RSS of its
  runtime (onnxruntime, torch; a served assistant already holds both), then the model's load time and
  RSS growth (after load, and after embedding every clip), and embedding time per second of audio
  (median over the clips, after one warm-up clip), on one thread as the engines are configured.
- **trim** (``--trim``): both engines again on the clips with long silences cut by the project's Silero
  VAD the way Resemblyzer's ``preprocess_wav`` cuts them with webrtcvad (speech flags per 32 ms chunk,
  moving average over 8 chunks, dilated by 7 chunks).

    .venv/bin/python benchmarks/voice_encoders.py [--limit N] [--trim] [--json]

Measured (all 50 clips, 2 shared cores; d-vector | ge2e): pairs EER 0.89% | 0.05%, d' 4.5 | 6.0;
centroids EER 0% | 0%, d' 4.7 | 6.6, genuine accepted at 0.75 98.1% | 100% (2 | 0 of 105 at or below
it, lowest 0.725 | 0.855), impostors accepted at 0.75 0% | 0.7% (0 | 3 of 420: GE2E's impostor scores
sit higher, median 0.24 | 0.55, max 0.678 | 0.764); embedding 36-45 | 21-24 ms per second of audio;
runtime import 0.05 s, 19 MB (onnxruntime) | 2.8 s, 179 MB (torch); model load 1.5 | 2.7-3.8 s,
+93 | +107 MB, +233 | +131 MB after embedding every clip. Silero trimming made both worse on the pairs.

``--limit N`` keeps the first N clips per reader (at least 4). Takes about a minute on two cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np
from tqdm.auto import tqdm

from assistant.voice.audio import decode_audio, duration_s, float_to_pcm, pcm_to_float
from assistant.voice.speaker import cosine, normalise
from assistant.voice.speakers import equal_error_rate
from benchmarks.voice import pair_scores

ENGINES = ("d-vector", "ge2e")
FLOOR = 0.75  # the spec's match_threshold: a raw-cosine floor
ENROLLED = 3
GENUINE_ACCEPT = 0.90  # the target: >= 90% of genuine trials accepted


def speaker_dir() -> Path:
    """``shared/benchmarks/speaker`` next to the checkout or next to one of its parents (worktrees)."""
    for parent in ROOT.parents:
        candidate = parent / "shared" / "benchmarks" / "speaker"
        if candidate.is_dir():
            return candidate
    raise SystemExit("the LibriSpeech benchmark clips (shared/benchmarks/speaker) are not next to the checkout")


def reader_sexes(folder: Path) -> dict[str, str]:
    sexes = {}
    for line in (folder / "SPEAKERS.TXT").read_text(encoding="utf-8").splitlines():
        fields = [f.strip() for f in line.split("|")]
        if not line.startswith(";") and len(fields) >= 2:
            sexes[fields[0]] = fields[1]
    return sexes


def load_clips(limit: int | None = None) -> dict[str, list[bytes]]:
    """Reader id -> the PCM of its clips, in file order."""
    folder = speaker_dir()
    return {d.name: [decode_audio(f) for f in sorted(d.glob("*.flac"))[:limit]]
            for d in sorted(folder.iterdir()) if d.is_dir()}


# --- Resemblyzer's silence trimming, with Silero ------------------------------------------------------------


def trim_long_silences(pcm: bytes, vad: Any, width: int = 8, max_silence: int = 6) -> bytes:
    """Resemblyzer's ``trim_long_silences`` with the project's VAD in place of webrtcvad: speech flags
    per chunk, a moving average over ``width`` chunks rounded, dilated by ``max_silence + 1`` chunks."""
    from scipy.ndimage import binary_dilation

    step = vad.chunk_samples * 2
    pcm = pcm[:len(pcm) - len(pcm) % step]
    vad.reset()
    flags = np.array([vad.speech_probability(pcm[i:i + step]) >= 0.5 for i in range(0, len(pcm), step)], float)
    padded = np.concatenate([np.zeros((width - 1) // 2), flags, np.zeros(width // 2)])
    total = np.cumsum(padded)
    total[width:] = total[width:] - total[:-width]
    mask = np.round(total[width - 1:] / width).astype(bool)
    mask = binary_dilation(mask, np.ones(max_silence + 1))
    samples = pcm_to_float(pcm)[np.repeat(mask, vad.chunk_samples)]
    return float_to_pcm(samples)


# --- one engine, in its own process ------------------------------------------------------------------------


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


RUNTIMES = {"d-vector": "onnxruntime", "ge2e": "torch"}  # what each engine runs on


def measure_engine(engine: str, clips: dict[str, list[bytes]]) -> dict[str, Any]:
    """Load ``engine`` and embed every clip (in a fresh process: the load and RSS figures are its own).
    The engine's runtime is imported first and counted apart: a server that loads the MiniLM memory
    embedder (torch) and Silero/piper (onnxruntime) already holds both."""
    from importlib import import_module

    from assistant.config import SpeakerIdSettings

    base = rss_mb()
    started = time.perf_counter()
    import_module(RUNTIMES[engine])
    runtime_s = time.perf_counter() - started
    runtime = rss_mb()
    started = time.perf_counter()
    from assistant.voice.speaker import create_embedder

    embedder = create_embedder(SpeakerIdSettings(engine=engine))
    load_s = time.perf_counter() - started
    loaded = rss_mb()
    first = next(iter(clips.values()))[0]
    embedder.embed(first)  # warm-up
    embeddings: dict[str, list[list[float]]] = {}
    per_second: list[float] = []
    total_s = audio_s = 0.0
    for reader, pcm in tqdm([(r, p) for r, pcms in clips.items() for p in pcms], desc=engine, unit="clip"):
        started = time.perf_counter()
        vector = embedder.embed(pcm)
        took = time.perf_counter() - started
        embeddings.setdefault(reader, []).append(vector.tolist())
        per_second.append(took / duration_s(pcm))
        total_s += took
        audio_s += duration_s(pcm)
    return {
        "dim": int(embedder.dim),
        "runtime": RUNTIMES[engine],
        "runtime_import_s": round(runtime_s, 3),
        "runtime_rss_mb": round(runtime - base, 1),
        "load_s": round(load_s, 3),
        "rss_growth_load_mb": round(loaded - runtime, 1),
        "rss_growth_total_mb": round(rss_mb() - runtime, 1),
        "embed_ms_per_audio_s_median": round(1000 * statistics.median(per_second), 2),
        "embed_ms_per_audio_s_overall": round(1000 * total_s / audio_s, 2),
        "embeddings": embeddings,
    }


def in_fresh_process(engine: str, clips: dict[str, list[bytes]]) -> dict[str, Any]:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(measure_engine, engine, clips).result()


# --- scores and figures ---------------------------------------------------------------------------------


def folds(clips_per_reader: int, enrolled: int = ENROLLED) -> list[range]:
    """Disjoint enrolment sets (clips 0-2, 3-5, 6-8) that leave at least one clip of each reader to test."""
    return [range(start, start + enrolled) for start in range(0, clips_per_reader - enrolled, enrolled)]


def centroid_trials(embeddings: dict[str, list[np.ndarray]]) -> list[tuple[str, str, float]]:
    """``(clip's reader, centroid's reader, cosine)`` for every fold, test clip and centroid."""
    trials = []
    for fold in folds(min(len(v) for v in embeddings.values())):
        centroids = {r: normalise(np.mean([vectors[i] for i in fold], axis=0)) for r, vectors in embeddings.items()}
        for reader, vectors in embeddings.items():
            for i, vector in enumerate(vectors):
                if i not in fold:
                    trials += [(reader, other, cosine(vector, c)) for other, c in centroids.items()]
    return trials


def spread(scores: np.ndarray) -> dict[str, float]:
    return {name: round(float(f(scores)), 4) for name, f in (
        ("min", np.min), ("p5", lambda s: np.percentile(s, 5)), ("median", np.median),
        ("p95", lambda s: np.percentile(s, 95)), ("max", np.max))}


def d_prime(genuine: np.ndarray, impostor: np.ndarray) -> float:
    """Separation independent of the score scale: the means' distance over the pooled standard deviation."""
    pooled = np.sqrt((np.var(genuine) + np.var(impostor)) / 2)
    return float((np.mean(genuine) - np.mean(impostor)) / pooled) if pooled > 0 else float("inf")


def accept_figures(genuine: np.ndarray, impostor: np.ndarray, floor: float = FLOOR) -> dict[str, Any]:
    eer, at = equal_error_rate(genuine, impostor)
    at_ga = float(np.quantile(genuine, 1 - GENUINE_ACCEPT, method="lower"))  # accepted: score > this
    at_ga = np.nextafter(at_ga, -1.0)
    return {
        "genuine": int(genuine.size), "impostor": int(impostor.size),
        "eer": round(eer, 4), "eer_threshold": round(at, 4),
        "genuine_accept": round(float(np.mean(genuine > floor)), 4),
        "impostor_accept": round(float(np.mean(impostor > floor)), 4),
        "genuine_scores": spread(genuine), "impostor_scores": spread(impostor),
        "d_prime": round(d_prime(genuine, impostor), 3),
        "gap": round(float(genuine.min() - impostor.max()), 4),
        "ga90_threshold": round(float(at_ga), 4),
        "impostor_accept_at_ga90": round(float(np.mean(impostor > at_ga)), 4),
    }


def centroid_figures(embeddings: dict[str, list[np.ndarray]], sexes: dict[str, str],
                     floor: float = FLOOR) -> dict[str, Any]:
    trials = centroid_trials(embeddings)
    genuine = np.array([s for a, b, s in trials if a == b])
    impostor = np.array([s for a, b, s in trials if a != b])
    same_sex = np.array([s for a, b, s in trials if a != b and sexes.get(a) == sexes.get(b)])
    margin = genuine - floor
    per_reader = {}
    for reader in embeddings:
        own = np.array([s for a, b, s in trials if a == b == reader])
        taken = np.array([s for a, b, s in trials if b == reader and a != reader])
        per_reader[reader] = {"sex": sexes.get(reader, "?"), "genuine_min": round(float(own.min()), 4),
                              "genuine_at_or_below_floor": int(np.sum(own <= floor)),
                              "impostor_max": round(float(taken.max()), 4),
                              "impostors_accepted": int(np.sum(taken > floor))}
    by_clip: dict[tuple[str, int], list[tuple[str, float]]] = {}
    for n, (a, b, s) in enumerate(trials):
        by_clip.setdefault((a, n // len(embeddings)), []).append((b, s))
    best = [max(scores, key=lambda x: x[1]) for scores in by_clip.values()]
    closed_set = sum(1 for (reader, _), (winner, _) in zip(by_clip, best, strict=True) if winner == reader)
    return {
        "folds": len(folds(min(len(v) for v in embeddings.values()))),
        **accept_figures(genuine, impostor, floor),
        "genuine_margin_over_floor": {"min": round(float(margin.min()), 4),
                                      "p5": round(float(np.percentile(margin, 5)), 4),
                                      "median": round(float(np.median(margin)), 4)},
        "genuine_at_or_below_floor": int(np.sum(genuine <= floor)),
        "same_sex_impostor_scores": spread(same_sex) if same_sex.size else None,
        "same_sex_impostor_accept": round(float(np.mean(same_sex > floor)), 4) if same_sex.size else None,
        "closed_set_accuracy": round(closed_set / len(best), 4),
        "per_reader": per_reader,
    }


def engine_figures(measured: dict[str, Any], sexes: dict[str, str]) -> dict[str, Any]:
    embeddings = {r: [np.asarray(v, dtype=np.float32) for v in vs] for r, vs in measured["embeddings"].items()}
    same, different = pair_scores(embeddings)
    cost = {k: v for k, v in measured.items() if k != "embeddings"}
    return {**cost, "pairs": accept_figures(np.array(same), np.array(different)),
            "centroids": centroid_figures(embeddings, sexes)}


def run(limit: int | None = None, *, trim: bool = False) -> dict[str, Any]:
    """Every engine on the same clips (and, with ``trim``, on the Silero-trimmed clips too)."""
    if limit is not None and limit < ENROLLED + 1:
        raise ValueError(f"--limit needs at least {ENROLLED + 1} clips per reader")
    clips = load_clips(limit)
    sexes = reader_sexes(speaker_dir())
    variants = {engine: (engine, clips) for engine in ENGINES}
    if trim:
        from assistant.config import VadSettings
        from assistant.voice.vad import create_vad

        vad = create_vad(VadSettings())
        trimmed = {r: [trim_long_silences(p, vad) for p in tqdm(pcms, desc=f"trim {r}", unit="clip")]
                   for r, pcms in clips.items()}
        kept = sum(len(p) for ps in trimmed.values() for p in ps) / sum(len(p) for ps in clips.values() for p in ps)
        variants |= {f"{engine}+trim": (engine, trimmed) for engine in ENGINES}
    results = {name: engine_figures(in_fresh_process(engine, data), sexes) for name, (engine, data) in variants.items()}
    audio = sum(duration_s(p) for ps in clips.values() for p in ps)
    summary = {"readers": len(clips), "clips_per_reader": min(len(v) for v in clips.values()),
               "audio_s": round(audio, 1), "floor": FLOOR}
    if trim:
        summary["trim_kept"] = round(kept, 4)
    return {"data": summary, "engines": results}


# --- printing -------------------------------------------------------------------------------------------


def print_figures(r: dict[str, Any]) -> None:
    d = r["data"]
    print(f"Speaker encoders: {d['readers']} LibriSpeech readers x {d['clips_per_reader']} clips "
          f"({d['audio_s']:.0f} s), raw-cosine floor {d['floor']}"
          + (f"; Silero trimming kept {d['trim_kept']:.1%} of the audio" if "trim_kept" in d else ""))
    names = list(r["engines"])
    rows: list[tuple[str, Any]] = [
        ("runtime import: s, MB", lambda e: f"{e['runtime']} {e['runtime_import_s']:.2f}, "
                                            f"{e['runtime_rss_mb']:.0f}"),
        ("model load s", lambda e: f"{e['load_s']:.2f}"),
        ("RSS growth: load / all, MB", lambda e: f"{e['rss_growth_load_mb']:.0f} / {e['rss_growth_total_mb']:.0f}"),
        ("embed ms per s of audio", lambda e: f"{e['embed_ms_per_audio_s_median']:.1f}"),
        ("pairs: EER", lambda e: f"{e['pairs']['eer']:.2%} @{e['pairs']['eer_threshold']:.3f}"),
        ("pairs: d'", lambda e: f"{e['pairs']['d_prime']:.2f}"),
        ("pairs: genuine > 0.75", lambda e: f"{e['pairs']['genuine_accept']:.1%}"),
        ("pairs: impostor > 0.75", lambda e: f"{e['pairs']['impostor_accept']:.1%}"),
        ("centroids: EER", lambda e: f"{e['centroids']['eer']:.2%} @{e['centroids']['eer_threshold']:.3f}"),
        ("centroids: d' / gap (gen min - imp max)", lambda e: f"{e['centroids']['d_prime']:.2f} / "
                                                              f"{e['centroids']['gap']:+.3f}"),
        ("centroids: genuine accept", lambda e: f"{e['centroids']['genuine_accept']:.1%}"),
        ("centroids: impostor accept", lambda e: f"{e['centroids']['impostor_accept']:.1%}"),
        ("genuine <= 0.75 (of N)", lambda e: f"{e['centroids']['genuine_at_or_below_floor']}/"
                                             f"{e['centroids']['genuine']}"),
        ("genuine min / p5 / median", lambda e: "{min:.3f} / {p5:.3f} / {median:.3f}".format(
            **e["centroids"]["genuine_scores"])),
        ("impostor median / p95 / max", lambda e: "{median:.3f} / {p95:.3f} / {max:.3f}".format(
            **e["centroids"]["impostor_scores"])),
        ("margin over 0.75: min / median", lambda e: "{min:+.3f} / {median:+.3f}".format(
            **e["centroids"]["genuine_margin_over_floor"])),
        ("same-sex impostor p95 / max", lambda e: "{p95:.3f} / {max:.3f}".format(
            **e["centroids"]["same_sex_impostor_scores"]) if e["centroids"]["same_sex_impostor_scores"] else "-"),
        ("impostor accept at GA 90%", lambda e: f"{e['centroids']['impostor_accept_at_ga90']:.1%} "
                                                f"@{e['centroids']['ga90_threshold']:.3f}"),
        ("closed-set accuracy", lambda e: f"{e['centroids']['closed_set_accuracy']:.1%}"),
    ]
    print(f"  {'':<38}" + "".join(f"{n:>24}" for n in names))
    for label, cell in rows:
        print(f"  {label:<38}" + "".join(f"{cell(r['engines'][n]):>24}" for n in names))
    print("  per reader (centroids): genuine min, genuine <= 0.75, impostor max against it")
    for reader, first in r["engines"][names[0]]["centroids"]["per_reader"].items():
        cells = "".join("{genuine_min:>14.3f} {genuine_at_or_below_floor:>2} {impostor_max:>6.3f}".format(
            **r["engines"][n]["centroids"]["per_reader"][reader]) for n in names)
        print(f"    {reader} ({first['sex']}){cells}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N clips per reader (N >= 4)")
    parser.add_argument("--trim", action="store_true", help="also measure on Silero-trimmed clips")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = {**run(args.limit, trim=args.trim), "wall_s": round(time.perf_counter() - started, 1)}
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print_figures(results)
        print(f"  ({results['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
