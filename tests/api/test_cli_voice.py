"""The voice commands of ``assistant``: satellite argument errors (exit 2, precise messages) and --help.

The satellite against a real broker, in a subprocess, is tests/integration/voice/test_voice_satellite_real.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app, parse_broker
from assistant.voice.audio import silence, write_wav

pytestmark = pytest.mark.usefixtures("clean_env")
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})  # wide enough that rich elides no option


@pytest.fixture
def wav(tmp_path: Path) -> Path:
    return write_wav(tmp_path / "hello.wav", silence(0.5))


def satellite(*args: str, wav: Path, broker: str = "127.0.0.1:1", room: str = "kitchen"):
    return run("satellite", "--room", room, "--wav", str(wav), "--broker", broker, *args)


@pytest.mark.parametrize("command", ["satellite", "wakeword-service", "speaker-service"])
def test_help(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_help_lists_the_options() -> None:
    text = run("satellite", "--help").output
    for option in ("--room", "--wav", "--broker", "--out", "--username", "--password", "--prefix", "--timeout",
                   "--connect-timeout", "--no-realtime"):
        assert option in text
    assert "8083" in run("wakeword-service", "--help").output
    assert "8084" in run("speaker-service", "--help").output


@pytest.mark.parametrize("broker", ["localhost", "localhost:", ":1883", "localhost:port", "localhost:0",
                                    "localhost:65536", "localhost:-1"])
def test_bad_broker(wav: Path, broker: str) -> None:
    result = satellite(wav=wav, broker=broker)
    assert result.exit_code == 2
    assert "--broker must be HOST:PORT with a port 1..65535" in result.output
    assert repr(broker) in result.output


def test_parse_broker() -> None:
    assert parse_broker("127.0.0.1:1883") == ("127.0.0.1", 1883)
    assert parse_broker("mqtt.home.arpa:8883") == ("mqtt.home.arpa", 8883)
    assert parse_broker("[::1]:1883") == ("::1", 1883)


def test_missing_wav(tmp_path: Path) -> None:
    result = satellite(wav=tmp_path / "nope.wav")
    assert result.exit_code == 2
    assert f"--wav {tmp_path / 'nope.wav'}: no such file" in result.output


def test_unreadable_wav(tmp_path: Path) -> None:
    text = tmp_path / "notes.wav"
    text.write_text("not audio at all")
    result = satellite(wav=text)
    assert result.exit_code == 2
    assert "not a readable WAV or FLAC file" in result.output


def test_empty_wav(tmp_path: Path) -> None:
    result = satellite(wav=write_wav(tmp_path / "empty.wav", b""))
    assert result.exit_code == 2
    assert "holds no audio" in result.output


def test_bad_room(wav: Path) -> None:
    result = satellite(wav=wav, room="kitchen/#")
    assert result.exit_code == 2
    assert "--room: room_id must be 1-64 characters" in result.output


def test_out_in_a_missing_directory(wav: Path, tmp_path: Path) -> None:
    result = satellite("--out", str(tmp_path / "no" / "reply.wav"), wav=wav)
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_bad_prefix(wav: Path) -> None:
    result = satellite("--prefix", "home/", wav=wav)
    assert result.exit_code == 2
    assert "--prefix: invalid topic prefix 'home/'" in result.output


def test_negative_timeout(wav: Path) -> None:
    result = satellite("--timeout", "-1", wav=wav)
    assert result.exit_code == 2
    assert "--timeout" in result.output


def test_unreachable_broker_exits_1(wav: Path) -> None:
    # port 1 on loopback refuses connections; the simulator gives up after --connect-timeout
    result = satellite("--no-realtime", "--timeout", "0", "--connect-timeout", "0.5", wav=wav)
    assert result.exit_code == 1
    assert "could not connect to the MQTT broker at 127.0.0.1:1 within 0.5 s" in result.output
