"""benchmarks/load.py runs end to end (--quick: seconds, a few clients, the hashing embedder)."""

from __future__ import annotations

import pytest

from benchmarks import load

pytestmark = pytest.mark.integration


def test_quick_run_reports_every_figure(tmp_path) -> None:  # noqa: ANN001
    report = load.main(["--quick", "--json", str(tmp_path / "load.json")])
    for phase, clients in (("single", 1), ("many", 4)):
        figures = report[phase]
        assert figures["clients"] == clients
        assert figures["requests"] > 0
        assert figures["errors"] == 0, figures["error_samples"]
        assert figures["p50_ms"] <= figures["p99_ms"]
        assert set(figures["by_path"]) == {"/health", "/v1/memories", "/v1/memories/search", "/v1/snippets",
                                           "/v1/snippets/search"} or figures["requests"] < 20
    assert report["rss_mb"]["start"] > 0 and report["rss_mb"]["end"] > 0
    assert set(report["verdict"]) >= {"p99_ok", "errors_ok", "rss_growth_ok", "throughput_ok"}
    assert (tmp_path / "load.json").exists()


def test_percentiles_and_verdict_arithmetic() -> None:
    single, many = load.Phase(1, 10.0, requests=1000), load.Phase(50, 10.0, requests=1500)
    many.latencies_ms = [float(v) for v in range(1, 101)]
    assert many.percentile(0.5) == 51.0 and many.percentile(0.99) == 100.0
    verdict = load.verdict(single, many, rss_start=100.0, rss_end=104.0)
    assert verdict["throughput_ratio"] == 1.5 and verdict["throughput_ok"]
    assert verdict["rss_growth_ok"] and not verdict["p99_ok"]
