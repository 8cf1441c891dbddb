"""llama.cpp's CPU variants: which instruction-set build a CPU can run, best first.

The embedded engine is built with llama.cpp's runtime CPU dispatch (``scripts/llama_wheel.sh``:
``GGML_BACKEND_DL`` + ``GGML_CPU_ALL_VARIANTS``): one ``libggml-cpu-<variant>.so`` per
instruction-set level. This module only decides, from names, files and ``/proc/cpuinfo``; loading
and self-testing are :mod:`assistant.llm.cpu_backend`'s.

Two differences from ggml's own choice (``ggml_backend_load_best``), both about crashes:

- ggml reads CPUID only, so it picks AVX-512/AMX kernels even where the kernel does not save that
  register state. Linux drops those flags from ``/proc/cpuinfo`` when the state is not enabled
  (XCR0), so a variant is a candidate only if every flag it was compiled for is listed there.
- ``sapphirerapids`` (AMX) is never a candidate: ggml checks AMX with CPUID and nothing else, and a
  VM that advertises AMX without granting tile state segfaults in decode (the crash the portable
  build was a workaround for). The build leaves it out too; a Sapphire Rapids CPU picks ``zen4``.

Order: ggml's own score (``ggml-cpu/arch/*/cpu-feats.cpp``), so the same variant wins that ggml
would pick on a CPU where the OS grants everything.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# ggml feature -> the /proc/cpuinfo flags it needs (x86 "flags", ARM "Features")
FEATURE_FLAGS: dict[str, tuple[str, ...]] = {
    "SSE42": ("sse4_2",),
    "AVX": ("avx",),
    "F16C": ("f16c",),
    "FMA": ("fma",),
    "AVX2": ("avx2",),
    "BMI2": ("bmi2",),
    "AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "AVX512_VBMI": ("avx512vbmi",),
    "AVX512_VNNI": ("avx512_vnni",),
    "AVX512_BF16": ("avx512_bf16",),
    "AVX_VNNI": ("avx_vnni",),
    "AMX_TILE": ("amx_tile",),
    "AMX_INT8": ("amx_int8",),
    "DOTPROD": ("asimddp",),
    "FP16_VECTOR_ARITHMETIC": ("asimdhp",),
    "SVE": ("sve",),
    "MATMUL_INT8": ("i8mm",),
    "SVE2": ("sve2",),
    "SME": ("sme",),
}
# ggml_backend_cpu_x86_score / ggml_backend_cpu_aarch64_score: 1 + these for each compiled feature
FEATURE_SCORE: dict[str, int] = {
    "FMA": 1, "F16C": 2, "SSE42": 4, "BMI2": 8, "AVX": 16, "AVX2": 32, "AVX_VNNI": 64, "AVX512": 128,
    "AVX512_VBMI": 256, "AVX512_BF16": 512, "AVX512_VNNI": 1024, "AMX_INT8": 2048, "AMX_TILE": 0,
    "DOTPROD": 2, "FP16_VECTOR_ARITHMETIC": 4, "SVE": 8, "MATMUL_INT8": 16, "SVE2": 32, "SME": 64,
}


@dataclass(frozen=True)
class CpuVariant:
    name: str
    arch: str  # "x86" or "arm"
    features: tuple[str, ...]

    @property
    def flags(self) -> tuple[str, ...]:
        """The /proc/cpuinfo flags the CPU (and the kernel) must have for this variant's code."""
        return tuple(flag for feature in self.features for flag in FEATURE_FLAGS[feature])

    @property
    def score(self) -> int:
        return 1 + sum(FEATURE_SCORE[f] for f in self.features)

    def missing(self, flags: Iterable[str]) -> list[str]:
        have = set(flags)
        return [flag for flag in self.flags if flag not in have]


_HASWELL = ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2")
_SKYLAKEX = (*_HASWELL, "AVX512")
# llama.cpp's list (ggml/src/CMakeLists.txt), in its order
VARIANTS: dict[str, CpuVariant] = {v.name: v for v in (
    CpuVariant("x64", "x86", ()),
    CpuVariant("sse42", "x86", ("SSE42",)),
    CpuVariant("sandybridge", "x86", ("SSE42", "AVX")),
    CpuVariant("ivybridge", "x86", ("SSE42", "AVX", "F16C")),
    CpuVariant("piledriver", "x86", ("SSE42", "AVX", "F16C", "FMA")),
    CpuVariant("haswell", "x86", _HASWELL),
    CpuVariant("skylakex", "x86", _SKYLAKEX),
    CpuVariant("cannonlake", "x86", (*_SKYLAKEX, "AVX512_VBMI")),
    CpuVariant("cascadelake", "x86", (*_SKYLAKEX, "AVX512_VNNI")),
    CpuVariant("icelake", "x86", (*_SKYLAKEX, "AVX512_VBMI", "AVX512_VNNI")),
    CpuVariant("cooperlake", "x86", (*_SKYLAKEX, "AVX512_VNNI", "AVX512_BF16")),
    CpuVariant("zen4", "x86", (*_SKYLAKEX, "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16")),
    CpuVariant("alderlake", "x86", (*_HASWELL, "AVX_VNNI")),
    CpuVariant("sapphirerapids", "x86",
               (*_SKYLAKEX, "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_TILE", "AMX_INT8")),
    CpuVariant("armv8.0_1", "arm", ()),
    CpuVariant("armv8.2_1", "arm", ("DOTPROD",)),
    CpuVariant("armv8.2_2", "arm", ("DOTPROD", "FP16_VECTOR_ARITHMETIC")),
    CpuVariant("armv8.2_3", "arm", ("DOTPROD", "FP16_VECTOR_ARITHMETIC", "SVE")),
    CpuVariant("armv8.6_1", "arm", ("DOTPROD", "FP16_VECTOR_ARITHMETIC", "SVE", "MATMUL_INT8")),
    CpuVariant("armv8.6_2", "arm", ("DOTPROD", "FP16_VECTOR_ARITHMETIC", "SVE", "MATMUL_INT8", "SVE2")),
    CpuVariant("armv9.2_1", "arm", ("DOTPROD", "FP16_VECTOR_ARITHMETIC", "SVE", "MATMUL_INT8", "SME")),
)}
AMX_VARIANTS = frozenset({"sapphirerapids"})
# The fallback when the best variant fails its self-test: the old portable build's instruction set
# (AVX2/FMA/F16C), then the variant without SIMD.
PORTABLE = {"x86": "haswell", "arm": "armv8.0_1"}
BASELINE = {"x86": "x64", "arm": "armv8.0_1"}
_LIB = re.compile(r"^libggml-cpu-(?P<name>.+?)\.(so|dylib|dll)$")


def machine_arch(machine: str | None = None) -> str:
    machine = (machine or platform.machine()).lower()
    return "arm" if machine in ("aarch64", "arm64") or machine.startswith("armv8") else "x86"


def parse_cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The flags of the first processor in a /proc/cpuinfo text (x86 ``flags``, ARM ``Features``)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def read_cpuinfo(path: Path = Path("/proc/cpuinfo")) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_model_name(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "CPU part"):
            return value.strip()
    return platform.processor() or platform.machine()


def built_variants(lib_dir: Path) -> dict[str, Path]:
    """The CPU variant libraries in a llama-cpp-python ``lib`` directory, by variant name."""
    found: dict[str, Path] = {}
    if lib_dir.is_dir():
        for path in sorted(lib_dir.iterdir()):
            match = _LIB.match(path.name)
            if match:
                found[match["name"]] = path
    return found


def candidates(built: Mapping[str, Path], flags: Iterable[str], *, arch: str,
               allow_amx: bool = False) -> list[CpuVariant]:
    """Built variants this CPU can run, best (ggml's score) first. Unknown names are not candidates:
    what a library needs is known only for the names in :data:`VARIANTS`."""
    have = frozenset(flags)
    found = [VARIANTS[name] for name in built if name in VARIANTS]
    eligible = [v for v in found if v.arch == arch and not v.missing(have)
                and (allow_amx or v.name not in AMX_VARIANTS)]
    return sorted(eligible, key=lambda v: (-v.score, v.name))


def fallback_order(best_first: list[CpuVariant], arch: str) -> list[CpuVariant]:
    """The order to try: the eligible variants best first, but after the best one fails, the
    portable one before the others (it is the build that ran everywhere before dispatch)."""
    if not best_first:
        return []
    portable = [v for v in best_first[1:] if v.name == PORTABLE[arch]]
    rest = [v for v in best_first[1:] if v.name != PORTABLE[arch]]
    return [best_first[0], *portable, *rest]
