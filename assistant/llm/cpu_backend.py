"""Load llama.cpp's CPU backend: the best variant this machine runs, proven by a self-test.

llama-cpp-python (0.3.x) never loads dynamic backends itself (its issue #2069), and ggml's own
search looks beside the Python executable, not in ``llama_cpp/lib``. So before the first ``Llama``
the engine calls :func:`ensure_cpu_backend`, which

1. lists the variant libraries of the installed build and the ones this CPU can run
   (:mod:`assistant.llm.cpu_variants`: flags from ``/proc/cpuinfo``, AMX never);
2. unless a cached verdict for this build, CPU and kernel exists, runs each candidate best first in
   a **subprocess** (``python -m assistant.llm.cpu_probe``): load the variant, load the model,
   generate 16 greedy tokens. A variant that dies (SIGSEGV, SIGILL), hangs or answers nothing is
   rejected and the next is tried, the portable ``haswell`` right after the best one;
3. loads the winner into this process with ``ggml_backend_load`` and logs one line saying which
   variant runs, where the choice came from and what was rejected.

``inference.cpu_variant`` names a variant instead of ``auto``; one the build lacks, the CPU lacks
flags for, or that fails its self-test is one start-up error naming it and the flags it needs.
A build without dispatch (the portable single library, ``LLAMA_CPU=portable``) registers its CPU
backend statically; then nothing is chosen and the status says ``static``.

The choice is process-wide (ggml's backend registry is), so it is module state, made once under a
lock. :func:`current` reports it for ``/v1/system/status``.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from assistant.errors import ServiceUnavailableError
from assistant.llm.cpu_variants import (
    PORTABLE,
    VARIANTS,
    CpuVariant,
    built_variants,
    candidates,
    cpu_model_name,
    fallback_order,
    machine_arch,
    parse_cpu_flags,
    read_cpuinfo,
)

log = logging.getLogger("assistant.llm")

PROBE_TOKENS = 16
PROBE_TIMEOUT_SECS = 120.0
CACHE_NAME = "llama-cpu-variant.json"


class CpuBackendError(ServiceUnavailableError):
    """No CPU variant of llama.cpp can run here (or the one asked for cannot)."""


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    reason: str = ""  # why not, for the log and the status
    tokens_per_second: float | None = None


# (variant library, model file, threads) -> verdict; the real one runs a subprocess
Probe = Callable[[Path, Path, int], ProbeResult]


@dataclass
class BackendInfo:
    """Which CPU code runs the embedded model, and how that was decided."""

    variant: str | None  # None for a build without dispatch
    source: str  # "self-test", "cache", "setting", "static", "untested"
    features: list[str] = field(default_factory=list)  # what llama.cpp reports it was built with
    rejected: list[dict[str, str]] = field(default_factory=list)  # [{variant, reason}]
    self_test_tokens_per_second: float | None = None
    path: str | None = None

    def describe(self) -> str:
        if self.variant is None:
            return f"llama.cpp CPU backend: built in ({', '.join(self.features) or 'no SIMD'})"
        rejected = ", ".join(f"{r['variant']} ({r['reason']})" for r in self.rejected) or "none"
        speed = (f"; self-test {self.self_test_tokens_per_second:.1f} tok/s"
                 if self.self_test_tokens_per_second else "")
        return (f"llama.cpp CPU backend: {self.variant} (score {VARIANTS[self.variant].score if self.variant in VARIANTS else '?'}, "
                f"from {self.source}; rejected: {rejected}{speed})")


# --- the library ---------------------------------------------------------------------------------


def lib_dir() -> Path:
    """Where llama-cpp-python loads its libraries from (it honours ``LLAMA_CPP_LIB_PATH`` too)."""
    import llama_cpp

    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    return Path(override) if override else Path(llama_cpp.__file__).parent / "lib"


def _loaded_ggml() -> Path | None:
    """The libggml file this process already has mapped (libllama's dependency)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if Path(path).name.startswith(("libggml.so", "libggml.dylib")):
            return Path(path)
    return None


@functools.cache
def _ggml(directory: Path) -> ctypes.CDLL:
    """libggml as libllama loaded it. A wheel holds libggml.so, .so.0 and .so.0.x as three copies of
    one file (no symlinks), and a second copy would be a second, empty backend registry: so the
    handle is taken by the path already mapped (dlopen hands back the same one)."""
    import llama_cpp  # noqa: F401  loads libllama and with it libggml

    mapped = _loaded_ggml()
    for path in ([mapped] if mapped else []) + [directory / n for n in ("libggml.so.0", "libggml.so", "libggml.dylib")]:
        if path.exists():
            lib = ctypes.CDLL(str(path))
            lib.ggml_backend_reg_count.restype = ctypes.c_size_t
            lib.ggml_backend_load.restype = ctypes.c_void_p
            lib.ggml_backend_load.argtypes = [ctypes.c_char_p]
            return lib
    raise CpuBackendError(f"llama-cpp-python's libggml is missing from {directory}; reinstall it with `make setup`")


def registered_backends(directory: Path) -> int:
    return int(_ggml(directory).ggml_backend_reg_count())


def load_library(directory: Path, path: Path) -> bool:
    """Register one CPU variant in this process; False when ggml refuses the file."""
    return bool(_ggml(directory).ggml_backend_load(str(path).encode()))


def system_features() -> list[str]:
    """The features llama.cpp reports for the loaded CPU backend (``llama_print_system_info``)."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    features = []
    for part in info.split("|"):
        name, _, value = part.partition("=")
        name = name.split(":")[-1].strip()
        if value.strip() == "1" and name:
            features.append(name)
    return features


# --- the self-test -------------------------------------------------------------------------------


def subprocess_probe(library: Path, model: Path, threads: int, *, timeout: float = PROBE_TIMEOUT_SECS,
                     command: list[str] | None = None) -> ProbeResult:
    """Run the probe in a child process: a crash there is a verdict, not the server's death.
    ``command`` replaces the probe's command line (tests)."""
    cmd = command or [sys.executable, "-m", "assistant.llm.cpu_probe", "--library", str(library),
                      "--model", str(model), "--threads", str(threads), "--tokens", str(PROBE_TOKENS)]
    env = {k: v for k, v in os.environ.items() if k != "GGML_BACKEND_PATH"}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return ProbeResult(False, f"no answer within {timeout:.0f} s")
    return probe_verdict(out.returncode, out.stdout, out.stderr)


def probe_verdict(returncode: int, stdout: str, stderr: str) -> ProbeResult:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return ProbeResult(False, f"killed by {name}")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    try:
        report = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (stderr.strip().splitlines() or ["no output"])[-1][:200]
        return ProbeResult(False, f"exit {returncode}: {tail}")
    if returncode != 0 or not report.get("ok"):
        return ProbeResult(False, str(report.get("reason") or f"exit {returncode}"))
    return ProbeResult(True, tokens_per_second=report.get("tokens_per_second"))


# --- the cached verdict --------------------------------------------------------------------------


def default_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "assistant" / CACHE_NAME


def cache_key(built: dict[str, Path], cpuinfo: str, flags: frozenset[str]) -> str:
    """Changes when the build (its files), the CPU or the kernel changes: then the test runs again."""
    try:
        import llama_cpp

        version = llama_cpp.__version__
    except ImportError:
        version = "?"
    parts = [version, os.uname().release, cpu_model_name(cpuinfo), " ".join(sorted(flags))]
    for name, path in sorted(built.items()):
        try:
            stat = path.stat()
            parts.append(f"{name}:{stat.st_size}:{int(stat.st_mtime)}")
        except OSError:
            parts.append(f"{name}:missing")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def read_cache(path: Path, key: str) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


def write_cache(path: Path, record: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:  # a read-only home: the test runs again next start, nothing worse
        log.warning("could not cache the llama.cpp CPU variant at %s: %s", path, exc)


# --- the choice ----------------------------------------------------------------------------------


def needs(variant: CpuVariant) -> str:
    return " ".join(variant.flags) or "none"


def choose(*, built: dict[str, Path], flags: frozenset[str], arch: str, requested: str,
           model: Path | None, threads: int, probe: Probe, cached: dict | None,
           allow_amx: bool = False) -> BackendInfo:
    """Pick the variant to load (pure apart from ``probe``); raises :class:`CpuBackendError`."""
    if requested != "auto":
        return _choose_requested(built=built, flags=flags, arch=arch, requested=requested, model=model,
                                 threads=threads, probe=probe, cached=cached)
    order = fallback_order(candidates(built, flags, arch=arch, allow_amx=allow_amx), arch)
    if not order:
        names = ", ".join(built) or "none"
        raise CpuBackendError(f"no llama.cpp CPU variant of this build runs on this CPU (built: {names}; "
                              f"the portable one, {PORTABLE[arch]}, needs CPU flags "
                              f"{needs(VARIANTS[PORTABLE[arch]])})")
    if cached and cached.get("variant") in {v.name for v in order}:
        return BackendInfo(cached["variant"], "cache", rejected=list(cached.get("rejected", [])),
                           self_test_tokens_per_second=cached.get("tokens_per_second"),
                           path=str(built[cached["variant"]]))
    if model is None:  # nothing to test with: the portable variant, chosen again once a model exists
        portable = next((v for v in order if v.name == PORTABLE[arch]), order[-1])
        return BackendInfo(portable.name, "untested", path=str(built[portable.name]))
    rejected: list[dict[str, str]] = []
    for variant in order:
        result = probe(built[variant.name], model, threads)
        if result.ok:
            if rejected:
                log.warning("llama.cpp CPU variant %s failed its self-test (%s); falling back to %s",
                            rejected[0]["variant"], rejected[0]["reason"], variant.name)
            return BackendInfo(variant.name, "self-test", rejected=rejected,
                               self_test_tokens_per_second=result.tokens_per_second, path=str(built[variant.name]))
        rejected.append({"variant": variant.name, "reason": result.reason})
    tried = "; ".join(f"{r['variant']} (needs {needs(VARIANTS[r['variant']])}): {r['reason']}" for r in rejected)
    raise CpuBackendError(f"every llama.cpp CPU variant failed its self-test: {tried}")


def _choose_requested(*, built: dict[str, Path], flags: frozenset[str], arch: str, requested: str,
                      model: Path | None, threads: int, probe: Probe, cached: dict | None) -> BackendInfo:
    variant = VARIANTS.get(requested)
    if variant is None:
        raise CpuBackendError(f"inference.cpu_variant {requested!r} is not a llama.cpp CPU variant; "
                              f"use 'auto' or one of: {', '.join(VARIANTS)}")
    if requested not in built:
        raise CpuBackendError(f"llama.cpp CPU variant {requested!r} (needs CPU flags {needs(variant)}) is not "
                              f"in this build; built: {', '.join(built) or 'none'}")
    if variant.arch != arch:
        raise CpuBackendError(f"llama.cpp CPU variant {requested!r} is for {variant.arch} CPUs, this one is {arch}")
    missing = variant.missing(flags)
    if missing:
        raise CpuBackendError(f"llama.cpp CPU variant {requested!r} needs CPU flags {needs(variant)}; "
                              f"this CPU (or its kernel) lacks {' '.join(missing)}. Set inference.cpu_variant "
                              f"to 'auto' to use the best one it runs")
    if cached and cached.get("variant") == requested:
        return BackendInfo(requested, "cache", self_test_tokens_per_second=cached.get("tokens_per_second"),
                           path=str(built[requested]))
    if model is None:
        return BackendInfo(requested, "setting", path=str(built[requested]))
    result = probe(built[requested], model, threads)
    if not result.ok:
        raise CpuBackendError(f"llama.cpp CPU variant {requested!r} failed its self-test ({result.reason}); it "
                              f"needs CPU flags {needs(variant)}. Set inference.cpu_variant to 'auto' to fall "
                              f"back to one that runs")
    return BackendInfo(requested, "setting", self_test_tokens_per_second=result.tokens_per_second,
                       path=str(built[requested]))


# --- the process-wide state ----------------------------------------------------------------------

_lock = threading.Lock()
_current: BackendInfo | None = None


def current() -> BackendInfo | None:
    """The CPU backend of this process, once the embedded engine has loaded one."""
    return _current


def ensure_cpu_backend(*, requested: str = "auto", model: Path | None = None, threads: int = 1,
                       cache_path: Path | None = None, probe: Probe | None = None,
                       retest: bool = False) -> BackendInfo:
    """Load the CPU variant into this process (once); returns what runs. Idempotent."""
    global _current
    with _lock:
        if _current is not None:
            if requested not in ("auto", _current.variant) and _current.variant is not None:
                log.warning("inference.cpu_variant %r ignored: %s is already loaded in this process",
                            requested, _current.variant)
            return _current
        directory = lib_dir()
        built = built_variants(directory)
        if registered_backends(directory) > 0:
            # a build without dispatch (CPU registered statically) or one someone else already loaded
            source = "static" if not built else "preloaded"
            _current = BackendInfo(None, source, features=system_features())
            log.info(_current.describe())
            return _current
        if not built:
            raise CpuBackendError(f"this llama-cpp-python build has no CPU backend in {directory}; "
                                  f"reinstall it with `make setup`")
        cpuinfo = read_cpuinfo()
        flags = parse_cpu_flags(cpuinfo)
        arch = machine_arch()
        key = cache_key(built, cpuinfo, flags)
        cache_file = cache_path or default_cache_path()
        cached = None if retest else read_cache(cache_file, key)
        allow_amx = os.environ.get("ASSISTANT_LLAMA_ALLOW_AMX") == "1"
        info = choose(built=built, flags=flags, arch=arch, requested=requested, model=model, threads=threads,
                      probe=probe or subprocess_probe, cached=cached, allow_amx=allow_amx)
        info = _load(directory, built, info)
        if info.source == "self-test":  # auto's verdict only: a forced variant must not become auto's choice
            write_cache(cache_file, {"key": key, "variant": info.variant, "rejected": info.rejected,
                                     "tokens_per_second": info.self_test_tokens_per_second,
                                     "tested_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        info.features = system_features()
        _current = info
        (log.warning if info.rejected else log.info)(info.describe())
        return info


def _load(directory: Path, built: dict[str, Path], info: BackendInfo) -> BackendInfo:
    assert info.variant is not None
    if load_library(directory, built[info.variant]):
        return info
    variant = VARIANTS[info.variant]
    raise CpuBackendError(f"llama.cpp CPU variant {info.variant!r} could not be loaded from {built[info.variant]} "
                          f"(it needs CPU flags {needs(variant)})")


def reset_for_tests() -> None:
    """Forget the recorded choice (the library stays loaded: ggml cannot unload it safely)."""
    global _current
    _current = None


def as_dict(info: BackendInfo | None) -> dict | None:
    return None if info is None else asdict(info)
