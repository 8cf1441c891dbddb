"""The default catalog: about 32 valid, uniquely named entries per OS, seeded once and only once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from assistant.catalog import DEFAULT_ENTRIES, Category, CommandCatalog, RiskLevel, TargetOs, build_catalog
from assistant.catalog.store import SEEDED_KEY, CatalogStore
from assistant.config import CommandsSettings
from assistant.crypto import Sealer
from assistant.storage.db import Database


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(tmp_path / "catalog.db")
    yield database
    database.close()


def test_about_32_entries_with_unique_names() -> None:
    assert 30 <= len(DEFAULT_ENTRIES) <= 34
    names = [e.name.casefold() for e in DEFAULT_ENTRIES]
    assert len(set(names)) == len(names)


def test_values_are_from_the_documented_sets() -> None:
    for entry in DEFAULT_ENTRIES:
        assert isinstance(entry.category, Category) and isinstance(entry.risk_level, RiskLevel)
        assert isinstance(entry.os, TargetOs)
        assert entry.name.strip() and entry.description.strip() and entry.command.strip()
        if entry.risk_level.needs_approval:
            assert entry.requires_approval, entry.name


def test_every_os_has_the_everyday_commands() -> None:
    per_os = Counter(e.os for e in DEFAULT_ENTRIES)
    assert set(per_os) == set(TargetOs)
    for target in (TargetOs.LINUX, TargetOs.MACOS, TargetOs.WINDOWS):
        categories = {e.category for e in DEFAULT_ENTRIES if e.os == target}
        assert {Category.DISK, Category.MEMORY, Category.NETWORK, Category.SYSTEM, Category.PROCESS} <= categories
        names = " ".join(e.name.lower() for e in DEFAULT_ENTRIES if e.os == target)
        for word in ("disk", "uptime", "memory", "network interfaces", "listening ports", "dns"):
            assert word in names, (target, word)


def test_seeded_once_and_a_deleted_default_never_comes_back(db: Database) -> None:
    catalog = CommandCatalog(db, Sealer(None))
    created = catalog.seed_defaults()
    assert len(created) == len(DEFAULT_ENTRIES) == catalog.entries.count()
    assert all(e.is_default and e.created_by is None for e in created)
    uptime = next(e for e in created if e.name == "Uptime (Linux)")
    catalog.delete(uptime.id, "a-user")
    assert catalog.seed_defaults() == []
    again = build_catalog(db, Sealer(None), CommandsSettings())  # a restart
    assert again.entries.count() == len(DEFAULT_ENTRIES) - 1
    assert "Uptime (Linux)" not in {e.name for e in again.entries.list(limit=1000)}


def test_seeding_survives_reopening_the_database(tmp_path: Path) -> None:
    path = tmp_path / "reopen.db"
    first = Database(path)
    build_catalog(first, Sealer(None), CommandsSettings())
    entry = CatalogStore(first).list(limit=1)[0]
    CatalogStore(first).delete(entry.id)
    first.close()
    second = Database(path)
    try:
        build_catalog(second, Sealer(None), CommandsSettings())
        assert CatalogStore(second).count() == len(DEFAULT_ENTRIES) - 1
        assert second.scalar("SELECT value FROM meta WHERE key = ?", (SEEDED_KEY,))
    finally:
        second.close()


def test_seeding_is_audited_as_the_server(db: Database) -> None:
    catalog = build_catalog(db, Sealer(None), CommandsSettings())
    events = catalog.audit.list(limit=1000)
    assert len(events) == len(DEFAULT_ENTRIES)
    assert {e.action.value for e in events} == {"created"} and {e.user_id for e in events} == {None}
    assert all("default entry" in e.detail for e in events)


def test_seed_defaults_off_creates_nothing_and_a_later_seed_skips_taken_names(db: Database) -> None:
    catalog = build_catalog(db, Sealer(None), CommandsSettings(seed_defaults=False))
    assert catalog.entries.count() == 0 and not catalog.entries.seeded()
    mine = DEFAULT_ENTRIES[3]
    catalog.create(mine, "me")
    created = build_catalog(db, Sealer(None), CommandsSettings()).seed_defaults()
    assert created == []  # build_catalog seeded already
    assert catalog.entries.count() == len(DEFAULT_ENTRIES)
    assert catalog.entries.search(mine.name)[0].created_by == "me"
