"""Adapter tensors for federated sync: read a peft adapter, encode and strictly decode an update, FedAvg,
write the averaged adapter as a peft directory.

**What is exchanged.** The LoRA factors of the user's active adapter (peft's
``adapter_model.safetensors``: every ``lora_A``/``lora_B`` matrix), flattened in the order of their
sorted names into one vector. Each round releases the adapter's weights themselves (not a delta against
an earlier round): rounds need no shared state between instances, so a failed or partial round never
leaves two instances disagreeing about a reference. FedAvg averages the factors A and B separately, each
weighted by its instance's sample count (FedAvg as it treats any parameter; the product of averages is
not the average of products, the usual approximation of federated LoRA).

**Encoding** (``float32-le-base64``): the vector as little-endian IEEE-754 float32, base64 (standard
alphabet, padded), next to the list of ``{name, shape}`` it flattens. A decoded update is refused unless
its names and shapes are exactly this instance's adapter's, its byte length is exactly 4 x the element
count, and every value is finite.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from assistant.errors import AssistantError

ENCODING = "float32-le-base64"
WEIGHTS_FILE = "adapter_model.safetensors"
CONFIG_FILE = "adapter_config.json"
TENSOR_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,299}$")
MAX_TENSORS = 10_000
MAX_DIMS = 4


class PayloadError(AssistantError):
    """An update that cannot be applied here: 400 ``BAD_REQUEST`` (``reason`` names the check)."""

    code = "BAD_REQUEST"

    def __init__(self, reason: str, message: str):
        super().__init__(message, {"reason": reason})
        self.reason = reason


@dataclass(frozen=True)
class AdapterTensors:
    """An adapter's LoRA tensors as one float64 vector, in the order of their sorted names."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    values: np.ndarray
    lora: dict[str, Any]  # r, lora_alpha, target_modules (sorted): what must match for averaging to mean anything

    @property
    def spec(self) -> list[dict[str, Any]]:
        return [{"name": n, "shape": list(s)} for n, s in zip(self.names, self.shapes, strict=True)]

    @property
    def size(self) -> int:
        return int(self.values.size)

    def tensors(self, values: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """name -> float32 array, of ``values`` (default: this adapter's own)."""
        flat = self.values if values is None else values
        out, offset = {}, 0
        for name, shape in zip(self.names, self.shapes, strict=True):
            count = math.prod(shape)
            out[name] = np.ascontiguousarray(flat[offset:offset + count].reshape(shape), dtype=np.float32)
            offset += count
        return out


def lora_config(peft_dir: Path) -> dict[str, Any]:
    try:
        config = json.loads((Path(peft_dir) / CONFIG_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise AssistantError(f"the active adapter's {CONFIG_FILE} cannot be read: {exc}") from exc
    return {"r": int(config.get("r", 0)), "lora_alpha": float(config.get("lora_alpha", 0)),
            "target_modules": sorted(config.get("target_modules") or [])}


def read_adapter(peft_dir: Path) -> AdapterTensors:
    """The LoRA tensors of a peft adapter directory (any float dtype numpy reads, as float64)."""
    from safetensors.numpy import load_file

    path = Path(peft_dir) / WEIGHTS_FILE
    try:
        loaded = load_file(str(path))
    except (OSError, ValueError, TypeError) as exc:
        raise AssistantError(f"the active adapter's weights cannot be read ({path}): {exc}") from exc
    names = tuple(sorted(loaded))
    if not names:
        raise AssistantError(f"the active adapter has no tensors ({path})")
    for name in names:
        if loaded[name].dtype.kind != "f":
            raise AssistantError(f"the active adapter's tensor {name} is {loaded[name].dtype}, not floating point")
    values = np.concatenate([loaded[n].astype(np.float64).ravel() for n in names])
    return AdapterTensors(names, tuple(tuple(int(d) for d in loaded[n].shape) for n in names), values,
                          lora_config(peft_dir))


def encode(values: np.ndarray) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")


def check_spec(local: AdapterTensors, spec: list[dict[str, Any]]) -> None:
    """PayloadError unless ``spec`` names exactly the local tensors with the same shapes."""
    theirs = {t["name"]: tuple(t["shape"]) for t in spec}
    if len(theirs) != len(spec):
        raise PayloadError("malformed", "the update lists a tensor name twice")
    if [t["name"] for t in spec] != list(local.names):
        missing = sorted(set(local.names) - set(theirs))
        unexpected = sorted(set(theirs) - set(local.names))
        if not missing and not unexpected:
            raise PayloadError("malformed", "the update's tensors must be listed in sorted name order")
        raise PayloadError("shape_mismatch", f"the update's tensors are not this adapter's: {len(missing)} missing"
                           f"{' (e.g. ' + missing[0] + ')' if missing else ''}, {len(unexpected)} unexpected"
                           f"{' (e.g. ' + unexpected[0] + ')' if unexpected else ''}")
    for name, shape in zip(local.names, local.shapes, strict=True):
        if theirs[name] != shape:
            raise PayloadError("shape_mismatch", f"tensor {name} has shape {list(theirs[name])} in the update and "
                                                 f"{list(shape)} here")


def decode(payload: str, local: AdapterTensors) -> np.ndarray:
    """The update's values (float64), checked: valid base64, exactly 4 x the local element count, finite."""
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise PayloadError("malformed", "payload is not valid base64 (standard alphabet, padded)") from None
    expected = 4 * local.size
    if len(raw) != expected:
        raise PayloadError("shape_mismatch", f"payload holds {len(raw)} bytes; {local.size} float32 values are "
                                             f"{expected} bytes")
    values = np.frombuffer(raw, dtype="<f4").astype(np.float64)
    if not np.all(np.isfinite(values)):
        bad = int(np.count_nonzero(~np.isfinite(values)))
        raise PayloadError("not_finite", f"payload holds {bad} values that are NaN or infinite")
    return values


def fedavg(contributions: list[tuple[np.ndarray, int]]) -> np.ndarray:
    """FedAvg: the mean of the vectors weighted by their sample counts, sum(n_i x_i) / sum(n_i)."""
    if not contributions:
        raise ValueError("FedAvg needs at least one contribution")
    sizes = {np.asarray(v).size for v, _ in contributions}
    if len(sizes) != 1:
        raise ValueError(f"FedAvg needs vectors of one size (got {sorted(sizes)})")
    if any(int(n) <= 0 for _, n in contributions):
        raise ValueError("sample counts must be positive")
    total = sum(int(n) for _, n in contributions)
    weighted = sum(np.asarray(v, dtype=np.float64) * int(n) for v, n in contributions)
    return np.asarray(weighted, dtype=np.float64) / total


def write_adapter(out_dir: Path, template_dir: Path, local: AdapterTensors, values: np.ndarray,
                  metadata: dict[str, str] | None = None) -> Path:
    """A peft directory with ``values`` in ``local``'s tensors and ``template_dir``'s adapter config."""
    from safetensors.numpy import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(template_dir) / CONFIG_FILE, out_dir / CONFIG_FILE)
    save_file(local.tensors(values), str(out_dir / WEIGHTS_FILE), metadata={"format": "pt", **(metadata or {})})
    return out_dir
