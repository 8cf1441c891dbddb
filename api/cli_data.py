"""``assistant backup FILE``, ``assistant restore FILE`` and ``assistant keys rotate-memory-key``.

Argument parsing only: the work is in :mod:`assistant.storage.backup` and
:mod:`assistant.storage.memory_key`. api/cli.py calls :func:`register` (this module imports it only
lazily, so ``python -m api.cli`` and the ``assistant`` script register on the same app).

The backup passphrase comes from ``--passphrase-file`` (its first line), else the environment
variable ``ASSISTANT_BACKUP_PASSPHRASE`` (for scripts), else a prompt (asked twice for a backup).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Annotated

import typer

from assistant.errors import AssistantError

PASSPHRASE_ENV = "ASSISTANT_BACKUP_PASSPHRASE"
KILL_AFTER_ENV = "ASSISTANT_TEST_KILL_ROTATION_AFTER"  # tests: SIGKILL the rotation after N rows

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML settings file.")]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default ~/.local/share/assistant).")]
PassphraseFileOpt = Annotated[Path | None, typer.Option(
    "--passphrase-file", help=f"File whose first line is the passphrase (else ${PASSPHRASE_ENV}, else a prompt).",
    exists=True, dir_okay=False, readable=True)]


def passphrase(path: Path | None, *, confirm: bool) -> str:
    if path is not None:
        lines = path.read_text(encoding="utf-8").splitlines()
        return lines[0] if lines else ""
    if os.environ.get(PASSPHRASE_ENV):
        return os.environ[PASSPHRASE_ENV]
    return typer.prompt("Backup passphrase", hide_input=True, confirmation_prompt=confirm)


def register(app: typer.Typer, keys_app: typer.Typer) -> None:
    app.command()(backup)
    app.command()(restore)
    keys_app.command("rotate-memory-key")(rotate_memory_key)


def backup(
    file: Annotated[Path, typer.Argument(help="The archive to write (must not exist).")],
    passphrase_file: PassphraseFileOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Back up the database (SQLite online backup: the server may keep running) and the memory key
    into one archive encrypted with a passphrase (Argon2id + XChaCha20-Poly1305)."""
    from api.cli import fail, load_settings
    from assistant.services import DB_FILE, key_path
    from assistant.storage.backup import create_backup

    settings = load_settings(config, data_dir)
    secret = passphrase(passphrase_file, confirm=True)
    try:
        report = create_backup(settings.data_dir / DB_FILE, key_path(settings), file, secret)
    except AssistantError as exc:
        fail(exc.message)
        raise
    rows = ", ".join(f"{n} {table}" for table, n in report.manifest["rows"].items())
    typer.echo(f"backup written to {report.path} ({rows}; encryption {report.manifest['encryption']})")


def restore(
    file: Annotated[Path, typer.Argument(help="An archive written by `assistant backup`.")],
    force: Annotated[bool, typer.Option(help="Replace an existing store (stop the server first).")] = False,
    passphrase_file: PassphraseFileOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Restore a backup into the configured data directory and key path, after verifying it
    (authentication, PRAGMA integrity_check, the key opening the store). Refuses to replace an
    existing store without --force."""
    from api.cli import fail, load_settings
    from assistant.services import DB_FILE, key_path
    from assistant.storage.backup import restore_backup

    settings = load_settings(config, data_dir)
    secret = passphrase(passphrase_file, confirm=False)
    try:
        report = restore_backup(file, settings.data_dir / DB_FILE, key_path(settings), secret, force=force)
    except AssistantError as exc:
        fail(exc.message)
        raise
    rows = ", ".join(f"{n} {table}" for table, n in report.manifest["rows"].items())
    typer.echo(f"restored {file} into {settings.data_dir} ({rows}; taken {report.manifest['created_at']})")


def rotate_memory_key(config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """Re-encrypt every sealed value with a new memory key, in one transaction; stop the server
    first. Killed half-way, the next start (or a rerun) finishes or rolls it back."""
    from api.cli import fail, load_settings
    from assistant.rekey import rotate_memory_key as rotate
    from assistant.services import DB_FILE, key_path
    from assistant.storage.db import Database

    settings = load_settings(config, data_dir)
    kill_after = int(os.environ.get(KILL_AFTER_ENV, "0"))

    def after_row(n: int) -> None:
        if n == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    db = Database(settings.data_dir / DB_FILE)
    try:
        report = rotate(db, key_path(settings), after_row=after_row if kill_after else None)
    except AssistantError as exc:
        fail(exc.message)
        raise
    finally:
        db.close()
    typer.echo(f"memory key rotated: {report.rows} rows re-encrypted; new key in {report.key_path}")
