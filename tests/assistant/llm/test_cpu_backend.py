"""Choosing the CPU variant with a fake self-test: fallback, cache, the named variant, the verdicts."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest

from assistant.llm import cpu_backend
from assistant.llm.cpu_backend import (
    CpuBackendError,
    ProbeResult,
    cache_key,
    choose,
    probe_verdict,
    read_cache,
    subprocess_probe,
    write_cache,
)
from assistant.llm.cpu_variants import parse_cpu_flags

ZEN4 = parse_cpu_flags("flags : sse4_2 fma avx f16c avx2 bmi2 avx512f avx512dq avx512cd avx512bw avx512vl "
                       "avx512_bf16 avx512vbmi avx512_vnni")
NO_AVX512 = parse_cpu_flags("flags : sse4_2 fma avx f16c avx2 bmi2")
BUILT = {n: Path(f"/lib/libggml-cpu-{n}.so") for n in ("x64", "haswell", "skylakex", "icelake", "zen4", "alderlake")}
MODEL = Path("/models/m.gguf")


class FakeProbe:
    """Self-test verdicts by variant name; records the order of the calls."""

    def __init__(self, fails: dict[str, str] | None = None):
        self.fails = fails or {}
        self.calls: list[str] = []

    def __call__(self, library: Path, model: Path, threads: int) -> ProbeResult:
        name = library.name.removeprefix("libggml-cpu-").removesuffix(".so")
        self.calls.append(name)
        if name in self.fails:
            return ProbeResult(False, self.fails[name])
        return ProbeResult(True, tokens_per_second=40.0 if name == "zen4" else 20.0)


def pick(probe: FakeProbe, *, flags=ZEN4, requested="auto", cached=None, model=MODEL, built=BUILT):
    return choose(built=built, flags=flags, arch="x86", requested=requested, model=model, threads=2,
                  probe=probe, cached=cached)


def test_the_best_variant_that_passes_is_chosen() -> None:
    probe = FakeProbe()
    info = pick(probe)
    assert (info.variant, info.source, info.rejected) == ("zen4", "self-test", [])
    assert info.self_test_tokens_per_second == 40.0 and probe.calls == ["zen4"]
    assert info.path == "/lib/libggml-cpu-zen4.so"


def test_a_variant_that_dies_falls_back_to_the_portable_one(caplog: pytest.LogCaptureFixture) -> None:
    probe = FakeProbe({"zen4": "killed by SIGSEGV"})
    with caplog.at_level(logging.WARNING, "assistant.llm"):
        info = pick(probe)
    assert (info.variant, info.source) == ("haswell", "self-test")
    assert info.rejected == [{"variant": "zen4", "reason": "killed by SIGSEGV"}]
    assert probe.calls == ["zen4", "haswell"]
    assert "zen4 failed its self-test (killed by SIGSEGV); falling back to haswell" in caplog.text


def test_when_every_variant_dies_the_error_names_each_and_its_flags() -> None:
    probe = FakeProbe({n: "killed by SIGILL" for n in BUILT})
    with pytest.raises(CpuBackendError) as err:
        pick(probe)
    assert probe.calls == ["zen4", "haswell", "icelake", "skylakex", "x64"]
    assert "zen4 (needs sse4_2 avx f16c fma avx2 bmi2 avx512f" in err.value.message
    assert "x64 (needs none): killed by SIGILL" in err.value.message


def test_a_cached_verdict_is_used_without_a_test() -> None:
    probe = FakeProbe()
    info = pick(probe, cached={"variant": "haswell", "rejected": [{"variant": "zen4", "reason": "killed by SIGSEGV"}],
                              "tokens_per_second": 21.0})
    assert (info.variant, info.source, probe.calls) == ("haswell", "cache", [])
    assert info.rejected[0]["variant"] == "zen4"


def test_a_cached_variant_no_longer_eligible_is_tested_again() -> None:
    probe = FakeProbe()
    info = pick(probe, flags=NO_AVX512, cached={"variant": "zen4"})
    assert (info.variant, probe.calls) == ("haswell", ["haswell"])


def test_without_a_model_the_portable_variant_runs_untested() -> None:
    probe = FakeProbe()
    info = pick(probe, model=None)
    assert (info.variant, info.source, probe.calls) == ("haswell", "untested", [])


def test_no_eligible_variant_is_one_clear_error() -> None:
    with pytest.raises(CpuBackendError, match="no llama.cpp CPU variant of this build runs on this CPU"):
        pick(FakeProbe(), flags=NO_AVX512, built={"zen4": BUILT["zen4"]})


def test_a_named_variant_is_tested_and_used() -> None:
    probe = FakeProbe()
    info = pick(probe, requested="skylakex")
    assert (info.variant, info.source, probe.calls) == ("skylakex", "setting", ["skylakex"])


def test_a_named_variant_the_cpu_lacks_flags_for_names_them() -> None:
    probe = FakeProbe()
    with pytest.raises(CpuBackendError) as err:
        pick(probe, requested="zen4", flags=NO_AVX512)
    assert "'zen4' needs CPU flags sse4_2 avx f16c fma avx2 bmi2 avx512f" in err.value.message
    assert "lacks avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16" in err.value.message
    assert probe.calls == []  # never run


def test_a_named_variant_not_built_or_dying_is_an_error() -> None:
    with pytest.raises(CpuBackendError, match="'sapphirerapids' .* is not in this build; built: x64, haswell"):
        pick(FakeProbe(), requested="sapphirerapids")
    with pytest.raises(CpuBackendError, match=r"'zen4' failed its self-test \(killed by SIGSEGV\); it needs CPU flags"):
        pick(FakeProbe({"zen4": "killed by SIGSEGV"}), requested="zen4")
    with pytest.raises(CpuBackendError, match="is not a llama.cpp CPU variant"):
        pick(FakeProbe(), requested="pentium")


@pytest.mark.parametrize(("code", "stdout", "ok", "reason"), [
    (-11, "", False, "killed by SIGSEGV"),
    (-4, "", False, "killed by SIGILL"),
    (0, '{"ok": true, "tokens_per_second": 44.5}\n', True, ""),
    (3, '{"ok": false, "reason": "generated no text"}', False, "generated no text"),
    (1, "garbage", False, "exit 1: boom"),
])
def test_probe_verdicts(code: int, stdout: str, ok: bool, reason: str) -> None:
    result = probe_verdict(code, stdout, "Traceback\nboom")
    assert (result.ok, result.reason) == (ok, reason)


def test_a_child_killed_by_sigsegv_is_a_verdict_not_a_crash() -> None:
    crash = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    result = subprocess_probe(BUILT["zen4"], MODEL, 1, command=crash)
    assert result == ProbeResult(False, "killed by SIGSEGV")
    hang = [sys.executable, "-c", "import time; time.sleep(30)"]
    assert subprocess_probe(BUILT["zen4"], MODEL, 1, command=hang, timeout=0.5).reason == "no answer within 0 s"


def test_the_cache_key_changes_with_the_build_and_the_cpu(tmp_path: Path) -> None:
    lib = tmp_path / "libggml-cpu-zen4.so"
    lib.write_bytes(b"x")
    built = {"zen4": lib}
    key = cache_key(built, "model name : AMD EPYC\n", ZEN4)
    assert key == cache_key(built, "model name : AMD EPYC\n", ZEN4)
    assert key != cache_key(built, "model name : AMD EPYC\n", NO_AVX512)
    assert key != cache_key(built, "model name : Intel Xeon\n", ZEN4)
    lib.write_bytes(b"rebuilt")
    assert key != cache_key(built, "model name : AMD EPYC\n", ZEN4)


def test_the_cache_round_trip_and_a_read_only_home(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "cache" / "v.json"
    write_cache(path, {"key": "k1", "variant": "zen4"})
    assert read_cache(path, "k1") == {"key": "k1", "variant": "zen4"}
    assert read_cache(path, "k2") is None  # another build or CPU
    path.write_text("{not json")
    assert read_cache(path, "k1") is None
    blocked = tmp_path / "file"
    blocked.write_text("")
    with caplog.at_level(logging.WARNING, "assistant.llm"):
        write_cache(blocked / "v.json", {"key": "k"})  # a file where the directory should be
    assert "could not cache the llama.cpp CPU variant" in caplog.text


def test_describe_says_variant_source_and_rejections() -> None:
    info = cpu_backend.BackendInfo("haswell", "self-test", rejected=[{"variant": "zen4", "reason": "killed by SIGSEGV"}],
                                   self_test_tokens_per_second=21.04)
    assert info.describe() == ("llama.cpp CPU backend: haswell (score 64, from self-test; rejected: zen4 "
                               "(killed by SIGSEGV); self-test 21.0 tok/s)")
    assert "built in" in cpu_backend.BackendInfo(None, "static", features=["AVX2"]).describe()


def test_default_cache_path_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cpu_backend.default_cache_path() == tmp_path / "assistant" / "llama-cpu-variant.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cpu_backend.default_cache_path() == Path(os.path.expanduser("~/.cache/assistant/llama-cpu-variant.json"))


@pytest.fixture
def fake_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A lib directory with three variants, a Zen 4 /proc/cpuinfo, and ggml's calls recorded."""
    libs = tmp_path / "lib"
    libs.mkdir()
    for name in ("haswell", "zen4", "x64"):
        (libs / f"libggml-cpu-{name}.so").write_bytes(name.encode())
    loaded: list[str] = []
    registered = {"count": 0}
    monkeypatch.setattr(cpu_backend, "lib_dir", lambda: libs)
    monkeypatch.setattr(cpu_backend, "registered_backends", lambda directory: registered["count"])
    monkeypatch.setattr(cpu_backend, "load_library", lambda directory, path: loaded.append(path.name) or True)
    monkeypatch.setattr(cpu_backend, "system_features", lambda: ["AVX2"])
    monkeypatch.setattr(cpu_backend, "read_cpuinfo",
                        lambda: "model name : AMD EPYC\nflags : " + " ".join(sorted(ZEN4)) + "\n")
    monkeypatch.setattr(cpu_backend, "machine_arch", lambda: "x86")
    monkeypatch.setattr(cpu_backend, "_current", None)
    return loaded, registered


def test_ensure_loads_once_and_caches_autos_verdict(fake_build, tmp_path: Path) -> None:
    loaded, _ = fake_build
    cache = tmp_path / "v.json"
    probe = FakeProbe({"zen4": "killed by SIGSEGV"})
    info = cpu_backend.ensure_cpu_backend(model=MODEL, cache_path=cache, probe=probe)
    assert (info.variant, info.source, loaded) == ("haswell", "self-test", ["libggml-cpu-haswell.so"])
    assert cpu_backend.current() is info and info.features == ["AVX2"]
    assert cpu_backend.ensure_cpu_backend(model=MODEL, cache_path=cache, probe=probe) is info  # once per process
    assert loaded == ["libggml-cpu-haswell.so"]
    record = read_cache(cache, json.loads(cache.read_text())["key"])
    assert record["variant"] == "haswell" and record["rejected"][0]["variant"] == "zen4"
    cpu_backend.reset_for_tests()  # the next start of the server: the verdict is read, nothing is tested
    probe.calls.clear()
    again = cpu_backend.ensure_cpu_backend(model=MODEL, cache_path=cache, probe=probe)
    assert (again.variant, again.source, probe.calls) == ("haswell", "cache", [])


def test_a_forced_variant_does_not_become_autos_choice(fake_build, tmp_path: Path) -> None:
    cache = tmp_path / "v.json"
    forced = cpu_backend.ensure_cpu_backend(requested="x64", model=MODEL, cache_path=cache, probe=FakeProbe())
    assert (forced.variant, forced.source) == ("x64", "setting")
    assert not cache.exists()
    cpu_backend.reset_for_tests()
    auto = cpu_backend.ensure_cpu_backend(model=MODEL, cache_path=cache, probe=FakeProbe())
    assert (auto.variant, auto.source) == ("zen4", "self-test")


def test_a_build_without_dispatch_is_reported_static(fake_build, tmp_path: Path) -> None:
    loaded, registered = fake_build
    registered["count"] = 1  # the CPU backend registered itself (LLAMA_CPU=portable)
    info = cpu_backend.ensure_cpu_backend(model=MODEL, cache_path=tmp_path / "v.json", probe=FakeProbe())
    assert (info.variant, info.source, loaded) == (None, "preloaded", [])


def test_a_library_ggml_refuses_is_a_clear_error(fake_build, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cpu_backend, "load_library", lambda directory, path: False)
    with pytest.raises(CpuBackendError, match=r"'zen4' could not be loaded from .*libggml-cpu-zen4.so \(it needs CPU flags"):
        cpu_backend.ensure_cpu_backend(model=MODEL, cache_path=tmp_path / "v.json", probe=FakeProbe())
    assert cpu_backend.current() is None
