"""Engine threads from physical cores and batch sizes from memory, unless the settings say."""

from __future__ import annotations

from pathlib import Path

from assistant.config import InferenceSettings
from assistant.llm.machine import GIB, cgroup_cpu_quota, engine_sizes, physical_cores


def cpuinfo(topology: list[tuple[int, int, int]]) -> str:
    """(processor, physical id, core id) per logical CPU."""
    return "".join(f"processor\t: {p}\nphysical id\t: {pkg}\ncore id\t\t: {core}\nflags\t\t: avx2\n\n"
                   for p, pkg, core in topology)


# 4 logical CPUs on 2 cores (hyper-threading: 0/2 and 1/3 are siblings)
SMT = cpuinfo([(0, 0, 0), (1, 0, 1), (2, 0, 0), (3, 0, 1)])


def test_physical_cores_not_logical_ones() -> None:
    assert physical_cores(SMT, allowed={0, 1, 2, 3}, quota=None) == 2
    assert physical_cores(SMT, allowed={0, 2}, quota=None) == 1  # both siblings of core 0
    two_sockets = cpuinfo([(0, 0, 0), (1, 1, 0)])  # the same core id on two packages: two cores
    assert physical_cores(two_sockets, allowed={0, 1}, quota=None) == 2


def test_a_cgroup_quota_caps_the_threads(tmp_path: Path) -> None:
    assert physical_cores(SMT, allowed={0, 1, 2, 3}, quota=1.0) == 1
    assert physical_cores(SMT, allowed={0, 1, 2, 3}, quota=1.5) == 2
    limit = tmp_path / "cpu.max"
    limit.write_text("150000 100000\n")
    assert cgroup_cpu_quota(limit) == 1.5
    limit.write_text("max 100000\n")
    assert cgroup_cpu_quota(limit) is None
    assert cgroup_cpu_quota(tmp_path / "missing") is None


def test_arm_without_topology_counts_processors() -> None:
    pi = "".join(f"processor\t: {p}\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd\n\n" for p in range(4))
    assert physical_cores(pi, allowed={0, 1, 2, 3}, quota=None) == 4


def test_this_machine_has_at_least_one_core() -> None:
    assert physical_cores() >= 1


def test_batch_sizes_from_memory_and_context() -> None:
    big = engine_sizes(threads=None, batch_threads=None, batch_size=None, ubatch_size=None, context_length=4096,
                       total_memory=24 * GIB, cores=2)
    assert (big.threads, big.batch_threads, big.batch_size, big.ubatch_size) == (2, 2, 512, 512)
    pi = engine_sizes(threads=None, batch_threads=None, batch_size=None, ubatch_size=None, context_length=4096,
                      total_memory=4 * GIB, cores=4)
    assert (pi.threads, pi.batch_size, pi.ubatch_size) == (4, 512, 256)
    tiny = engine_sizes(threads=None, batch_threads=None, batch_size=None, ubatch_size=None, context_length=256,
                        total_memory=2 * GIB, cores=1)
    assert (tiny.batch_size, tiny.ubatch_size) == (256, 128)  # never above the context


def test_settings_override_the_machine() -> None:
    sizes = engine_sizes(threads=3, batch_threads=6, batch_size=1024, ubatch_size=2048, context_length=4096,
                         total_memory=24 * GIB, cores=2)
    assert (sizes.threads, sizes.batch_threads, sizes.batch_size, sizes.ubatch_size) == (3, 6, 1024, 1024)


def test_inference_settings_default_to_the_machine() -> None:
    settings = InferenceSettings()
    assert (settings.threads, settings.batch_size, settings.cpu_variant) == (None, None, "auto")
