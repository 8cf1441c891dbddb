"""Which llama.cpp CPU variants a CPU may run, best first (names, files and /proc/cpuinfo only)."""

from __future__ import annotations

from pathlib import Path

from assistant.llm.cpu_variants import (
    VARIANTS,
    built_variants,
    candidates,
    cpu_model_name,
    fallback_order,
    machine_arch,
    parse_cpu_flags,
)

# an AMD EPYC Zen 4 (this project's CI host): AVX-512 with VBMI, VNNI and BF16, no AVX-VNNI, no AMX
ZEN4 = ("fpu sse sse2 ssse3 sse4_1 sse4_2 fma avx f16c avx2 bmi1 bmi2 avx512f avx512dq avx512ifma avx512cd "
        "avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vbmi2 avx512_vnni avx512_bitalg")
HASWELL_ONLY = "fpu sse sse2 ssse3 sse4_1 sse4_2 fma avx f16c avx2 bmi1 bmi2"
# what Linux shows when the kernel does not enable AVX-512 state (XCR0): the flags are gone
AMX_VM = ZEN4 + " amx_tile amx_int8 amx_bf16"
SHIPPED = ["x64", "haswell", "skylakex", "icelake", "zen4", "alderlake"]


def cpuinfo(flags: str, model: str = "AMD EPYC") -> str:
    return f"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: {model}\nflags\t\t: {flags}\n\n"


def built(names: list[str]) -> dict[str, Path]:
    return {name: Path(f"/lib/libggml-cpu-{name}.so") for name in names}


def test_scores_are_ggmls_own() -> None:
    # ggml_backend_cpu_x86_score: 1 + FMA 1 + F16C 2 + SSE42 4 + BMI2 8 + AVX 16 + AVX2 32 + AVX512 128
    # + VBMI 256 + BF16 512 + VNNI 1024 (+ AVX_VNNI 64, AMX_INT8 2048)
    assert VARIANTS["x64"].score == 1
    assert VARIANTS["haswell"].score == 64
    assert VARIANTS["skylakex"].score == 192
    assert VARIANTS["icelake"].score == 1472
    assert VARIANTS["zen4"].score == 1984
    assert VARIANTS["alderlake"].score == 128
    assert VARIANTS["sapphirerapids"].score == 4032


def test_flags_of_x86_and_arm_cpuinfo() -> None:
    assert "avx512_bf16" in parse_cpu_flags(cpuinfo(ZEN4))
    arm = "processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm aes crc32 asimdhp asimddp\n\n"
    assert parse_cpu_flags(arm) == {"fp", "asimd", "evtstrm", "aes", "crc32", "asimdhp", "asimddp"}
    assert parse_cpu_flags("") == frozenset()
    assert cpu_model_name(cpuinfo(ZEN4, "AMD EPYC 9454")) == "AMD EPYC 9454"


def test_zen4_runs_zen4_first_then_the_rest_by_score() -> None:
    order = candidates(built(SHIPPED), parse_cpu_flags(cpuinfo(ZEN4)), arch="x86")
    assert [v.name for v in order] == ["zen4", "icelake", "skylakex", "haswell", "x64"]  # no avx_vnni: no alderlake


def test_after_the_best_fails_the_portable_variant_comes_next() -> None:
    order = candidates(built(SHIPPED), parse_cpu_flags(cpuinfo(ZEN4)), arch="x86")
    assert [v.name for v in fallback_order(order, "x86")] == ["zen4", "haswell", "icelake", "skylakex", "x64"]
    assert fallback_order([], "x86") == []


def test_a_cpu_without_avx512_gets_haswell() -> None:
    order = candidates(built(SHIPPED), parse_cpu_flags(cpuinfo(HASWELL_ONLY)), arch="x86")
    assert [v.name for v in order] == ["haswell", "x64"]
    assert VARIANTS["zen4"].missing(parse_cpu_flags(cpuinfo(HASWELL_ONLY)))[:2] == ["avx512f", "avx512cd"]


def test_an_alder_lake_gets_its_avx_vnni_variant() -> None:
    order = candidates(built(SHIPPED), parse_cpu_flags(cpuinfo(HASWELL_ONLY + " avx_vnni")), arch="x86")
    assert order[0].name == "alderlake"


def test_amx_is_never_a_candidate_unless_allowed() -> None:
    everything = [*SHIPPED, "sapphirerapids"]
    flags = parse_cpu_flags(cpuinfo(AMX_VM))
    assert "sapphirerapids" not in [v.name for v in candidates(built(everything), flags, arch="x86")]
    assert candidates(built(everything), flags, arch="x86", allow_amx=True)[0].name == "sapphirerapids"


def test_unknown_and_foreign_libraries_are_not_candidates() -> None:
    names = [*SHIPPED, "future9000", "armv8.2_1"]
    order = candidates(built(names), parse_cpu_flags(cpuinfo(ZEN4)), arch="x86")
    assert {v.name for v in order} <= set(SHIPPED)


def test_arm_variants_by_their_features() -> None:
    names = ["armv8.0_1", "armv8.2_1", "armv8.2_2", "armv8.6_1"]
    pi5 = parse_cpu_flags("processor : 0\nFeatures : fp asimd asimdhp asimddp\n")  # Cortex-A76
    assert [v.name for v in candidates(built(names), pi5, arch="arm")] == ["armv8.2_2", "armv8.2_1", "armv8.0_1"]
    assert machine_arch("aarch64") == "arm" and machine_arch("x86_64") == "x86"


def test_built_variants_reads_the_library_names(tmp_path: Path) -> None:
    for name in ("libggml-cpu-zen4.so", "libggml-cpu-haswell.so", "libggml-base.so", "libllama.so"):
        (tmp_path / name).write_bytes(b"")
    assert set(built_variants(tmp_path)) == {"zen4", "haswell"}
    assert built_variants(tmp_path / "missing") == {}
