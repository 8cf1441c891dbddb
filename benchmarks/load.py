"""Load on the non-LLM endpoints of the served app: latency, errors, throughput and RSS, at 1 client
and at many.

`assistant serve` runs in a subprocess on loopback (benchmarks/_served.py: a temporary data
directory, the scripted engine in place of the LLM, rate limiting off). The store is seeded over
HTTP with ``--memories`` memories and ``--snippets`` snippets; then each phase runs closed-loop
clients (each sends its next request when the previous answer arrived) for ``--secs`` seconds over
this mix, in turn:

    GET /health                  GET /v1/memories?limit=20        GET /v1/memories/search?q=...
    GET /v1/snippets?limit=20    GET /v1/snippets/search?q=...

The generator is one process of asyncio with a minimal HTTP/1.1 keep-alive client over raw streams
(one connection per client, :class:`RawConnection`): it takes about 5 % of a core at 250 req/s, so
the server has the machine. httpx.AsyncClient was the first choice and was itself the bottleneck:
with 50 concurrent requests it delivered 40-65 req/s while the server sat at 14 % CPU and measured
39 ms per request on its side, against 1.2 s seen by the client. Voice rooms are left out: they need
the [voice] section and a mosquitto broker, and a room list is the same kind of small SQLite read
as the snippet list.

Reported per phase: requests, errors (non-2xx or transport), throughput (req/s), p50/p90/p99/max
latency (ms); and the server's RSS after seeding and warm-up, and at the end. Targets: p99 at
``--clients`` <= 50 ms, 0 errors, RSS growth <= 5 %, throughput(--clients) >= throughput(1).

    .venv/bin/python benchmarks/load.py [--clients 50] [--secs 60] [--embedder sentence-transformers]
    .venv/bin/python benchmarks/load.py --quick      # seconds, few clients: proves the script runs
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._served import ServedApp  # noqa: E402

WORDS = ("coffee garden meeting berlin train invoice sister birthday piano recipe tomato python "
         "holiday dentist marathon budget novel violin museum cinema").split()
P99_TARGET_MS = 50.0
RSS_GROWTH_TARGET = 0.05


@dataclass
class Phase:
    clients: int
    secs: float
    requests: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    by_path: dict[str, list[float]] = field(default_factory=dict, repr=False)

    @property
    def throughput(self) -> float:
        return self.requests / self.secs if self.secs else 0.0

    def percentile(self, q: float) -> float | None:
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[min(int(q * len(ordered)), len(ordered) - 1)]

    def summary(self) -> dict:
        return {
            "clients": self.clients, "secs": round(self.secs, 2), "requests": self.requests,
            "errors": self.errors, "error_samples": self.error_samples[:5],
            "throughput_rps": round(self.throughput, 1),
            "p50_ms": _round(self.percentile(0.50)), "p90_ms": _round(self.percentile(0.90)),
            "p99_ms": _round(self.percentile(0.99)), "max_ms": _round(max(self.latencies_ms, default=None)),
            "mean_ms": _round(statistics.fmean(self.latencies_ms) if self.latencies_ms else None),
            "by_path": {path: {"requests": len(v), "p50_ms": _round(sorted(v)[len(v) // 2]),
                               "p99_ms": _round(sorted(v)[min(int(0.99 * len(v)), len(v) - 1)])}
                        for path, v in sorted(self.by_path.items())},
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def requests_mix(rng: random.Random) -> tuple[str, dict[str, str | int]]:
    pick = rng.randrange(5)
    word = rng.choice(WORDS)
    return [
        ("/health", {}),
        ("/v1/memories", {"limit": 20}),
        ("/v1/memories/search", {"q": f"{word} {rng.choice(WORDS)}", "limit": 5}),
        ("/v1/snippets", {"limit": 20}),
        ("/v1/snippets/search", {"q": word[:4]}),
    ][pick]


def seed(app: ServedApp, memories: int, snippets: int) -> None:
    rng = random.Random(7)
    with httpx.Client(base_url=app.base_url, headers=app.headers, timeout=120) as client:
        for n in range(memories):
            words = " ".join(rng.choice(WORDS) for _ in range(8))
            response = client.post("/v1/memories", json={"content": f"memory {n}: {words}", "summary": words[:40], "importance": 0.5})
            response.raise_for_status()
        for n in range(snippets):
            response = client.post("/v1/snippets", json={"title": f"{rng.choice(WORDS)} note {n}",
                                                          "content": " ".join(rng.choice(WORDS) for _ in range(20))})
            response.raise_for_status()


class RawConnection:
    """One keep-alive HTTP/1.1 connection: GET with a Content-Length answer (what these routes send)."""

    def __init__(self, host: str, port: int, headers: dict[str, str], timeout_secs: float = 30.0):
        self.host, self.port, self.timeout_secs = host, port, timeout_secs
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str, params: dict[str, str | int]) -> tuple[int, bytes]:
        return await asyncio.wait_for(self._get(path, params), self.timeout_secs)

    async def _get(self, path: str, params: dict[str, str | int]) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        target = path + ("?" + urlencode(params) if params else "")
        self.writer.write(f"GET {target} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self.extra}\r\n".encode())
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        length = next((int(h.split(":", 1)[1]) for h in head[1:] if h.lower().startswith("content-length:")), 0)
        return status, await self.reader.readexactly(length)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
            self.reader = self.writer = None


async def run_phase(base_url: str, headers: dict[str, str], clients: int, secs: float, seed_value: int = 1) -> Phase:
    phase = Phase(clients, secs)
    url = urlsplit(base_url)
    stop_at = time.perf_counter() + secs

    async def worker(n: int) -> None:
        rng = random.Random(seed_value * 1000 + n)
        connection = RawConnection(url.hostname or "127.0.0.1", url.port or 80, headers)
        while time.perf_counter() < stop_at:
            path, params = requests_mix(rng)
            started = time.perf_counter()
            try:
                status, body = await connection.get(path, params)
                ok = 200 <= status < 300
                problem = f"{path}: HTTP {status} {body[:200].decode(errors='replace')}"
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError) as exc:
                ok, problem = False, f"{path}: {type(exc).__name__}: {exc}"
                await connection.close()
            elapsed = (time.perf_counter() - started) * 1000
            phase.latencies_ms.append(elapsed)
            phase.by_path.setdefault(path, []).append(elapsed)
            phase.requests += 1
            if not ok:
                phase.errors += 1
                if len(phase.error_samples) < 5:
                    phase.error_samples.append(problem)
        await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(clients)))
    phase.secs = time.perf_counter() - started
    return phase


def verdict(single: Phase, many: Phase, rss_start: float, rss_end: float) -> dict:
    growth = (rss_end - rss_start) / rss_start if rss_start else 0.0
    p99 = many.percentile(0.99) or 0.0
    ratio = many.throughput / single.throughput if single.throughput else 0.0
    return {
        "p99_ms": round(p99, 2), "p99_target_ms": P99_TARGET_MS, "p99_ok": p99 <= P99_TARGET_MS,
        "errors": single.errors + many.errors, "errors_ok": single.errors + many.errors == 0,
        "rss_growth": round(growth, 4), "rss_growth_ok": growth <= RSS_GROWTH_TARGET,
        "throughput_ratio": round(ratio, 3), "throughput_ok": ratio >= 1.0,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients of the second phase")
    parser.add_argument("--secs", type=float, default=60.0, help="length of each phase")
    parser.add_argument("--single-secs", type=float, default=None, help="length of the 1-client phase (default --secs)")
    parser.add_argument("--warmup-secs", type=float, default=5.0)
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--snippets", type=int, default=100)
    parser.add_argument("--embedder", default="sentence-transformers",
                        help="memory.embedding_backend of the server (hashing: no model, for --quick)")
    parser.add_argument("--quick", action="store_true", help="a few seconds with few clients (the test uses it)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.secs, args.warmup_secs = min(args.clients, 4), 1.5, 0.5
        args.memories, args.snippets, args.embedder = 20, 10, "hashing"
    single_secs = args.single_secs if args.single_secs is not None else args.secs

    with tempfile.TemporaryDirectory(prefix="assistant-load-") as tmp:
        sections = {"memory": {"embedding_backend": args.embedder}}
        with ServedApp(Path(tmp), sections) as app:
            seed(app, args.memories, args.snippets)
            asyncio.run(run_phase(app.base_url, app.headers, args.clients, args.warmup_secs, seed_value=0))
            rss_start = app.rss_mb()
            single = asyncio.run(run_phase(app.base_url, app.headers, 1, single_secs, seed_value=1))
            many = asyncio.run(run_phase(app.base_url, app.headers, args.clients, args.secs, seed_value=2))
            rss_end = app.rss_mb()
    report = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "single": single.summary(), "many": many.summary(),
        "rss_mb": {"start": round(rss_start, 1), "end": round(rss_end, 1)},
        "verdict": verdict(single, many, rss_start, rss_end),
    }
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


def print_report(report: dict) -> None:
    for name in ("single", "many"):
        p = report[name]
        print(f"{p['clients']:>3} client(s) {p['secs']:>6.1f} s: {p['requests']:>7} requests, {p['errors']} errors, "
              f"{p['throughput_rps']:>7.1f} req/s, p50 {p['p50_ms']} ms, p90 {p['p90_ms']} ms, "
              f"p99 {p['p99_ms']} ms, max {p['max_ms']} ms")
        for path, f in p["by_path"].items():
            print(f"    {path:<22} {f['requests']:>6} requests, p50 {f['p50_ms']} ms, p99 {f['p99_ms']} ms")
        for sample in p["error_samples"]:
            print(f"    error: {sample}")
    rss, v = report["rss_mb"], report["verdict"]
    print(f"server RSS {rss['start']} MB -> {rss['end']} MB (growth {v['rss_growth']:.1%})")
    print(f"p99 {v['p99_ms']} ms / target {v['p99_target_ms']} ms: {'PASS' if v['p99_ok'] else 'FAIL'}")
    print(f"errors {v['errors']}: {'PASS' if v['errors_ok'] else 'FAIL'}")
    print(f"RSS growth {v['rss_growth']:.1%} / target 5%: {'PASS' if v['rss_growth_ok'] else 'FAIL'}")
    print(f"throughput(many)/throughput(1) {v['throughput_ratio']}: {'PASS' if v['throughput_ok'] else 'FAIL'}")
    print(json.dumps({k: asdict(v) if hasattr(v, "__dataclass_fields__") else v for k, v in report.items()}))


if __name__ == "__main__":
    main()
