"""piper (packaged en_US-joe-medium) and espeak-ng for real: 16 kHz PCM of plausible length, and round trips
through faster-whisper."""

from __future__ import annotations

import numpy as np
import pytest

from assistant.config import SttSettings, TtsSettings
from assistant.errors import ConfigError
from assistant.voice.audio import duration_s, pcm_to_float
from assistant.voice.stt import SpeechToText, create_stt, word_error_rate
from assistant.voice.tts import TextToSpeech, create_tts

pytestmark = pytest.mark.integration

QUESTION = "What is the capital of France?"
WAKE_QUESTION = "hey jarvis, what is the capital of France"
MAX_ROUND_TRIP_WER = 0.2  # measured here: 0.0 for both voices and both sentences


@pytest.fixture(scope="module")
def whisper() -> SpeechToText:
    return create_stt(SttSettings(threads=2))


@pytest.fixture(scope="module")
def piper() -> TextToSpeech:
    return create_tts(TtsSettings(engine="piper"))


@pytest.fixture(scope="module")
def espeak() -> TextToSpeech:
    return create_tts(TtsSettings(engine="espeak-ng"))


def assert_plausible_speech(pcm: bytes) -> None:
    """About 1-4 s for a six-word question spoken at 16 kHz (a 22.05 kHz stream left as is would be ~38% longer)."""
    assert len(pcm) % 2 == 0
    assert 1.0 <= duration_s(pcm) <= 4.0
    samples = pcm_to_float(pcm)
    assert float(np.sqrt(np.mean(samples**2))) > 0.01  # not silence


def test_piper_speaks_16k_pcm(piper: TextToSpeech) -> None:
    assert piper.voice == "en_US-joe-medium"
    assert_plausible_speech(piper.synthesize(QUESTION))


def test_espeak_speaks_16k_pcm(espeak: TextToSpeech) -> None:
    assert espeak.voice == "en-us"
    assert_plausible_speech(espeak.synthesize(QUESTION))


@pytest.mark.parametrize("text", [QUESTION, WAKE_QUESTION])
def test_piper_round_trip_through_whisper(piper: TextToSpeech, whisper: SpeechToText, text: str) -> None:
    heard = whisper.transcribe(piper.synthesize(text)).text
    assert word_error_rate([text], [heard]) <= MAX_ROUND_TRIP_WER, heard


@pytest.mark.parametrize("text", [QUESTION, WAKE_QUESTION])
def test_espeak_round_trip_through_whisper(espeak: TextToSpeech, whisper: SpeechToText, text: str) -> None:
    heard = whisper.transcribe(espeak.synthesize(text)).text
    assert word_error_rate([text], [heard]) <= MAX_ROUND_TRIP_WER, heard


def test_markdown_and_urls_are_not_read_aloud(piper: TextToSpeech, whisper: SpeechToText) -> None:
    # piper samples its prosody, so the words heard vary ("See link" / "See you, Link" / "Ceiling"): check only
    # that no mark or URL part is spoken.
    heard = whisper.transcribe(piper.synthesize("**Paris** is the capital. See https://en.example.org/paris")).text
    words = set(heard.lower().replace(",", " ").replace(".", " ").split())
    assert not words & {"asterisk", "star", "stars", "https", "http", "example", "org", "slash", "dot", "colon"}, heard


def test_empty_text_is_no_audio(piper: TextToSpeech, espeak: TextToSpeech) -> None:
    assert piper.synthesize(" ") == b"" and espeak.synthesize("`**`") == b""


def test_an_unknown_espeak_voice_fails_at_construction() -> None:
    with pytest.raises(ConfigError, match="espeak-ng speech synthesis engine failed its start-up check.*'xx-nowhere'"):
        create_tts(TtsSettings(engine="espeak-ng", voice="xx-nowhere"))
