"""Per-request LoRA adapters on llama.cpp contexts, with a fake of the three native calls (the real
library is exercised in tests/integration/test_lora_engine_real.py)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from assistant.errors import ServiceUnavailableError
from assistant.llm.adapters import LoraAdapters
from assistant.llm.base import ChatMessage, GenerationOptions
from assistant.llm.catalog import SMALL_MODEL
from assistant.llm.llama_cpp import LlamaCppChatModel


class FakeNative:
    """Records init/free/set; rejects files whose name contains "reject"."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.live: set[int] = set()
        self.on_ctx: dict[int, Any] = {}
        self._next = 0

    def init(self, model: Any, path: str) -> Any | None:
        self.calls.append(("init", Path(path).name))
        if "reject" in path:
            return None
        self._next += 1
        self.live.add(self._next)
        return self._next

    def free(self, adapter: Any) -> None:
        assert adapter in self.live, "double free"
        assert adapter not in self.on_ctx.values(), "freed while a context uses it"
        self.calls.append(("free", adapter))
        self.live.discard(adapter)

    def set(self, ctx: Any, adapter: Any | None) -> None:
        assert adapter is None or adapter in self.live
        self.calls.append(("set", adapter))
        self.on_ctx[ctx] = adapter


class FakeLlama:
    _ids = 0

    def __init__(self) -> None:
        FakeLlama._ids += 1
        self._ctx = SimpleNamespace(ctx=FakeLlama._ids)
        self._model = SimpleNamespace(model=f"model-{FakeLlama._ids}")
        self.n_tokens = 40  # a filled KV cache
        self.resets = 0

    def reset(self) -> None:
        self.n_tokens = 0
        self.resets += 1


def gguf(path: Path, body: bytes = b"\x03\x00\x00\x00rest") -> Path:
    path.write_bytes(b"GGUF" + body)
    return path


@pytest.fixture
def native() -> FakeNative:
    return FakeNative()


def test_switching_adapters_sets_the_context_and_drops_the_kv_cache(native: FakeNative, tmp_path: Path) -> None:
    adapters, llm = LoraAdapters(native), FakeLlama()
    a, b = gguf(tmp_path / "a.gguf"), gguf(tmp_path / "b.gguf")

    adapters.apply("m", llm, None)  # base model on a fresh context: nothing to do
    assert native.calls == [] and llm.resets == 0

    adapters.apply("m", llm, str(a))
    assert native.calls == [("init", "a.gguf"), ("set", 1)]
    assert llm.resets == 1 and llm.n_tokens == 0
    assert adapters.current("m") == str(a.resolve())

    llm.n_tokens = 30
    adapters.apply("m", llm, str(a))  # same adapter: the prefix cache stays
    assert llm.resets == 1 and llm.n_tokens == 30

    adapters.apply("m", llm, str(b))
    adapters.apply("m", llm, None)  # back to the base model
    assert native.calls[2:] == [("init", "b.gguf"), ("set", 2), ("set", None)]
    assert llm.resets == 3 and adapters.switches == 3
    assert native.on_ctx[llm._ctx.ctx] is None

    adapters.apply("m", llm, str(a))  # cached: no second init
    assert native.calls[-1] == ("set", 1)
    assert [c for c in native.calls if c[0] == "init"] == [("init", "a.gguf"), ("init", "b.gguf")]


def test_missing_not_gguf_and_rejected_files_are_clear_errors(native: FakeNative, tmp_path: Path) -> None:
    adapters, llm = LoraAdapters(native), FakeLlama()
    good = gguf(tmp_path / "good.gguf")
    adapters.apply("m", llm, str(good))
    (tmp_path / "text.gguf").write_text("not a model")
    rejected = gguf(tmp_path / "reject.gguf")

    with pytest.raises(ServiceUnavailableError, match="does not exist"):
        adapters.apply("m", llm, str(tmp_path / "gone.gguf"))
    with pytest.raises(ServiceUnavailableError, match="is not a GGUF file"):
        adapters.apply("m", llm, str(tmp_path / "text.gguf"))
    with pytest.raises(ServiceUnavailableError, match="llama.cpp rejected it"):
        adapters.apply("m", llm, str(rejected))
    # the context keeps its adapter and cache; nothing is cached for the failures
    assert adapters.current("m") == str(good.resolve())
    assert adapters.loaded() == [("m", str(good.resolve()))]
    assert llm.resets == 1


def test_lru_frees_adapters_no_context_uses(native: FakeNative, tmp_path: Path) -> None:
    adapters, one, two = LoraAdapters(native, capacity=2), FakeLlama(), FakeLlama()
    files = [gguf(tmp_path / f"{i}.gguf") for i in range(4)]
    adapters.apply("one", one, str(files[0]))  # stays on model one's context
    adapters.apply("two", two, str(files[1]))
    adapters.apply("two", two, str(files[2]))  # evicts files[1] (not in use), keeps files[0]
    assert [Path(p).name for _, p in adapters.loaded()] == ["0.gguf", "2.gguf"]
    adapters.apply("two", two, str(files[3]))  # files[2] was on two's context: freed after the switch
    assert [Path(p).name for _, p in adapters.loaded()] == ["0.gguf", "3.gguf"]
    assert len(native.live) == 2
    assert native.on_ctx[one._ctx.ctx] in native.live and native.on_ctx[two._ctx.ctx] in native.live


def test_a_replaced_file_is_loaded_again(native: FakeNative, tmp_path: Path) -> None:
    adapters, llm = LoraAdapters(native), FakeLlama()
    path = gguf(tmp_path / "user.gguf")
    adapters.apply("m", llm, str(path))
    gguf(path, b"\x03\x00\x00\x00a newer adapter")
    os.utime(path, ns=(1, 1))
    adapters.apply("m", llm, str(path))
    assert native.calls == [("init", "user.gguf"), ("set", 1), ("set", None), ("free", 1),
                            ("init", "user.gguf"), ("set", 2)]
    assert llm.resets == 3


def test_release_model_takes_adapters_off_and_frees_them(native: FakeNative, tmp_path: Path) -> None:
    adapters, llm = LoraAdapters(native), FakeLlama()
    a, b = gguf(tmp_path / "a.gguf"), gguf(tmp_path / "b.gguf")
    adapters.apply("m", llm, str(a))
    adapters.apply("m", llm, str(b))
    adapters.release_model("m", llm)
    assert native.live == set() and adapters.loaded() == [] and adapters.current("m") is None


def test_the_engine_applies_the_requested_adapter_before_generating(tmp_path: Path) -> None:
    """LlamaCppChatModel.stream puts options.adapter on the context of the model it answers with."""
    engine = LlamaCppChatModel(SMALL_MODEL, tmp_path)
    seen: list[tuple[str, str | None]] = []

    class Recording(LoraAdapters):
        def apply(self, name: str, llm: Any, adapter: str | None) -> None:
            seen.append((name, adapter))
            raise ServiceUnavailableError("stop here")

    engine.adapters = Recording(FakeNative())
    engine._loaded[SMALL_MODEL] = (FakeLlama(), None)  # type: ignore[assignment]
    with pytest.raises(ServiceUnavailableError, match="stop here"):
        list(engine.stream([ChatMessage("user", "hi")], GenerationOptions(adapter="/x/user.gguf")))
    assert seen == [(SMALL_MODEL, "/x/user.gguf")]
