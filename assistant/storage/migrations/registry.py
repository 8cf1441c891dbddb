"""The migration registry and runner: what a migration is given, and how the applied ones are recorded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


class Connection(Protocol):
    """What a migration is given: :class:`assistant.storage.db.Database` satisfies it. Migrations
    depend on this, not on the database module, so the dependency runs one way (db -> migrations)."""

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> None: ...

    def executescript(self, sql: str) -> None: ...

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]: ...

    def transaction(self) -> AbstractContextManager[Any]: ...


Migration = Callable[[Connection], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn
