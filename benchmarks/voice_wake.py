"""Wake words: false alarms per hour per word on speech without wake words, uncalibrated and calibrated, on a
held-out split, and hits on positives, with every shipped word enabled.

Negative speech (dev data, read in place from ``../shared/benchmarks`` or synthesised; nothing is copied into
the repository), split in two halves, **calibration** and **held-out**:

- recorded: the LibriSpeech readers of ``speaker/`` (the first 3 readers calibrate, the other 2 are held out),
  the LibriVox clips, the openWakeWord ``office_lights`` clips and ``hey_jane.wav`` (each file to one half by
  a hash of its name);
- synthesised: ~470 user requests and prompts (NotInject prompts, BFCL questions; any naming a wake word
  dropped) spoken by piper (the packaged joe voice: every text) and four espeak-ng voices (en-us, en-gb,
  en-us+f3, en-gb-scotland: every other text each), each text to one half by a hash of it;
- near misses ("Hey Travis", "a jar of this", "hey rhapsody", "okay, now, but", "hey, micro waves", "Hey
  Charles", ...) in every voice, each labelled with the word it resembles: a negative for the other words in
  calibration; in the figures counted apart (how many of a word's own near misses, and of the others', fire it),
  not in the false alarms per hour of speech;
- speech that contains a word ("Alexander", "Alexandra" for ``alexa``) and every word's positive phrases:
  negatives for the OTHER words only (a directory named after the word, see
  :mod:`assistant.voice.wake_calibration`).

Positives: ``hey_mycroft_test.wav``, ``alexa_test.wav`` and, in every voice, three phrases per word
("Hey Jarvis, ...", "Alexa, ...", "Hey Mycroft, ...", "Hey Rhasspy, ...", "Okay Nabu, ...").

Figures, per word (each clip its own stream, padded with silence as in calibration):

- false alarms per hour at sensitivity 0.5 without calibration, on all the negatives;
- the thresholds calibrated on the calibration half (budget ``max_false_alarms_per_hour`` 0.5, margin 0.1),
  the false alarms per hour they give on the calibration half and on the **held-out** half, with the engine's
  effective threshold ``max(0.5, calibrated)``;
- the same for the thresholds shipped in ``assistant/voice/data/wakeword_thresholds.json``;
- every word enabled at once (one trigger, shared refractory period, as the engine runs): false alarms per
  hour on the held-out half, uncalibrated and calibrated, and hits on the positives.

    .venv/bin/python benchmarks/voice_wake.py [--limit N] [--json] [--write-negatives DIR]

``--limit N`` keeps N texts per voice and N recorded clips per source. ``--write-negatives DIR`` only writes the
clip sets (``DIR/calibration``, ``DIR/heldout``, ``DIR/positives``): the shipped thresholds are
``assistant wakeword calibrate --negatives DIR/calibration --output assistant/voice/data/wakeword_thresholds.json``.
A full run synthesises ~2.6 hours of speech and scores it: about 25 minutes on two cores. piper adds noise,
so the synthesised clips, and the figures, vary slightly from run to run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tqdm.auto import tqdm

from assistant.config import TtsSettings, WakeWordSettings
from assistant.voice.audio import write_wav
from assistant.voice.wake import PACKAGED_WORDS, OpenWakeWordEngine
from assistant.voice.wake_calibration import MARGIN, ScoredClip, calibrate, per_hour, score_directory, simulate
from assistant.voice.wake_thresholds import PACKAGED_FILE, Calibration, effective_thresholds

DATA = Path(os.environ.get("ASSISTANT_BENCHMARK_DATA") or ROOT.parent / "shared" / "benchmarks")  # e.g. from a worktree
WAKEWORD = DATA / "wakeword"
SENSITIVITY = WakeWordSettings().sensitivity
BUDGET = WakeWordSettings().max_false_alarms_per_hour
NAMES_A_WORD = re.compile(r"alexa|jarvis|mycroft|rhasspy|nabu", re.IGNORECASE)

VOICES: dict[str, TtsSettings] = {
    "piper_joe": TtsSettings(),
    "espeak_en-us": TtsSettings(engine="espeak-ng", voice="en-us"),
    "espeak_en-gb": TtsSettings(engine="espeak-ng", voice="en-gb"),
    "espeak_en-us_f3": TtsSettings(engine="espeak-ng", voice="en-us+f3"),
    "espeak_en-gb-scotland": TtsSettings(engine="espeak-ng", voice="en-gb-scotland"),
}
NEAR_MISSES: tuple[tuple[str, str | None], ...] = (  # (phrase, the word it resembles: not a negative for that word)
    ("Hey Travis, can you pass the salt?", "hey_jarvis"), ("There is a jar of this in the kitchen.", "hey_jarvis"),
    ("Hey rhapsody is my favourite song.", "hey_rhasspy"), ("Okay, now, but what about tomorrow?", "okay_nabu"),
    ("Hey, micro waves are short.", "hey_mycroft"), ("Hey Marvin, come here.", "hey_jarvis"),
    ("Hey Jarvie, are you awake?", "hey_jarvis"), ("Hey, are we there yet?", None),
    ("Okay, no but seriously.", "okay_nabu"), ("Hey, raspberry jam please.", "hey_rhasspy"),
    ("Hey, my craft project is done.", "hey_mycroft"), ("A lexicon of words.", "alexa"),
    ("Electra is a play by Sophocles.", "alexa"), ("Hey Travis, the car is ready.", "hey_jarvis"),
    ("Okay Nadia, let us go.", "okay_nabu"), ("Hey there, how are you?", None),
    ("Okay, nah, but maybe later.", "okay_nabu"), ("Hey Mike, raft the river.", "hey_mycroft"),
    ("Hey Charles, dinner is ready.", "hey_jarvis"),
)
CONTAINS = {"alexa": ("Alexander went to the market.", "Alexandra called this morning.")}
POSITIVE_PHRASES = {
    "hey_jarvis": ("Hey Jarvis, what is the weather like?", "Hey Jarvis, turn on the lights.",
                   "Hey Jarvis, set a timer for ten minutes."),
    "alexa": ("Alexa, what time is it?", "Alexa, play some music.", "Alexa, turn off the kitchen lights."),
    "hey_mycroft": ("Hey Mycroft, what is the weather like?", "Hey Mycroft, tell me a joke.",
                    "Hey Mycroft, set an alarm."),
    "hey_rhasspy": ("Hey Rhasspy, turn on the lights.", "Hey Rhasspy, what time is it?", "Hey Rhasspy, play the news."),
    "okay_nabu": ("Okay Nabu, turn on the lights.", "Okay Nabu, what is the weather?", "Okay Nabu, start the vacuum."),
}
RECORDED_POSITIVES = {"hey_mycroft": WAKEWORD / "hey_mycroft_test.wav", "alexa": WAKEWORD / "alexa_test.wav"}
SPLITS = ("calibration", "heldout")


# --- the clip sets ----------------------------------------------------------------------------------------


def half(key: str) -> str:
    return SPLITS[zlib.crc32(key.encode()) % 2]


def texts(limit: int | None = None) -> list[str]:
    """User requests and prompts with no wake word in them, deduplicated, at most 240 characters."""
    raw = [item["prompt"] for f in sorted((DATA / "prompt_injection").glob("NotInject_*.json"))
           for item in json.loads(f.read_text(encoding="utf-8"))]
    with (DATA / "tool_calling" / "bfcl_live_simple" / "BFCL_v4_live_simple.json").open(encoding="utf-8") as lines:
        raw += [m["content"] for line in lines for turn in json.loads(line)["question"] for m in turn
                if m["role"] == "user"]
    kept = []
    for text in raw:
        text = re.sub(r"https?://\S+", "a link", text).replace("\n", " ").strip()
        if text.isascii() and len(text) >= 15 and not NAMES_A_WORD.search(text):
            kept.append(text[:240])
    return list(dict.fromkeys(kept))[:limit]


def _link(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        target.symlink_to(source)


def write_clips(out: Path, limit: int | None = None, *, progress: Callable[[Any], Any] = lambda it: it) -> Path:
    """The negatives (``out/calibration``, ``out/heldout``) and positives (``out/positives/<word>``)."""
    from assistant.voice.tts import create_tts

    every = texts(limit)
    for index, (voice, settings) in enumerate(progress(list(VOICES.items()))):
        tts = create_tts(settings)
        said = every if voice.startswith("piper") else every[index % 2::2]
        for i, text in enumerate(said):
            write_wav(_dir(out / half(text) / voice) / f"t{i:04d}.wav", tts.synthesize(text))
        for i, (text, like) in enumerate(NEAR_MISSES):
            folder = out / half(text) / f"{voice}_near_miss" / (like or "")
            write_wav(_dir(folder) / f"n{i:02d}.wav", tts.synthesize(text))
        for word, phrases in CONTAINS.items():
            for i, text in enumerate(phrases):
                write_wav(_dir(out / half(text) / word) / f"contains_{voice}_{i}.wav", tts.synthesize(text))
        for word, phrases in POSITIVE_PHRASES.items():
            for i, text in enumerate(phrases):
                path = write_wav(_dir(out / "positives" / word) / f"{voice}_{i}.wav", tts.synthesize(text))
                _link(path, out / half(f"{voice}_{i}.wav{word}") / word / path.name)  # a negative for the others
    readers = sorted(p for p in (DATA / "speaker").iterdir() if p.is_dir())
    for k, reader in enumerate(readers):
        for clip in sorted(reader.glob("*.flac"))[:limit]:
            _link(clip, out / SPLITS[k >= 3] / "librispeech" / reader.name / clip.name)
    for clip in sorted((DATA / "speech" / "librivox").glob("*.wav"))[:limit]:
        _link(clip, out / half(clip.name) / "librivox" / clip.name)
    for clip in [*sorted((WAKEWORD / "office_lights").rglob("*.wav"))[:limit], WAKEWORD / "hey_jane.wav"]:
        _link(clip, out / half(clip.name) / "openwakeword_clips" / clip.name)
    for word, clip in RECORDED_POSITIVES.items():
        _link(clip, out / "positives" / word / clip.name)
    return out


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- figures -----------------------------------------------------------------------------------------------------


def is_near_miss(clip: ScoredClip) -> bool:
    return clip.source.endswith("_near_miss") or "/contains_" in clip.name


def alarms_per_hour(clips: Sequence[ScoredClip], thresholds: dict[str, float]) -> dict[str, Any]:
    """False alarms on speech (near misses are counted apart, :func:`near_miss_alarms`). Per word alone: on the
    clips that are negatives for it; every word enabled at once: every detection of a word the clip does not
    say, per hour of all the clips."""
    speech = [c for c in clips if not is_near_miss(c)]
    per_word = {}
    for word, threshold in thresholds.items():
        mine = [c for c in speech if word not in c.excluded]
        count = sum(len(simulate(c.traces, {word: threshold})) for c in mine)
        per_word[word] = {"false_alarms": count, "per_hour": round(per_hour(count, _hours(mine)), 3)}
    fired = [(c.name, d.word, round(d.score, 3)) for c in speech for d in simulate(c.traces, thresholds)
             if d.word not in c.excluded]
    return {"per_word": per_word, "all_words": {"false_alarms": len(fired), "hours": round(_hours(speech), 3),
                                               "per_hour": round(per_hour(len(fired), _hours(speech)), 3),
                                               "clips": fired}}


def hits(positives: Sequence[ScoredClip], thresholds: dict[str, float], alone: bool) -> dict[str, str]:
    """Per word: positives in which the word was detected (``alone``: only that word enabled), of all."""
    counts: dict[str, list[int]] = {}
    for clip in positives:
        word = clip.source
        found = simulate(clip.traces, {word: thresholds[word]} if alone else thresholds)
        counts.setdefault(word, [0, 0])[1] += 1
        counts[word][0] += any(d.word == word for d in found)
    return {word: f"{hit}/{total}" for word, (hit, total) in sorted(counts.items())}


def near_miss_alarms(clips: Sequence[ScoredClip], thresholds: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Per word alone, on the near-miss phrases (every voice): of those resembling it ("own"), how many fire it
    (expected: the models hear "Hey Jarvie" as "hey jarvis"); of the others, which fire it (false alarms)."""
    near = [c for c in clips if is_near_miss(c)]
    result = {}
    for word, threshold in thresholds.items():
        own = [c for c in near if word in c.excluded]
        other = [c for c in near if word not in c.excluded]
        result[word] = {"own": f"{sum(bool(simulate(c.traces, {word: threshold})) for c in own)}/{len(own)}",
                        "other": f"{sum(bool(simulate(c.traces, {word: threshold})) for c in other)}/{len(other)}",
                        "other_firing": [c.name for c in other if simulate(c.traces, {word: threshold})]}
    return result


def _hours(clips: Sequence[ScoredClip]) -> float:
    return sum(c.seconds for c in clips) / 3600


def figures(scored: dict[str, list[ScoredClip]], shipped: Calibration) -> dict[str, Any]:
    cal, held = scored["calibration"], scored["heldout"]
    calibrated = calibrate(cal, PACKAGED_WORDS, BUDGET, MARGIN)
    uncalibrated = dict.fromkeys(PACKAGED_WORDS, SENSITIVITY)
    tuned = effective_thresholds(PACKAGED_WORDS, SENSITIVITY, calibrated)
    ship = effective_thresholds(PACKAGED_WORDS, SENSITIVITY, shipped)
    return {
        "budget_per_hour": BUDGET, "margin": MARGIN, "sensitivity": SENSITIVITY,
        "hours": {"calibration": round(_hours(cal), 3), "heldout": round(_hours(held), 3)},
        "clips": {"calibration": len(cal), "heldout": len(held), "positives": len(scored["positives"])},
        "calibrated": {w: {"threshold": t.threshold, "highest_negative": t.highest_negative}
                       for w, t in calibrated.words.items()},
        "effective": tuned,
        "shipped": {w: t.threshold for w, t in shipped.words.items()},
        "shipped_effective": ship,
        "uncalibrated": {"all": alarms_per_hour(cal + held, uncalibrated), "heldout": alarms_per_hour(held, uncalibrated)},
        "calibrated_on_calibration": alarms_per_hour(cal, tuned),
        "calibrated_on_heldout": alarms_per_hour(held, tuned),
        "shipped_on_heldout": alarms_per_hour(held, ship),
        "shipped_on_all": alarms_per_hour(cal + held, ship),
        "near_miss_alarms": {"uncalibrated": near_miss_alarms(cal + held, uncalibrated),
                             "shipped": near_miss_alarms(cal + held, ship)},
        "hits": {"uncalibrated": hits(scored["positives"], uncalibrated, alone=False),
                 "shipped_alone": hits(scored["positives"], ship, alone=True),
                 "shipped_all_words": hits(scored["positives"], ship, alone=False)},
        "hit_rate": {"uncalibrated": _rate(hits(scored["positives"], uncalibrated, alone=False)),
                     "shipped": _rate(hits(scored["positives"], ship, alone=False))},
    }


def _rate(counts: dict[str, str]) -> float:
    pairs = [tuple(map(int, v.split("/"))) for v in counts.values()]
    return round(sum(h for h, _ in pairs) / max(1, sum(t for _, t in pairs)), 4)


def run(limit: int | None = None, clips_dir: Path | None = None) -> dict[str, Any]:
    """Synthesise (unless ``clips_dir`` holds clips written by :func:`write_clips`), score, calibrate, count."""
    with tempfile.TemporaryDirectory(prefix="voice_wake_") as tmp:
        out = clips_dir or write_clips(Path(tmp), limit, progress=lambda it: tqdm(it, desc="synthesising", unit="voice"))
        engine = OpenWakeWordEngine(PACKAGED_WORDS, 1.0)
        try:
            scored = {part: list(score_directory(engine, out / part, progress=lambda it, p=part: tqdm(
                it, desc=f"scoring {p}", unit="clip"))) for part in (*SPLITS, "positives")}
        finally:
            engine.close()
    return figures(scored, Calibration.load(PACKAGED_FILE))


def print_figures(r: dict[str, Any]) -> None:
    print(f"Wake words: {r['hours']['calibration']:.2f} h calibration + {r['hours']['heldout']:.2f} h held-out "
          f"negative speech ({r['clips']['calibration']} + {r['clips']['heldout']} clips), "
          f"{r['clips']['positives']} positives; budget {r['budget_per_hour']} false alarms/h, margin {r['margin']}")
    print(f"{'word':<12} {'FA/h @0.5':>9} {'calibrated':>10} {'effective':>9} {'FA/h cal':>8} {'FA/h held':>9} "
          f"{'shipped':>7} {'FA/h held':>9} {'hits @0.5':>9} {'hits shipped':>12}")
    for word in PACKAGED_WORDS:
        print(f"{word:<12} {r['uncalibrated']['all']['per_word'][word]['per_hour']:>9.2f} "
              f"{r['calibrated'][word]['threshold']:>10.3f} {r['effective'][word]:>9.3f} "
              f"{r['calibrated_on_calibration']['per_word'][word]['per_hour']:>8.2f} "
              f"{r['calibrated_on_heldout']['per_word'][word]['per_hour']:>9.2f} "
              f"{r['shipped_effective'][word]:>7.3f} {r['shipped_on_heldout']['per_word'][word]['per_hour']:>9.2f} "
              f"{r['hits']['uncalibrated'].get(word, '-'):>9} {r['hits']['shipped_all_words'].get(word, '-'):>12}")
    for label, key in (("uncalibrated 0.5, held-out", ("uncalibrated", "heldout")),
                       ("shipped thresholds, held-out", ("shipped_on_heldout",)),
                       ("shipped thresholds, all", ("shipped_on_all",))):
        node = r
        for k in key:
            node = node[k]
        every = node["all_words"]
        print(f"every word enabled, {label}: {every['false_alarms']} false alarms in {every['hours']:.2f} h = "
              f"{every['per_hour']:.2f}/h {every['clips'][:5]}")
    print(f"hit rate (all words enabled): {r['hit_rate']['uncalibrated']:.1%} at 0.5, "
          f"{r['hit_rate']['shipped']:.1%} shipped")
    for label, fired in r["near_miss_alarms"].items():
        print(f"near misses firing ({label}; own phrases / others' phrases): "
              + "; ".join(f"{w} {n['own']} / {n['other']}" for w, n in fired.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="N texts per voice and N recorded clips per source")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--write-negatives", type=Path, default=None, metavar="DIR",
                        help="only write the clip sets to DIR (for assistant wakeword calibrate)")
    parser.add_argument("--clips", type=Path, default=None, metavar="DIR",
                        help="use the clip sets already written to DIR instead of synthesising")
    args = parser.parse_args(argv)
    if args.write_negatives is not None:
        write_clips(args.write_negatives, args.limit, progress=lambda it: tqdm(it, desc="synthesising", unit="voice"))
        print(f"clips written to {args.write_negatives}")
        return 0
    started = time.perf_counter()
    result = {**run(args.limit, args.clips), "wall_s": round(time.perf_counter() - started, 1)}
    if args.json:
        print(json.dumps(result, indent=1, default=str))
    else:
        print_figures(result)
        print(f"  ({result['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
