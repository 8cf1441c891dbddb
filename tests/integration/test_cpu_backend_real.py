"""The real llama.cpp build with runtime CPU dispatch: the variant chosen, self-tested, cached, and a
crashing variant rejected in a child process while the parent goes on with the portable one.

Each case runs in a fresh interpreter: the CPU variant is process-wide (ggml's backend registry),
and this test process may already hold one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.llm.cpu_backend import lib_dir
from assistant.llm.cpu_variants import VARIANTS, built_variants, candidates, machine_arch, parse_cpu_flags, read_cpuinfo
from tests.integration.support import free_port
from tests.integration.test_cli import run

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys
from pathlib import Path
from assistant.llm.cpu_backend import ensure_cpu_backend
model, cache, requested = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
info = ensure_cpu_backend(requested=requested, model=model, threads=2, cache_path=cache)
from llama_cpp import Llama
llm = Llama(model_path=str(model), n_ctx=256, n_threads=2, verbose=False)
out = llm.create_completion("The capital of France is", max_tokens=8, temperature=0.0, top_k=1)
print(json.dumps({"variant": info.variant, "source": info.source, "rejected": info.rejected,
                  "features": info.features, "text": out["choices"][0]["text"]}))
"""
# a "CPU variant" whose code kills the process as it loads, as AVX-512/AMX code does on a CPU whose OS
# does not grant the register state
CRASH_C = '#include <signal.h>\n__attribute__((constructor)) static void boom(void) { raise(SIGSEGV); }\n'


def child(model: Path, cache: Path, requested: str = "auto", env: dict[str, str] | None = None) -> dict:
    import os

    out = subprocess.run([sys.executable, "-c", CHILD, str(model), str(cache), requested], capture_output=True,
                         text=True, timeout=600, cwd=REPO, env={**os.environ, **(env or {})}, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def eligible() -> list[str]:
    return [v.name for v in candidates(built_variants(lib_dir()), parse_cpu_flags(read_cpuinfo()), arch=machine_arch())]


def test_the_build_has_the_dispatch_variants_and_no_amx() -> None:
    built = set(built_variants(lib_dir()))
    assert {"haswell", "x64"} <= built if machine_arch() == "x86" else built
    assert "sapphirerapids" not in built


def test_auto_self_tests_the_best_variant_then_caches_the_verdict(tmp_path: Path, small_model_path: Path) -> None:
    best = eligible()[0]
    first = child(small_model_path, tmp_path / "v.json")
    if first["rejected"]:  # a CPU where the best one dies: then it must be the portable one
        assert first["rejected"][0]["variant"] == best and first["variant"] == "haswell"
    else:
        assert first["variant"] == best
    assert first["source"] == "self-test" and first["text"].strip()
    # what llama.cpp reports is the variant's instruction set (it does not list SSE4.2)
    compiled = set(VARIANTS[first["variant"]].features) - {"SSE42"}
    assert compiled <= set(first["features"]), first["features"]
    assert ("AVX512" in first["features"]) == ("AVX512" in compiled)
    second = child(small_model_path, tmp_path / "v.json")
    assert (second["variant"], second["source"]) == (first["variant"], "cache")
    assert second["text"] == first["text"]


def test_a_variant_that_crashes_is_rejected_and_the_portable_one_runs(tmp_path: Path, small_model_path: Path) -> None:
    best = eligible()[0]
    if best == "haswell":  # nothing better than the portable one here: crash that, expect x64
        best, expected = "haswell", "x64"
    else:
        expected = "haswell"
    libs = tmp_path / "lib"
    shutil.copytree(lib_dir(), libs, symlinks=True)
    (tmp_path / "crash.c").write_text(CRASH_C)
    target = libs / f"libggml-cpu-{best}.so"
    target.unlink()
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(target), str(tmp_path / "crash.c")], check=True)
    report = child(small_model_path, tmp_path / "v.json", env={"LLAMA_CPP_LIB_PATH": str(libs)})
    assert report["rejected"] == [{"variant": best, "reason": "killed by SIGSEGV"}]
    assert (report["variant"], report["source"]) == (expected, "self-test")
    assert report["text"].strip()


def test_serve_refuses_a_variant_this_cpu_cannot_run(tmp_path: Path, small_model_path: Path) -> None:
    flags = parse_cpu_flags(read_cpuinfo())
    built = built_variants(lib_dir())
    lacking = [name for name in built if name in VARIANTS and VARIANTS[name].missing(flags)]
    variant = lacking[0] if lacking else "sapphirerapids"
    config = tmp_path / "assistant.toml"
    config.write_text(
        f'[server]\ndata_dir = "{tmp_path / "data"}"\nport = {free_port()}\n'
        f'[inference]\nmodel = "smollm2-135m-instruct"\nmodel_path = "{small_model_path}"\n'
        f'cpu_variant = "{variant}"\n'
    )
    result = run("serve", "--config", str(config), timeout=240)
    assert result.returncode == 2, result.stderr  # an error exit, not a signal
    assert f"llama.cpp CPU variant {variant!r}" in result.stderr
    for flag in VARIANTS[variant].missing(flags) if lacking else VARIANTS[variant].flags:
        assert flag in result.stderr


def test_an_unknown_variant_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "assistant.toml"
    config.write_text(f'[server]\ndata_dir = "{tmp_path / "data"}"\n[inference]\ncpu_variant = "pentium4"\n')
    result = run("serve", "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert "inference.cpu_variant" in result.stderr and "must be 'auto' or a llama.cpp CPU variant" in result.stderr


def test_the_command_line_names_the_variant_and_its_library(default_model_path: Path) -> None:
    result = run("engine", "cpu")
    assert result.returncode == 0, result.stderr
    assert "llama.cpp CPU backend: " in result.stdout and "runs on this CPU, best first: " in result.stdout
    path = Path(run("engine", "cpu", "--path").stdout.strip())
    assert path.is_file() and path.name.removeprefix("libggml-cpu-").removesuffix(".so") in eligible()


def test_the_default_model_reads_its_weights_but_the_embedding_table_per_token(default_model_path: Path) -> None:
    # Qwen2.5 0.5B has a separate Q8_0 output head: a token reads it and the blocks, one embedding row
    from gguf import GGUFReader

    from assistant.llm.speed import bytes_per_token

    tensors = {t.name: int(t.n_bytes) for t in GGUFReader(default_model_path).tensors}
    assert "output.weight" in tensors
    per_token = bytes_per_token(default_model_path)
    assert per_token == sum(tensors.values()) - tensors["token_embd.weight"]
    assert 300 * 2**20 < per_token < default_model_path.stat().st_size
