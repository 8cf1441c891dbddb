"""Catalog entries: validation with precise fields, forced approval for high risk, unique names,
listing order, filters, search over name and description, delete."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from assistant.catalog import Category, EntryFilter, RiskLevel, TargetOs, current_os, spec_of
from assistant.catalog.store import MAX_NAME_CHARS, CatalogStore
from assistant.catalog.values import parse_value
from assistant.errors import ConflictError, NotFoundError, ValidationFailed
from assistant.storage.db import Database


@pytest.fixture
def store(tmp_path: Path) -> CatalogStore:
    db = Database(tmp_path / "entries.db")
    yield CatalogStore(db)
    db.close()


def spec(name: str = "Echo", description: str = "says hello", command: str = "echo hello", category: str = "system",
         risk_level: str = "low", os: str = "any", requires_approval: bool = False):
    return spec_of(name, description, command, category, risk_level, os, requires_approval)


def fields(exc: pytest.ExceptionInfo) -> dict[str, str]:
    return {f["field"]: f["error"] for f in exc.value.details["fields"]}


def test_current_os_is_a_target() -> None:
    assert current_os() in (TargetOs.LINUX, TargetOs.MACOS, TargetOs.WINDOWS)


def test_parse_value_names_the_allowed_values() -> None:
    assert parse_value(RiskLevel, "risk_level", "high") is RiskLevel.HIGH
    with pytest.raises(ValidationFailed) as exc:
        parse_value(TargetOs, "os", "beos")
    assert fields(exc) == {"os": "must be one of linux, macos, windows, any (got 'beos')"}


def test_spec_of_lists_every_bad_field() -> None:
    with pytest.raises(ValidationFailed) as exc:
        spec(name="  ", command="", category="games", risk_level="extreme", os="beos")
    found = fields(exc)
    assert set(found) == {"name", "command", "category", "risk_level", "os"}
    assert found["name"] == "must not be empty" and found["command"] == "must not be empty"
    assert "system, hardware, disk" in found["category"] and "'games'" in found["category"]
    assert found["risk_level"] == "must be one of low, medium, high, critical (got 'extreme')"


def test_spec_of_limits_and_nul() -> None:
    with pytest.raises(ValidationFailed) as exc:
        spec(name="n" * (MAX_NAME_CHARS + 1), command="echo \x00")
    assert set(fields(exc)) == {"name", "command"}


@pytest.mark.parametrize("risk", ["high", "critical"])
def test_high_risk_always_requires_approval(store: CatalogStore, risk: str) -> None:
    entry = store.create(spec(risk_level=risk, requires_approval=False))
    assert entry.requires_approval is True and entry.risk_level == RiskLevel(risk)


def test_the_schema_refuses_high_risk_without_approval(store: CatalogStore) -> None:
    with pytest.raises(apsw.ConstraintError):
        store.db.execute(
            "INSERT INTO command_catalog (id, name, description, command, category, risk_level, os, "
            "requires_approval, created_at, updated_at) VALUES ('x', 'x', '', 'x', 'system', 'high', 'any', 0, '', '')"
        )


def test_create_get_and_fields(store: CatalogStore) -> None:
    entry = store.create(spec(name="  Echo  ", command=" echo hi "), "user-1")
    assert entry.name == "Echo" and entry.command == "echo hi" and entry.created_by == "user-1"
    assert entry.category is Category.SYSTEM and entry.os is TargetOs.ANY and not entry.requires_approval
    assert entry.created_at == entry.updated_at and entry.created_at.endswith("Z")
    assert store.get(entry.id) == entry


def test_names_are_unique_regardless_of_case(store: CatalogStore) -> None:
    store.create(spec(name="Disk usage"))
    with pytest.raises(ConflictError) as exc:
        store.create(spec(name="DISK USAGE"))
    assert exc.value.code == "CONFLICT" and "DISK USAGE" in exc.value.message
    assert store.count() == 1


def test_list_is_ordered_by_name_then_id_and_paged(store: CatalogStore) -> None:
    for name in ("beta", "Alpha", "gamma", "alpha 2"):
        store.create(spec(name=name))
    assert [e.name for e in store.list()] == ["Alpha", "alpha 2", "beta", "gamma"]
    assert [e.name for e in store.list(limit=2, offset=1)] == ["alpha 2", "beta"]
    assert store.list(offset=10) == []


def test_filters_of_list_and_count(store: CatalogStore) -> None:
    store.create(spec(name="a", category="disk", os="linux"))
    store.create(spec(name="b", category="disk", os="windows", risk_level="high"))
    store.create(spec(name="c", category="network", os="linux"))
    assert [e.name for e in store.list(filters=EntryFilter(category=Category.DISK))] == ["a", "b"]
    assert store.count(EntryFilter(os=TargetOs.LINUX)) == 2
    assert store.count(EntryFilter(category=Category.DISK, risk_level=RiskLevel.HIGH)) == 1
    assert store.count() == 3


def test_search_over_name_and_description_ignoring_case(store: CatalogStore) -> None:
    store.create(spec(name="Zebra DNS", description="x"))
    store.create(spec(name="Alpha", description="shows the dns servers"))
    store.create(spec(name="Über Übersicht", description="nothing"))
    store.create(spec(name="Other", description="unrelated"))
    assert [e.name for e in store.search("dns")] == ["Zebra DNS", "Alpha"]  # name matches first
    assert [e.name for e in store.search("übersicht")] == ["Über Übersicht"]
    assert store.search("nowhere") == []
    assert [e.name for e in store.search("a", limit=2)] == ["Alpha", "Zebra DNS"]
    with pytest.raises(ValidationFailed):
        store.search("   ")


def test_search_treats_sql_wildcards_literally(store: CatalogStore) -> None:
    store.create(spec(name="100% disk"))
    store.create(spec(name="other"))
    assert [e.name for e in store.search("%")] == ["100% disk"]
    assert store.search("_") == []


def test_delete(store: CatalogStore) -> None:
    entry = store.create(spec())
    assert store.delete(entry.id) == entry
    with pytest.raises(NotFoundError):
        store.get(entry.id)
    with pytest.raises(NotFoundError):
        store.delete(entry.id)
