"""Voice: pipeline latency per stage, speech-to-text word error rate, wake-word hits and false alarms, speaker EER.

1. Latency: spoken questions ("Hey Jarvis, what is the capital of France?" ...) synthesised with piper are
   streamed in real time, in 40 ms chunks, by the satellite simulator over a real mosquitto broker (started
   on a free loopback port) to the voice pipeline of services built as ``assistant serve`` builds them:
   pyopen-wakeword, Silero VAD, the ge2e speaker engine (one LibriSpeech reader enrolled, so
   identification runs; piper's voice is unknown and the default voice user answers), faster-whisper
   tiny.en, the embedded model (llama.cpp, 2 threads, temperature 0) and piper. Per exchange,
   ``VoiceRun.latencies()``: each stage's seconds, ``eos_to_audio_s`` (end of speech detected -> first
   output frame published), ``non_llm_s`` (that minus the ``llm`` stage, which is the whole chat call:
   memory retrieval, generation, storing) and its ratio to the captured utterance's length.
   Target: ``non_llm_s <= 0.6 x utterance``, judged on the mean ratio. The VAD's end-of-speech silence
   (``silence_ms`` 700) passes before the end of speech is detected, so it is in none of these figures.
   One warm-up question runs first (lazy loads, llama.cpp's prompt cache) and is reported apart.
2. Speech-to-text (``benchmarks/voice_stt.py``) per Whisper model size (tiny.en packaged; base.en and
   small.en when ``--model-dir`` gives them): word error rate raw and Whisper-normalised on the LibriVox clips
   and on piper-spoken number-heavy sentences, names heard with and without the enrolled-names prompt, and
   the real-time factor (transcription time over the clips' own duration, the baseline from the same run).
3. Wake words, every packaged word active at sensitivity 0.5: hits on ``hey_mycroft_test.wav``,
   ``alexa_test.wav`` and the piper-spoken "hey jarvis ..." questions; false alarms on speech with no wake
   word (``office_lights`` clips, ``hey_jane.wav``, the LibriVox clips), per hour of that audio.
4. Speakers (5 LibriSpeech readers x 10 clips in ``../shared/benchmarks/speaker``), the default engine's
   embeddings: the equal error rate over all same/different pairs, the share of same pairs above the spec's
   ``match_threshold`` 0.75 and of different pairs at or below it, and identification accuracy with
   3 clips per reader enrolled (``SpeakerRegistry`` on an in-memory store) and the other clips identified.
5. Verification (``benchmarks/voice_speaker.py``), ge2e and d-vector: 30 households of two enrolled readers
   and one held-out reader, the cohort without any of them; genuine acceptance, impostor false accepts and
   EER for the raw floor alone, the floor plus the AS-norm household threshold, and that threshold alone.
6. Wake-word calibration (``benchmarks/voice_wake.py``): per word, false alarms per hour at sensitivity 0.5 and
   at the packaged calibrated thresholds, every word enabled, on a held-out half; hits on positives.

    .venv/bin/python benchmarks/voice.py [--part all|latency|stt|wake|speaker|verification|wake_calibration] [--limit N] [--json]

``--limit N`` keeps the first N questions, LibriVox clips and clips per reader. Everything takes about
1.5-3 minutes on two cores, most of it the latency part (real-time streaming and playback, generation).
"""

from __future__ import annotations

import argparse
import getpass
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np
from tqdm.auto import tqdm

from assistant.config import Settings, SpeakerIdSettings, TtsSettings, WakeWordSettings
from assistant.voice.audio import decode_audio, duration_s, silence
from assistant.voice.speaker import cosine
from assistant.voice.speakers import SpeakerRegistry, SpeakerStore, equal_error_rate
from assistant.voice.stt import SpeechToText, word_error_rate
from assistant.voice.wake import PACKAGED_WORDS, WakeWordEngine, scan

DATA = ROOT.parent / "shared" / "benchmarks"
LIBRIVOX = DATA / "speech" / "librivox"
WAKEWORD = DATA / "wakeword"
SPEAKERS = DATA / "speaker"
MOSQUITTO = "/usr/sbin/mosquitto"

QUESTIONS = (
    "Hey Jarvis, what is the capital of France?",
    "Hey Jarvis, how many days are in a week?",
    "Hey Jarvis, what colour is the sky?",
    "Hey Jarvis, what is two plus two?",
    "Hey Jarvis, what is the opposite of hot?",
    "Hey Jarvis, which animal says moo?",
)
WARM_UP = "Hey Jarvis, say hello."
RECORDED_POSITIVES = {"hey_mycroft": WAKEWORD / "hey_mycroft_test.wav", "alexa": WAKEWORD / "alexa_test.wav"}
TARGET_RATIO = 0.6  # non-LLM time at most 0.6 x the utterance's length
SENSITIVITY = 0.5
MATCH_THRESHOLD = 0.75
ENROLLED = 3
LATENCY_KEYS = ("speaker", "stt", "llm", "tts", "publish", "eos_to_audio_s", "non_llm_s", "utterance_s",
                "non_llm_ratio")
LEAD_S, TAIL_S = 0.5, 1.0  # silence around a clip: a quiet room before, time for the models to decide after
FOLLOW_UP_MS = 500  # short, so each question gets a fresh session quickly
REPLY_TIMEOUT_S = 180.0


# --- data ----------------------------------------------------------------------------------------------


def speak(texts: Sequence[str], *, progress: Callable[[Any], Any] = lambda it: it) -> dict[str, bytes]:
    """Each text spoken by piper (the packaged joe voice), PCM16 16 kHz mono."""
    from assistant.voice.tts import create_tts

    tts = create_tts(TtsSettings())
    return {text: tts.synthesize(text) for text in progress(texts)}


def librivox_clips(limit: int | None = None) -> list[tuple[str, bytes, str]]:
    """(name, PCM, reference transcript) of each LibriVox clip, in name order."""
    clips = sorted(LIBRIVOX.glob("*.wav"))[:limit]
    return [(c.stem, decode_audio(c), c.with_suffix(".txt").read_text(encoding="utf-8")) for c in clips]


def wake_negatives() -> list[tuple[str, bytes]]:
    """Recorded speech with no packaged wake word in it (the LibriVox clips are added by the caller)."""
    paths = sorted([*WAKEWORD.glob("office_lights/negative/*.wav"), *WAKEWORD.glob("office_lights/positive/*.wav"),
                    *WAKEWORD.glob("office_lights/*.wav"), WAKEWORD / "hey_jane.wav"])
    return [(p.name, decode_audio(p)) for p in paths]


def speaker_clips(limit: int | None = None) -> dict[str, list[bytes]]:
    """Reader id -> the PCM of its clips, in file order."""
    return {d.name: [decode_audio(f) for f in sorted(d.glob("*.flac"))[:limit]]
            for d in sorted(SPEAKERS.iterdir()) if d.is_dir()}


# --- 1. pipeline latency --------------------------------------------------------------------------------


@dataclass
class RunFigures:
    question: str
    spoken_s: float  # the whole spoken question, wake phrase included
    latencies: dict[str, float] = field(default_factory=dict)
    transcript: str = ""
    reply: str = ""
    error: str | None = None


def target_met(ratio: float, target: float = TARGET_RATIO) -> bool:
    return ratio <= target


def latency_summary(runs: Sequence[RunFigures], target: float = TARGET_RATIO) -> dict[str, Any]:
    """Mean and max of every stage over the complete runs (a stage that did not run took 0 s), the
    per-run non-LLM ratios, their mean, and the verdict on that mean."""
    complete = [r.latencies for r in runs if r.error is None and "non_llm_ratio" in r.latencies]
    stages = {key: {"mean": round(statistics.fmean(values), 4), "max": round(max(values), 4)}
              for key in LATENCY_KEYS if (values := [lat.get(key, 0.0) for lat in complete])}
    ratios = [round(lat["non_llm_ratio"], 4) for lat in complete]
    mean_ratio = round(statistics.fmean(ratios), 4) if ratios else None
    return {
        "questions": len(runs),
        "complete": len(complete),
        "failed": [{"question": r.question, "error": r.error} for r in runs if r.error is not None],
        "stages_s": stages,
        "non_llm_ratios": ratios,
        "mean_non_llm_ratio": mean_ratio,
        "target_ratio": target,
        "runs_within_target": sum(target_met(r, target) for r in ratios),
        "target": "PASS" if mean_ratio is not None and target_met(mean_ratio, target) else "FAIL",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def mosquitto(root: Path) -> Iterator[int]:
    """A mosquitto broker on a free loopback port (anonymous, no persistence), stopped by its PID."""
    port = free_port()
    lines = [f"listener {port} 127.0.0.1", "allow_anonymous true", "persistence false",
             f"log_dest file {root / 'mosquitto.log'}"]
    if os.geteuid() == 0:
        lines.append(f"user {getpass.getuser()}")  # as root, mosquitto would switch to a "mosquitto" user
    config = root / "mosquitto.conf"
    config.write_text("\n".join(lines) + "\n")
    process = subprocess.Popen([MOSQUITTO, "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mosquitto did not start on port {port}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def run_figures(question: str, spoken: bytes, runs: Sequence[Any]) -> RunFigures:
    """The figures of the exchange among ``runs`` (the pipeline's new runs) that published audio."""
    figures = RunFigures(question, round(duration_s(spoken), 3))
    answered = [r for r in runs if r.first_audio is not None]
    if not answered:
        failures = [e.summary() for r in runs for e in r.events if e.kind in ("engine_error", "no_speech")]
        figures.error = failures[0] if failures else "no wake word detected" if not runs else "no reply published"
        return figures
    run = answered[0]
    events = {e.kind: e for e in run.events}
    figures.latencies = {k: round(v, 4) for k, v in run.latencies().items()}
    figures.transcript = getattr(events.get("transcript"), "text", "")
    figures.reply = getattr(events.get("response"), "text", "")
    return figures


def measure_latency(questions: Sequence[str], model_path: Path, *,
                    progress: Callable[[Any], Any] = lambda it: it) -> tuple[list[RunFigures], RunFigures]:
    """Ask each question through mosquitto and the satellite simulator; (figures per question, warm-up)."""
    from assistant.config import MqttSettings
    from assistant.services import build_services
    from assistant.voice.satellite import Satellite

    spoken = speak([WARM_UP, *questions])
    with tempfile.TemporaryDirectory(prefix="voice-bench-") as tmp, mosquitto(Path(tmp)) as port:
        mqtt = {"host": "127.0.0.1", "port": port, "topic_prefix": "bench"}
        settings = Settings.load(
            server={"data_dir": str(Path(tmp) / "data"), "log_level": "warning"},
            inference={"model_path": str(model_path), "threads": 2, "temperature": 0.0, "max_tokens": 48},
            security={"rate_limit_enabled": False},
            voice={"mqtt": mqtt, "conversation": {"follow_up_window_ms": FOLLOW_UP_MS}},
        )
        services = build_services(settings)
        try:
            voice = services.voice
            reader = next(iter(speaker_clips(ENROLLED).values()))
            for pcm in reader:  # one enrolled profile, so the speaker stage runs
                voice.speakers.enroll(services.keys.owner_user_id(), "reader", pcm)
            pipeline = voice.start(services.chat)
            room = voice.rooms.create("Bench")

            def ask(question: str) -> RunFigures:
                seen = {r.id for r in pipeline.runs}
                satellite = Satellite(room.id, MqttSettings(**mqtt), heartbeat_secs=1.0)
                satellite.run(silence(LEAD_S) + spoken[question], reply_timeout=REPLY_TIMEOUT_S)
                deadline = time.monotonic() + 30
                while voice.sessions.get_active_session(room.id) is not None and time.monotonic() < deadline:
                    time.sleep(0.1)  # the follow-up window ends the session: the next question needs the wake word
                return run_figures(question, spoken[question], [r for r in pipeline.runs if r.id not in seen])

            warm_up = ask(WARM_UP)
            return [ask(q) for q in progress(questions)], warm_up
        finally:
            services.close()


# --- 2. speech-to-text ----------------------------------------------------------------------------------


def stt_figures(stt: SpeechToText, clips: Sequence[tuple[str, bytes, str]], *,
                progress: Callable[[Any], Any] = lambda it: it) -> dict[str, Any]:
    """Corpus WER over ``clips`` (name, PCM, reference) and the real-time factor (compute / audio)."""
    transcripts = [stt.transcribe(pcm) for _, pcm, _ in progress(clips)]
    audio_s = sum(t.audio_s for t in transcripts)
    compute_s = sum(t.compute_s for t in transcripts)
    references = [ref for _, _, ref in clips]
    return {
        "clips": len(clips),
        "reference_words": sum(len(ref.split()) for ref in references),
        "wer": round(word_error_rate(references, [t.text for t in transcripts]), 4),
        "audio_s": round(audio_s, 3),
        "compute_s": round(compute_s, 3),
        "real_time_factor": round(compute_s / audio_s, 4) if audio_s else None,
        "transcripts": {name: t.text for (name, _, _), t in zip(clips, transcripts, strict=True)},
    }


# --- 3. wake words --------------------------------------------------------------------------------------


def padded(pcm: bytes) -> bytes:
    return silence(LEAD_S) + pcm + silence(TAIL_S)


def false_alarms_per_hour(false_alarms: int, negative_s: float) -> float:
    if negative_s <= 0:
        raise ValueError("false alarms per hour need some negative audio")
    return false_alarms * 3600.0 / negative_s


def wake_figures(engine: WakeWordEngine, positives: Sequence[tuple[str, str, bytes]],
                 negatives: Sequence[tuple[str, bytes]], *,
                 progress: Callable[[Any], Any] = lambda it: it) -> dict[str, Any]:
    """``positives`` are (expected word, clip name, PCM); a hit is a detection of that word. Every detection
    in a negative clip is a false alarm. Each clip is scanned from a reset engine, padded with silence;
    the negative hours count the clips' own audio, not the padding."""
    hits: dict[str, list[int]] = {}
    for word, _, pcm in progress(positives):
        engine.reset()
        found = [d.word for d in scan(engine, padded(pcm))]
        hits.setdefault(word, [0, 0])[1] += 1
        hits[word][0] += word in found
    false_alarms: dict[str, list[str]] = {}
    for name, pcm in progress(negatives):
        engine.reset()
        if words := [d.word for d in scan(engine, padded(pcm))]:
            false_alarms[name] = words
    negative_s = sum(duration_s(pcm) for _, pcm in negatives)
    count = sum(len(words) for words in false_alarms.values())
    return {
        "words": list(engine.words),
        "hits": {word: f"{hit}/{total}" for word, (hit, total) in sorted(hits.items())},
        "hit_rate": round(sum(h for h, _ in hits.values()) / max(1, sum(t for _, t in hits.values())), 4),
        "negative_clips": len(negatives),
        "negative_s": round(negative_s, 2),
        "false_alarms": count,
        "false_alarm_clips": false_alarms,
        "false_alarms_per_hour": round(false_alarms_per_hour(count, negative_s), 2),
    }


# --- 4. speakers ----------------------------------------------------------------------------------------


def pair_scores(embeddings: dict[str, list[np.ndarray]]) -> tuple[list[float], list[float]]:
    """Cosine of every pair of clips: (same-reader scores, different-reader scores)."""
    labelled = [(reader, v) for reader, vectors in embeddings.items() for v in vectors]
    same: list[float] = []
    different: list[float] = []
    for (a, va), (b, vb) in itertools.combinations(labelled, 2):
        (same if a == b else different).append(cosine(va, vb))
    return same, different


def identification(embeddings: dict[str, list[np.ndarray]], enrolled: int = ENROLLED,
                   threshold: float = MATCH_THRESHOLD) -> dict[str, int]:
    """Enrol each reader's first ``enrolled`` clips in a :class:`SpeakerRegistry` (in-memory SQLite) and
    identify the others: counts of right, unknown (score at or below the threshold) and wrong."""
    from assistant.storage.db import Database

    dim = len(next(iter(embeddings.values()))[0])
    settings = SpeakerIdSettings(embedding_dim=dim, match_threshold=threshold, min_enrollment_samples=enrolled)
    db = Database(":memory:")
    try:
        registry = SpeakerRegistry(SpeakerStore(db), settings, lambda: None)
        profiles = {}
        for reader, vectors in embeddings.items():
            for vector in vectors[:enrolled]:
                profiles[reader], _ = registry.store.add_sample("bench", f"reader {reader}", vector, settings.engine)
        counts = {"right": 0, "unknown": 0, "wrong": 0}
        for reader, vectors in embeddings.items():
            for vector in vectors[enrolled:]:
                match = registry.identify_embedding(vector)
                outcome = "unknown" if not match.known else "right" if match.speaker_id == profiles[reader].id \
                    else "wrong"
                counts[outcome] += 1
        return counts
    finally:
        db.close()


def speaker_figures(embeddings: dict[str, list[np.ndarray]], threshold: float = MATCH_THRESHOLD) -> dict[str, Any]:
    same, different = pair_scores(embeddings)
    eer, at = equal_error_rate(same, different)
    counts = identification(embeddings, threshold=threshold)
    identified = sum(counts.values())
    return {
        "readers": len(embeddings),
        "clips": sum(len(v) for v in embeddings.values()),
        "same_pairs": len(same),
        "different_pairs": len(different),
        "eer": round(eer, 4),
        "eer_threshold": round(at, 4),
        "same_above_threshold": round(float(np.mean(np.array(same) > threshold)), 4),
        "different_at_or_below_threshold": round(float(np.mean(np.array(different) <= threshold)), 4),
        "identification": counts,
        "identification_accuracy": round(counts["right"] / identified, 4) if identified else None,
    }


# --- running and printing -----------------------------------------------------------------------------------


def bar(desc: str, unit: str) -> Callable[[Any], Any]:
    return lambda it: tqdm(it, desc=desc, unit=unit)


def run_latency(limit: int | None) -> dict[str, Any]:
    from assistant.llm.catalog import DEFAULT_MODEL, install_model

    model_path = install_model(DEFAULT_MODEL, Settings().data_dir)
    runs, warm_up = measure_latency(QUESTIONS[:limit], model_path, progress=bar("voice questions", "question"))
    return {"model": DEFAULT_MODEL, **latency_summary(runs), "warm_up": asdict(warm_up),
            "runs": [asdict(r) for r in runs]}


def run_wake(limit: int | None) -> dict[str, Any]:
    from assistant.voice.wake import create_wake_word

    jarvis = speak(QUESTIONS[:limit])
    positives = [(word, path.name, decode_audio(path)) for word, path in RECORDED_POSITIVES.items()]
    positives += [("hey_jarvis", text, pcm) for text, pcm in jarvis.items()]
    negatives = wake_negatives() + [(f"{name}.wav", pcm) for name, pcm, _ in librivox_clips()]
    engine = create_wake_word(WakeWordSettings(words=list(PACKAGED_WORDS), sensitivity=SENSITIVITY))
    try:
        return {"sensitivity": SENSITIVITY, **wake_figures(engine, positives, negatives, progress=bar("wake", "clip"))}
    finally:
        engine.close()


def run_speaker(limit: int | None) -> dict[str, Any]:
    from assistant.voice.speaker import create_embedder

    settings = SpeakerIdSettings()
    embedder = create_embedder(settings)
    clips = [(reader, pcm) for reader, pcms in speaker_clips(limit).items() for pcm in pcms]
    embeddings: dict[str, list[np.ndarray]] = {}
    for reader, pcm in bar("speaker clips", "clip")(clips):
        embeddings.setdefault(reader, []).append(embedder.embed(pcm))
    return {"engine": settings.engine, **speaker_figures(embeddings)}


def run_verification(limit: int | None) -> dict[str, Any]:
    """Leave-speakers-out verification, raw cosine against the floor plus AS-norm, for both in-process
    engines (benchmarks/voice_speaker.py)."""
    from benchmarks import voice_speaker

    return {"engines": [voice_speaker.run(engine, progress=False) for engine in ("ge2e", "d-vector")]}


def run_stt_sizes(limit: int | None) -> dict[str, Any]:
    """WER raw and Whisper-normalised and the real-time factor per model size (benchmarks/voice_stt.py)."""
    from benchmarks import voice_stt

    return voice_stt.run(limit)


def run_wake_calibrated(limit: int | None) -> dict[str, Any]:
    """False alarms per hour per word, uncalibrated and at the calibrated thresholds, on a held-out half
    of 2.7 h of dev speech (benchmarks/voice_wake.py; about 17 minutes in full)."""
    from benchmarks import voice_wake

    return voice_wake.run(limit)


PARTS: dict[str, Callable[[int | None], dict[str, Any]]] = {
    "latency": run_latency, "stt": run_stt_sizes, "wake": run_wake, "speaker": run_speaker,
    "verification": run_verification, "wake_calibration": run_wake_calibrated,
}


def print_latency(r: dict[str, Any]) -> None:
    print(f"Voice pipeline latency: {r['complete']}/{r['questions']} questions answered, piper speech streamed in "
          f"real time (40 ms chunks) by the satellite simulator through mosquitto; model {r['model']}")
    print("  run  spoken  utterance  eos->audio    llm  non-llm  ratio  transcript -> reply")
    for n, run in enumerate(r["runs"], 1):
        lat = run["latencies"]
        if run["error"]:
            print(f"  {n:>3}  {run['spoken_s']:5.2f}s  failed: {run['error']}")
            continue
        print(f"  {n:>3}  {run['spoken_s']:5.2f}s  {lat['utterance_s']:8.2f}s  {lat['eos_to_audio_s']:9.2f}s  "
              f"{lat.get('llm', 0.0):5.2f}s  {lat['non_llm_s']:6.3f}s  {lat['non_llm_ratio']:5.3f}  "
              f"{run['transcript']!r} -> {run['reply'][:60]!r}")
    print("  stage                   mean       max")
    for key, values in r["stages_s"].items():
        unit = "" if key == "non_llm_ratio" else " s"
        print(f"  {key:<20} {values['mean']:8.3f}{unit:<2} {values['max']:8.3f}{unit}")
    mean = r["mean_non_llm_ratio"]
    print(f"  non-LLM time / utterance: mean {mean if mean is None else f'{mean:.3f}'} (target <= "
          f"{r['target_ratio']}): {r['target']} ({r['runs_within_target']}/{r['complete']} runs within)")
    warm = r["warm_up"]["latencies"]
    if warm:
        print(f"  warm-up question (not above): eos->audio {warm['eos_to_audio_s']:.2f} s, "
              f"llm {warm.get('llm', 0.0):.2f} s, non-LLM {warm['non_llm_s']:.3f} s")
    print("  (the VAD's 700 ms end-of-speech silence passes before the end of speech is detected: "
          "not in these figures)")


def print_wake(r: dict[str, Any]) -> None:
    print(f"Wake words ({', '.join(r['words'])} all active, sensitivity {r['sensitivity']})")
    for word, hits in r["hits"].items():
        print(f"  hits {word:<19} {hits}")
    print(f"  hit rate                 {r['hit_rate']:.1%}")
    print(f"  false alarms             {r['false_alarms']} in {r['negative_clips']} clips, "
          f"{r['negative_s']:.1f} s of speech without a wake word")
    print(f"  false alarms per hour    {r['false_alarms_per_hour']:.2f}")
    for name, words in r["false_alarm_clips"].items():
        print(f"    {name}: {', '.join(words)}")


def print_speaker(r: dict[str, Any]) -> None:
    ident = r["identification"]
    print(f"Speaker identification ({r.get('engine', 'ge2e')}, 256 dims): {r['readers']} readers x {r['clips'] // r['readers']} "
          f"clips, {r['same_pairs']} same / {r['different_pairs']} different pairs")
    print(f"  equal error rate         {r['eer']:.1%} (at cosine {r['eer_threshold']:.3f})")
    print(f"  same pairs > 0.75        {r['same_above_threshold']:.1%}")
    print(f"  different pairs <= 0.75  {r['different_at_or_below_threshold']:.1%}")
    accuracy = r["identification_accuracy"]
    print(f"  {f'identified, {ENROLLED} enrolled':<24} {'-' if accuracy is None else f'{accuracy:.1%}'} "
          f"({ident['right']} right, {ident['unknown']} unknown, {ident['wrong']} wrong)")


def print_verification(r: dict[str, Any]) -> None:
    from benchmarks import voice_speaker

    for engine in r["engines"]:
        print(voice_speaker.report(engine))


def print_stt_sizes(r: dict[str, Any]) -> None:
    from benchmarks import voice_stt

    print("\n".join(voice_stt.report(r)))


def print_wake_calibrated(r: dict[str, Any]) -> None:
    from benchmarks import voice_wake

    voice_wake.print_figures(r)


PRINTERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "latency": print_latency, "stt": print_stt_sizes, "wake": print_wake, "speaker": print_speaker,
    "verification": print_verification, "wake_calibration": print_wake_calibrated,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["all", *PARTS], default="all", help="run one part only")
    parser.add_argument("--limit", type=int, default=None,
                        help="only the first N questions, LibriVox clips and clips per reader")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    parts = list(PARTS) if args.part == "all" else [args.part]
    results = {}
    for part in parts:
        started = time.perf_counter()
        results[part] = {**PARTS[part](args.limit), "wall_s": round(time.perf_counter() - started, 1)}
    if args.json:
        print(json.dumps(results, indent=1, default=str))
        return 0
    for part in parts:
        PRINTERS[part](results[part])
        print(f"  ({results[part]['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
