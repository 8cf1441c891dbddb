"""peft -> GGUF conversion around a stand-in converter script (the real converter and the base-config
derivation from a GGUF run in tests/integration/test_lora_engine_real.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from assistant.errors import ServiceUnavailableError
from assistant.learning import convert
from assistant.learning.convert import ConversionError, convert_to_gguf, converter_script, default_converter_dir

FAKE_CONVERTER = '''
import json, sys, time
from pathlib import Path
args = sys.argv[1:]
Path(args[args.index("--outfile") + 1]).write_bytes(b"GGUF" + json.dumps(args).encode())
mode = Path(args[-1], "mode").read_text() if Path(args[-1], "mode").exists() else "ok"
if mode == "fail":
    print("\\n".join(f"line {i}" for i in range(2000)), file=sys.stderr)
    print("ValueError: lm_head is present in adapter", file=sys.stderr)
    sys.exit(2)
if mode == "slow":
    time.sleep(30)
'''


@pytest.fixture
def converter(tmp_path: Path) -> Path:
    directory = tmp_path / "llama.cpp-convert"
    directory.mkdir()
    (directory / "convert_lora_to_gguf.py").write_text(FAKE_CONVERTER)
    return directory


@pytest.fixture
def peft_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "peft"
    directory.mkdir()
    (directory / "adapter_config.json").write_text("{}")
    (directory / "adapter_model.safetensors").write_bytes(b"weights")
    return directory


@pytest.fixture(autouse=True)
def base_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The base-config directory as base_config_dir would build it (without transformers here)."""
    directory = tmp_path / "base-config"
    directory.mkdir()
    seen: list[Path] = []

    def fake(base_model: Path, cache_dir: Path | None = None) -> Path:
        seen.append(base_model)
        return directory

    monkeypatch.setattr(convert, "base_config_dir", fake)
    return directory


def test_the_default_converter_is_in_the_venv() -> None:
    assert default_converter_dir() == Path(sys.prefix) / "share" / "llama.cpp-convert"


def test_a_missing_converter_says_how_to_install_it(tmp_path: Path, peft_dir: Path) -> None:
    with pytest.raises(ServiceUnavailableError, match="make setup") as info:
        convert_to_gguf(peft_dir, tmp_path / "base.gguf", tmp_path / "out.gguf", converter_dir=tmp_path / "none")
    assert "lora.converter_dir" in info.value.message
    assert str(tmp_path / "none" / "convert_lora_to_gguf.py") in info.value.message


def test_the_converter_gets_the_base_dir_f32_and_the_peft_dir(tmp_path: Path, converter: Path, peft_dir: Path,
                                                              base_dir: Path) -> None:
    out = convert_to_gguf(peft_dir, tmp_path / "base.gguf", tmp_path / "out" / "adapter.gguf", converter_dir=converter)
    assert out == tmp_path / "out" / "adapter.gguf"
    written = out.read_bytes()
    assert written.startswith(b"GGUF")
    args = written[4:].decode()
    assert f'"--base", "{base_dir}"' in args and '"--outtype", "f32"' in args and args.endswith(f'"{peft_dir}"]')
    assert [p.name for p in out.parent.iterdir()] == ["adapter.gguf"]  # written aside, then renamed


def test_a_failing_converter_is_an_error_with_its_stderr_tail(tmp_path: Path, converter: Path,
                                                              peft_dir: Path) -> None:
    (peft_dir / "mode").write_text("fail")
    out = tmp_path / "adapter.gguf"
    with pytest.raises(ConversionError, match="exit status 2") as info:
        convert_to_gguf(peft_dir, tmp_path / "base.gguf", out, converter_dir=converter)
    assert info.value.message.endswith("ValueError: lm_head is present in adapter")
    assert "line 1999" in info.value.message and "line 5\n" not in info.value.message  # the tail only
    assert list(tmp_path.glob("*adapter.gguf*")) == []  # no partial file left


def test_a_converter_past_its_timeout_is_stopped(tmp_path: Path, converter: Path, peft_dir: Path) -> None:
    (peft_dir / "mode").write_text("slow")
    with pytest.raises(ConversionError, match="did not finish within 2 s"):
        convert_to_gguf(peft_dir, tmp_path / "base.gguf", tmp_path / "a.gguf", converter_dir=converter,
                        timeout_secs=2)
    assert list(tmp_path.glob("*a.gguf*")) == []


def test_a_directory_without_an_adapter_is_refused(tmp_path: Path, converter: Path, peft_dir: Path) -> None:
    (peft_dir / "adapter_model.safetensors").unlink()
    with pytest.raises(ConversionError, match="has no adapter weights"):
        convert_to_gguf(peft_dir, tmp_path / "base.gguf", tmp_path / "a.gguf", converter_dir=converter)
    with pytest.raises(ConversionError, match="no adapter_config.json"):
        convert_to_gguf(tmp_path, tmp_path / "base.gguf", tmp_path / "a.gguf", converter_dir=converter)


def test_the_installed_converter_is_found() -> None:
    """`make setup` extracted llama.cpp's converter into this venv (the test command runs it first)."""
    script = converter_script()
    assert script.parent == default_converter_dir()
    for part in ("conversion", "gguf-py", "LICENSE", "VERSION"):
        assert (script.parent / part).exists()
