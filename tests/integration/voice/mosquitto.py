"""A real mosquitto broker on a free loopback port, started per test and stopped by its PID; with
``users`` it requires a password (a mosquitto_passwd file), with ``tls`` its listener speaks only TLS
(certificates from :mod:`tests.integration.voice.certs`), with ``require_certificate`` also a client
certificate signed by the same CA."""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.integration.support import free_port
from tests.integration.voice.certs import Certificates

MOSQUITTO = "/usr/sbin/mosquitto"
MOSQUITTO_PASSWD = "/usr/bin/mosquitto_passwd"


@dataclass
class Mosquitto:
    """A broker that can be stopped and started again on the same port (to test reconnection)."""

    root: Path
    port: int = field(default_factory=free_port)
    users: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    tls: Certificates | None = None
    require_certificate: bool = False
    process: subprocess.Popen | None = None

    @property
    def log(self) -> str:
        path = self.root / "mosquitto.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _write_config(self) -> Path:
        lines = [f"listener {self.port} {self.host}", "persistence false",
                 f"log_dest file {self.root / 'mosquitto.log'}", "log_type all"]
        if self.tls is not None:
            lines += [f"cafile {self.tls.ca}", f"certfile {self.tls.server.cert}", f"keyfile {self.tls.server.key}",
                      f"require_certificate {'true' if self.require_certificate else 'false'}"]
        if os.geteuid() == 0:
            lines.append(f"user {getpass.getuser()}")
        if self.users:
            passwords = self.root / "passwords"
            passwords.unlink(missing_ok=True)
            for i, (user, password) in enumerate(self.users.items()):
                subprocess.run([MOSQUITTO_PASSWD, "-b", *(["-c"] if i == 0 else []), str(passwords), user, password],
                               check=True, capture_output=True)
            passwords.chmod(0o600)
            lines += ["allow_anonymous false", f"password_file {passwords}"]
        else:
            lines.append("allow_anonymous true")
        config = self.root / "mosquitto.conf"
        config.write_text("\n".join(lines) + "\n")
        return config

    def start(self, timeout: float = 20.0) -> None:
        assert self.process is None, "already running"
        self.root.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen([MOSQUITTO, "-c", str(self._write_config())],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                self.process = None
                raise RuntimeError(f"mosquitto exited: {err}\n{self.log}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"mosquitto did not accept on port {self.port}\n{self.log}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    broker = Mosquitto(tmp_path / "mosquitto")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def mosquitto_factory(tmp_path: Path) -> Iterator[type[Mosquitto]]:
    """Make brokers with options (users, a fixed port); every one is stopped at teardown."""
    made: list[Mosquitto] = []

    def make(**kwargs) -> Mosquitto:
        broker = Mosquitto(tmp_path / f"mosquitto-{len(made)}", **kwargs)
        made.append(broker)
        broker.start()
        return broker

    try:
        yield make  # type: ignore[misc]
    finally:
        for broker in made:
            broker.stop()
