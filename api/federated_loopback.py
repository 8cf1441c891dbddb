"""Two instances of the service on loopback, each the other's federated peer: what the notebook and the
integration test use to run a real round over HTTP (uvicorn, the real routes, keys, signatures, privacy
budget and storage; separate data directories).

    from api.federated_loopback import run_loopback_round
    result = run_loopback_round(workdir, {"a": (peft_dir_a, 30), "b": (peft_dir_b, 10)}, base_model="smollm2")
    result["round"]["status"], result["round"]["peers"], result["averaged"]["a"]

Each instance's user gets the given peft directory as its active adapter through
:class:`assistant.testing.federated.StaticAdapters` (no training run: submitted averages are recorded,
not evaluated) unless ``adapters`` gives other stores (e.g. each instance's ``services.training``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import uvicorn

from api.cli import uvicorn_options
from api.main import create_app
from assistant.config import Settings, deep_merge
from assistant.learning.federated_identity import load_identity
from assistant.services import Services, build_services
from assistant.testing.federated import StaticAdapters

SYNC, STATUS = "/api/v1/federated/sync", "/api/v1/federated/status"
NAMES = ("a", "b")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LoopbackPair:
    """Instances ``a`` and ``b`` serving on loopback; ``keys``/``users``: each instance's user."""

    services: dict[str, Services]
    urls: dict[str, str]
    keys: dict[str, str]
    users: dict[str, str]
    adapters: dict[str, Any]
    servers: dict[str, uvicorn.Server] = field(default_factory=dict)
    threads: list[threading.Thread] = field(default_factory=list)

    def headers(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[name]}"}

    def sync(self, name: str = "a", body: dict[str, Any] | None = None, timeout: float = 300) -> httpx.Response:
        """``POST /api/v1/federated/sync`` on instance ``name`` as its user (``{}``: a round with every peer)."""
        return httpx.post(self.urls[name] + SYNC, json=body or {}, headers=self.headers(name), timeout=timeout)

    def post_raw(self, name: str, content: bytes) -> httpx.Response:
        """A raw body to ``name``'s sync route with its user's key (e.g. a tampered envelope)."""
        return httpx.post(self.urls[name] + SYNC, content=content, timeout=60,
                          headers={**self.headers(name), "Content-Type": "application/json"})

    def status(self, name: str) -> dict[str, Any]:
        response = httpx.get(self.urls[name] + STATUS, headers=self.headers(name), timeout=60)
        response.raise_for_status()
        return response.json()

    def __enter__(self) -> LoopbackPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for server in self.servers.values():
            server.should_exit = True
        for thread in self.threads:
            thread.join(timeout=30)
        for services in self.services.values():
            services.close()


def loopback_pair(workdir: Path, peft_dirs: dict[str, tuple[Path, int]] | None = None, *,
                  base_model: str = "SmolLM2-135M-Instruct",
                  adapters: Callable[[str, Services], Any] | None = None, **sections: Any) -> LoopbackPair:
    """Build and serve instances ``a`` and ``b`` under ``workdir`` (``workdir/a``, ``workdir/b``).
    ``peft_dirs``: name -> (peft directory, sample count), each user's active adapter for ``base_model``;
    ``adapters(name, services)`` replaces the static stores; ``sections`` are merged into both settings
    (e.g. ``inference={...}``, ``federated={"epsilon": 1.0}``, ``privacy={"epsilon": 2.0}``)."""
    workdir = Path(workdir)
    ports = {n: _free_port() for n in NAMES}
    urls = {n: f"http://127.0.0.1:{ports[n]}" for n in NAMES}
    identities = {n: load_identity(workdir / n / "federated_ed25519.key") for n in NAMES}
    users = {n: str(uuid4()) for n in NAMES}
    keys = {n: f"loopback-{n}-{uuid4().hex}" for n in NAMES}
    pair = LoopbackPair({}, urls, keys, users, {})
    try:
        for name, other in (("a", "b"), ("b", "a")):
            base: dict[str, Any] = {
                "server": {"data_dir": str(workdir / name), "host": "127.0.0.1", "port": ports[name]},
                "security": {"api_keys": {keys[name]: users[name]}, "rate_limit_enabled": False},
                "federated": {"enabled": True, "key_path": str(workdir / name / "federated_ed25519.key"),
                              "peers": [{"name": other, "url": urls[other], "api_key": keys[other],
                                         "public_key": identities[other].public_key_b64, "user_id": users[name]}]},
            }
            services = build_services(Settings.load(**deep_merge(base, dict(sections))))
            pair.services[name] = services
            assert services.federated is not None
            if adapters is not None:
                store = adapters(name, services)
            else:
                store = StaticAdapters()
                if peft_dirs and name in peft_dirs:
                    path, samples = peft_dirs[name]
                    store.set_active(users[name], Path(path), samples, base_model)
            services.federated.adapters = pair.adapters[name] = store
            options = {**uvicorn_options(services.settings), "log_level": "warning"}
            server = uvicorn.Server(uvicorn.Config(create_app(services), **options))
            pair.servers[name] = server
            thread = threading.Thread(target=server.run, name=f"loopback-{name}", daemon=True)
            pair.threads.append(thread)
            thread.start()
        deadline = time.monotonic() + 60
        while not all(s.started for s in pair.servers.values()):
            if time.monotonic() > deadline:
                raise RuntimeError("the loopback instances did not start within 60 s")
            time.sleep(0.05)
    except BaseException:
        pair.close()
        raise
    return pair


def run_loopback_round(workdir: Path, peft_dirs: dict[str, tuple[Path, int]], *,
                       base_model: str = "SmolLM2-135M-Instruct", **sections: Any) -> dict[str, Any]:
    """One round started on ``a`` with ``b``: ``{"status_code", "round"`` (a's answer), ``"responder"``
    (b's record of it), ``"averaged"`` (name -> the averaged peft directory each side submitted),
    ``"rejections"`` (name -> the rejection log)}."""
    with loopback_pair(workdir, peft_dirs, base_model=base_model, **sections) as pair:
        response = pair.sync("a")
        statuses = {n: pair.status(n) for n in NAMES}
        return {"status_code": response.status_code, "round": response.json(),
                "responder": (statuses["b"]["rounds"] or [None])[0],
                "averaged": {n: [str(s.peft_dir) for s in getattr(pair.adapters[n], "submitted", [])] for n in NAMES},
                "rejections": {n: statuses[n]["rejections"] for n in NAMES}}
