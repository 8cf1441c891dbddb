"""Doubles for federated sync: adapters given as peft directories (no training), an in-process transport
between :class:`FederatedSync` objects, and a small synthetic peft adapter. For unit tests and the
notebook's quick mode; the server uses ``services.training`` and HTTP."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from assistant.clock import iso, utcnow
from assistant.errors import AssistantError
from assistant.learning.federated_payload import CONFIG_FILE, WEIGHTS_FILE
from assistant.learning.federated_transport import PeerAnswer
from assistant.learning.types import AdapterRecord


@dataclass(frozen=True)
class Submitted:
    id: str
    user_id: str
    peft_dir: Path
    samples: int
    source: str
    state: str = "submitted"


@dataclass
class StaticAdapters:
    """The :class:`assistant.learning.federated.Adapters` protocol over peft directories set by hand;
    submissions are recorded (``submitted``) and, with ``activate``, become active at once (no evaluation)."""

    activate: bool = False
    active: dict[str, AdapterRecord] = field(default_factory=dict)
    submitted: list[Submitted] = field(default_factory=list)

    def set_active(self, user_id: str, peft_dir: Path, samples: int, base_model: str = "test-model") -> AdapterRecord:
        record = AdapterRecord(str(uuid.uuid4()), str(user_id), str(uuid.uuid4()), base_model, Path(peft_dir),
                               Path(peft_dir) / "adapter.gguf", samples, iso(utcnow()))
        self.active[str(user_id)] = record
        return record

    def active_adapter(self, user_id: str) -> AdapterRecord | None:
        return self.active.get(str(user_id))

    def submit_adapter(self, user_id: str, peft_dir: Path, samples: int, source: str) -> Submitted:
        run = Submitted(str(uuid.uuid4()), str(user_id), Path(peft_dir), samples, source)
        self.submitted.append(run)
        if self.activate:
            base = self.active[str(user_id)].base_model
            self.set_active(user_id, peft_dir, samples, base)
        return run


class InProcessTransport:
    """Delivers a round's body to the :class:`FederatedSync` registered under the peer's URL, as the
    route would (the body limit, the key's user, errors as the envelope); ``sent`` records every body."""

    def __init__(self) -> None:
        self.instances: dict[str, tuple[Any, dict[str, str]]] = {}
        self.sent: list[tuple[str, bytes]] = []
        self.tamper: Any = None  # optional callable(body: bytes) -> bytes applied before delivery

    def register(self, url: str, sync: Any, keys: dict[str, str]) -> None:
        self.instances[url.rstrip("/")] = (sync, keys)

    def exchange(self, url: str, api_key: str, body: bytes, *, timeout: float, max_bytes: int) -> PeerAnswer:
        self.sent.append((url, body))
        if self.tamper is not None:
            body = self.tamper(body)
        sync, keys = self.instances[url.rstrip("/")]
        if len(body) > sync.settings.max_payload_bytes:
            return _error(413, "PAYLOAD_TOO_LARGE", f"request body exceeds {sync.settings.max_payload_bytes} bytes")
        user = keys.get(api_key)
        if user is None:
            return _error(401, "UNAUTHORIZED", "invalid API key")
        try:
            return PeerAnswer(200, json.dumps(sync.answer(user, json.loads(body))).encode())
        except AssistantError as exc:
            from assistant.learning.federated import STATUS_OF

            return _error(STATUS_OF.get(exc.code, 400), exc.code, exc.message)


def _error(status: int, code: str, message: str) -> PeerAnswer:
    return PeerAnswer(status, json.dumps({"error": {"code": code, "message": message}}).encode())


def write_peft_adapter(out_dir: Path, *, layers: int = 2, hidden: int = 16, kv_out: int = 8, r: int = 4,
                       alpha: float = 8.0, seed: int = 0, fill: float | None = None) -> Path:
    """A peft-shaped LoRA adapter (q_proj and v_proj of ``layers`` Llama layers): random normal values
    (``seed``), or every value ``fill``."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {}
    for layer in range(layers):
        for module, out in (("q_proj", hidden), ("v_proj", kv_out)):
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            for name, shape in ((f"{prefix}.lora_A.weight", (r, hidden)), (f"{prefix}.lora_B.weight", (out, r))):
                values = np.full(shape, fill) if fill is not None else rng.normal(0, 1 / math.sqrt(hidden), shape)
                tensors[name] = values.astype(np.float32)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out_dir / WEIGHTS_FILE), metadata={"format": "pt"})
    (out_dir / CONFIG_FILE).write_text(json.dumps({"peft_type": "LORA", "r": r, "lora_alpha": alpha,
                                                   "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM"}))
    return out_dir
