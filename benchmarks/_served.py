"""`assistant serve` in a subprocess, exactly as a user starts it: a temporary data directory and
config file, a free loopback port, an API key made with the CLI beforehand.

    with ServedApp(tmp_dir, {"memory": {"embedding_backend": "hashing"}}) as app:
        httpx.get(app.url("/health"))
        app.kill()        # SIGKILL, for the crash test
        app.start()       # again, on the same data directory

The scripted engine stands in for the LLM (these measurements are of everything but the model), so
the subprocess gets ``ASSISTANT_TESTING=1`` (test-only backends require it). Used by
benchmarks/load.py and tests/integration/test_crash_safety.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_config(path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def _merge(base: dict[str, dict[str, Any]], extra: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    merged = {k: dict(v) for k, v in base.items()}
    for section, values in extra.items():
        merged.setdefault(section, {}).update(values)
    return merged


class ServedApp:
    def __init__(self, work_dir: Path, sections: dict[str, dict[str, Any]] | None = None, *,
                 key_args: tuple[str, ...] = (), start_timeout_secs: float = 120.0):
        self.work_dir = Path(work_dir)
        self.data_dir = self.work_dir / "data"
        self.port = free_port()
        self.start_timeout_secs = start_timeout_secs
        base = {
            "server": {"data_dir": str(self.data_dir), "host": "127.0.0.1", "port": self.port, "log_level": "warning"},
            "security": {"rate_limit_enabled": False},
            "inference": {"backend": "scripted"},
        }
        self.config = write_config(self.work_dir / "config.toml", _merge(base, sections or {}))
        self.env = {**os.environ, "ASSISTANT_TESTING": "1",
                    "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.work_dir / "server.log"
        self.key = self.create_key("bench", *key_args)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def cli(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "api.cli", *args, "--config", str(self.config)],
                              cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"assistant {' '.join(args)} failed: {done.stderr or done.stdout}")
        return done.stdout

    def create_key(self, name: str, *extra: str) -> str:
        """A key made with ``assistant keys create`` (its last output line is the key)."""
        return self.cli("keys", "create", "--name", name, *extra).strip().splitlines()[-1].strip()

    def start(self) -> ServedApp:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "api.cli", "serve", "--config", str(self.config)],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + self.start_timeout_secs
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"assistant serve exited with {self.process.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(self.url("/health"), timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"assistant serve did not answer within {self.start_timeout_secs:g} s")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def rss_mb(self) -> float:
        with open(f"/proc/{self.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (the crash test)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=60)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ServedApp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
