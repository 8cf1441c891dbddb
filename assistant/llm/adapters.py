"""LoRA adapters switched per request on llama.cpp contexts (``GenerationOptions.adapter``).

A GGUF LoRA (llama.cpp's ``convert_lora_to_gguf.py`` output, :mod:`assistant.learning.convert`) is
loaded once per (base model, file) with ``llama_adapter_lora_init`` and kept in a small LRU cache;
``llama_set_adapters_lora`` puts it on the model's context for a request (or takes every adapter off
for a base-model request). llama.cpp applies an adapter at compute time, so the base weights are
never changed and switching costs no reload.

The KV cache: llama-cpp-python reuses the cached prompt prefix by token match alone, but the cached
keys and values were computed with the adapter of the request that filled them. So whenever the
adapter on a context changes (to another adapter, or back to the base model) its cache is dropped
(``Llama.reset()``: the next prompt is evaluated from its first token) and no state of one adapter
leaks into another's answer. Requests with the same adapter keep the prefix reuse.

Errors: a missing file, a file that is not GGUF, or a GGUF that llama.cpp rejects for this base model
(another architecture or shape, a damaged file) raise :class:`ServiceUnavailableError` naming the file
and the reason. There is no silent fallback to the base model: the caller asked for that adapter
(a user's active adapter was loaded once when training activated it, so a failure here is a fault
to see, not to hide). Nothing is cached for a file that failed, so a repaired file loads next time.

Freeing: an adapter leaves the cache (least recently used beyond ``capacity``, or its file changed
on disk) only when no context uses it, and :meth:`LoraAdapters.release_model` takes a model's adapters
off its context and frees them before the model is unloaded (llama.cpp would free them with the
model; freeing them first keeps the two from freeing the same adapter).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from assistant.errors import ServiceUnavailableError

MAX_ADAPTERS = 4  # loaded adapters kept per engine; a rank-8 q/v adapter is a few MiB
GGUF_MAGIC = b"GGUF"
log = logging.getLogger("assistant.llm")


class LoraNative(Protocol):
    """The three llama.cpp calls adapters need (the real one wraps llama-cpp-python's bindings)."""

    def init(self, model: Any, path: str) -> Any | None: ...  # an adapter handle, None when rejected

    def free(self, adapter: Any) -> None: ...

    def set(self, ctx: Any, adapter: Any | None) -> None: ...  # None: no adapter on the context


class LlamaCppLoraNative:
    """llama-cpp-python's low-level API (0.3.x): the same calls ``Llama(lora_path=...)`` makes."""

    def __init__(self) -> None:
        from llama_cpp import llama_cpp as lib

        self._lib = lib

    def init(self, model: Any, path: str) -> Any | None:
        return self._lib.llama_adapter_lora_init(model, path.encode("utf-8"))

    def free(self, adapter: Any) -> None:
        self._lib.llama_adapter_lora_free(adapter)

    def set(self, ctx: Any, adapter: Any | None) -> None:
        import ctypes

        lib = self._lib
        if adapter is None:
            status = lib.llama_set_adapters_lora(ctx, None, 0, None)
        else:
            adapters = (lib.llama_adapter_lora_p_ctypes * 1)(adapter)
            scales = (ctypes.c_float * 1)(1.0)
            status = lib.llama_set_adapters_lora(ctx, adapters, 1, scales)
        if status:
            raise ServiceUnavailableError(f"llama.cpp could not set the LoRA adapter (status {status})")


@dataclass
class _Entry:
    handle: Any
    stamp: tuple[int, int]  # (mtime_ns, size) of the file when it was loaded


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


class LoraAdapters:
    """Which adapter each loaded model's context carries, and the loaded adapters (LRU)."""

    def __init__(self, native: LoraNative | None = None, *, capacity: int = MAX_ADAPTERS) -> None:
        self._native = native
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._current: dict[str, str | None] = {}  # model name -> adapter path on its context
        self._lock = threading.Lock()
        self.switches = 0  # how often a context changed adapter (and dropped its KV cache)

    @property
    def native(self) -> LoraNative:
        if self._native is None:
            self._native = LlamaCppLoraNative()
        return self._native

    def current(self, name: str) -> str | None:
        """The adapter path on model ``name``'s context (None: the base model)."""
        return self._current.get(name)

    def loaded(self) -> list[tuple[str, str]]:
        """The (model, adapter path) pairs in the cache, least recently used first."""
        return list(self._entries)

    def apply(self, name: str, llm: Any, adapter: str | None) -> None:
        """Put ``adapter`` (None: none) on the context of ``llm`` (model ``name``) for the next
        generation, dropping the context's KV cache when the adapter changes."""
        with self._lock:
            path = str(Path(adapter).expanduser().resolve()) if adapter else None
            handle = self._handle(name, llm, path) if path is not None else None
            if path == self._current.get(name):
                return
            self.native.set(llm._ctx.ctx, handle)
            self._current[name] = path
            llm.reset()  # the cached keys/values belong to the previous adapter
            self.switches += 1
            self._evict()  # after the switch: the adapter it replaced may go now
            log.debug("model %s: LoRA adapter %s", name, path or "none (base model)")

    def _handle(self, name: str, llm: Any, path: str) -> Any:
        file = Path(path)
        if not file.is_file():
            raise ServiceUnavailableError(f"LoRA adapter {path} does not exist")
        stamp = _stamp(file)
        key = (name, path)
        entry = self._entries.get(key)
        if entry is not None and entry.stamp == stamp:
            self._entries.move_to_end(key)
            return entry.handle
        if entry is not None:  # the file was replaced: load it again
            if self._current.get(name) == path:
                self.native.set(llm._ctx.ctx, None)
                self._current[name] = None
                llm.reset()
            self.native.free(self._entries.pop(key).handle)
        with file.open("rb") as fh:
            magic = fh.read(4)
        if magic != GGUF_MAGIC:
            raise ServiceUnavailableError(
                f"LoRA adapter {path} is not a GGUF file (convert peft adapters with "
                "assistant.learning.convert.convert_to_gguf)")
        handle = self.native.init(llm._model.model, path)
        if not handle:
            raise ServiceUnavailableError(
                f"LoRA adapter {path} could not be loaded for model {name!r}: llama.cpp rejected it "
                "(an adapter of another base model, or a damaged file)")
        self._entries[key] = _Entry(handle, stamp)
        return handle

    def _evict(self) -> None:
        in_use = {(name, path) for name, path in self._current.items() if path is not None}
        for key in list(self._entries):
            if len(self._entries) <= self.capacity:
                return
            if key not in in_use:
                self.native.free(self._entries.pop(key).handle)

    def release_model(self, name: str, llm: Any) -> None:
        """Take every adapter off model ``name``'s context and free its adapters (before unloading)."""
        with self._lock:
            if self._current.pop(name, None) is not None:
                self.native.set(llm._ctx.ctx, None)
            for key in [k for k in self._entries if k[0] == name]:
                self.native.free(self._entries.pop(key).handle)
