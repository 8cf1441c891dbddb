"""peft LoRA adapter -> GGUF LoRA adapter, with llama.cpp's own converter.

llama.cpp loads LoRA adapters only as GGUF (``convert_lora_to_gguf.py`` output). The converter is not
on PyPI: ``make setup`` extracts it from llama-cpp-python's sdist into ``<venv>/share/llama.cpp-convert``
(``lora.converter_dir`` points elsewhere). It needs the base model's Hugging Face config, which the
packaged models do not ship: :func:`base_config_dir` derives it from the base GGUF with transformers
(``config.json`` with ``architectures`` set to the model class, e.g. ``Qwen2ForCausalLM``, and without
``quantization_config``, which would make the converter expect quantised weights) and caches it
per base model file. No tokenizer files: the converter's LoRA model class never reads the vocabulary
(its ``set_vocab`` does nothing; an adapter carries no vocabulary), and deriving the tokenizer from the
GGUF would double the first conversion's time (about 30 s for Qwen2.5's 151k tokens on this machine).
Checked: the output with and without them is byte-identical.

The converter runs in a subprocess (``sys.executable``, offline, with a timeout); a failure raises
:class:`ConversionError` with the tail of its stderr. transformers is imported only inside the
functions that need it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from assistant.errors import AssistantError, ServiceUnavailableError

CONVERTER_SCRIPT = "convert_lora_to_gguf.py"
TIMEOUT_SECS = 600.0  # a rank-8 adapter converts in seconds; the interpreter start (torch) dominates
STDERR_TAIL = 2000  # characters of the converter's stderr kept in an error


class ConversionError(AssistantError):
    """The converter ran and failed (or ran out of time); the message ends with its stderr tail."""

    code = "INTERNAL_ERROR"


def default_converter_dir() -> Path:
    """Where ``make setup`` puts llama.cpp's converter: ``<venv>/share/llama.cpp-convert``."""
    return Path(sys.prefix) / "share" / "llama.cpp-convert"


def converter_script(converter_dir: Path | None = None) -> Path:
    """The converter script, or ServiceUnavailableError saying how to install it."""
    directory = Path(converter_dir).expanduser() if converter_dir is not None else default_converter_dir()
    script = directory / CONVERTER_SCRIPT
    if not script.is_file():
        raise ServiceUnavailableError(
            f"llama.cpp's LoRA converter is not installed ({script} is missing): run `make setup`, which "
            "extracts convert_lora_to_gguf.py, conversion/ and gguf-py/ from llama-cpp-python's sdist into "
            f"{default_converter_dir()}, or set lora.converter_dir to a llama.cpp checkout")
    return script


def _model_class(model_type: str) -> str:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    if name is None:
        raise ConversionError(f"base model type {model_type!r} has no causal-LM class in transformers")
    return name


def base_config_dir(base_model: Path, cache_dir: Path | None = None) -> Path:
    """A directory with the Hugging Face config of the base GGUF, as the converter's
    ``--base`` wants it; built once per base file (path, size and modification time) under
    ``cache_dir`` (default: the system temp dir)."""
    base_model = Path(base_model).expanduser().resolve()
    if not base_model.is_file():
        raise ConversionError(f"base model {base_model} does not exist")
    stat = base_model.stat()
    key = hashlib.sha256(f"{base_model}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    root = Path(cache_dir) if cache_dir is not None else Path(tempfile.gettempdir()) / "assistant-lora-base"
    target = root / f"{base_model.stem}-{key}"
    if (target / "config.json").is_file():
        return target
    from transformers import AutoConfig

    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
    try:
        config = AutoConfig.from_pretrained(base_model.parent, gguf_file=base_model.name)
        data = config.to_dict()
        data.pop("quantization_config", None)
        data["architectures"] = [_model_class(config.model_type)]
        (work / "config.json").write_text(json.dumps(data, indent=2, sort_keys=True))
        try:
            work.rename(target)
        except OSError:  # another process built it first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _check_peft_dir(peft_dir: Path) -> None:
    if not (peft_dir / "adapter_config.json").is_file():
        raise ConversionError(f"{peft_dir} is not a peft adapter directory (no adapter_config.json)")
    if not any((peft_dir / name).is_file() for name in ("adapter_model.safetensors", "adapter_model.bin")):
        raise ConversionError(f"{peft_dir} has no adapter weights (adapter_model.safetensors or .bin)")


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= STDERR_TAIL else "..." + text[-STDERR_TAIL:]


def convert_to_gguf(peft_dir: Path, base_model: Path, out_path: Path, *, converter_dir: Path | None = None,
                    cache_dir: Path | None = None, timeout_secs: float = TIMEOUT_SECS) -> Path:
    """Convert peft's ``save_pretrained`` output in ``peft_dir`` (an adapter of the base GGUF
    ``base_model``) to a GGUF LoRA adapter at ``out_path`` (f32 tensors) and return ``out_path``.

    The file appears whole or not at all (written next to it, then renamed). Raises
    ServiceUnavailableError when the converter is not installed, ConversionError for a bad input
    directory, a failed conversion (with the converter's stderr tail) or a timeout."""
    peft_dir, out_path = Path(peft_dir), Path(out_path)
    script = converter_script(converter_dir)
    _check_peft_dir(peft_dir)
    base_dir = base_config_dir(base_model, cache_dir)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(f".{out_path.name}.partial")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("NO_LOCAL_GGUF", None)  # the converter's own gguf-py, of the same llama.cpp version
    command = [sys.executable, str(script), "--base", str(base_dir), "--outfile", str(partial),
               "--outtype", "f32", str(peft_dir)]
    try:
        done = subprocess.run(command, cwd=script.parent, env=env, capture_output=True, text=True,
                              timeout=timeout_secs, check=False)
    except subprocess.TimeoutExpired as exc:
        partial.unlink(missing_ok=True)
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        raise ConversionError(f"LoRA conversion of {peft_dir} did not finish within {timeout_secs:g} s: "
                              f"{_tail(stderr)}") from exc
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise ConversionError(f"LoRA conversion of {peft_dir} failed (exit status {done.returncode}): "
                              f"{_tail(done.stderr or done.stdout)}")
    os.replace(partial, out_path)
    return out_path
