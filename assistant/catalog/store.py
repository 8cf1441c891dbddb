"""Catalog entries: server-wide shell commands with a category, a risk level and a target OS, and
whether they may use the network (``network``, false by default: their sandbox has none).

Names are unique regardless of case. Entries of risk ``high`` or ``critical`` always require
approval (the flag is forced on, and the schema refuses a row without it). The defaults are created
once: seeding is recorded in ``meta`` so an entry a user deleted never comes back at a restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import uuid4

import apsw

from assistant.catalog.defaults import DEFAULT_ENTRIES, EntrySpec
from assistant.catalog.values import Category, RiskLevel, TargetOs, parse_value
from assistant.clock import iso
from assistant.errors import ConflictError, NotFoundError, ValidationFailed
from assistant.storage.db import Database

MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 2_000
MAX_COMMAND_CHARS = 8_000
SEEDED_KEY = "command_catalog_seeded"


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    name: str
    description: str
    command: str
    category: Category
    risk_level: RiskLevel
    os: TargetOs
    requires_approval: bool
    is_default: bool
    network: bool
    created_by: str | None
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class EntryFilter:
    """Optional filters of the listing and the count."""

    category: Category | None = None
    risk_level: RiskLevel | None = None
    os: TargetOs | None = None

    def where(self) -> tuple[str, list[str]]:
        clauses, params = [], []
        for column in ("category", "risk_level", "os"):
            value = getattr(self, column)
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value.value)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def spec_of(name: str, description: str, command: str, category: str, risk_level: str, os: str,
            requires_approval: bool = False, network: bool = False) -> EntrySpec:
    """A validated :class:`EntrySpec` from raw values; ValidationFailed lists every bad field."""
    fields: list[dict[str, str]] = []
    name, command = name.strip(), command.strip()
    for field, value, limit in (("name", name, MAX_NAME_CHARS), ("command", command, MAX_COMMAND_CHARS)):
        if not value:
            fields.append({"field": field, "error": "must not be empty"})
        elif len(value) > limit:
            fields.append({"field": field, "error": f"must be at most {limit} characters (got {len(value)})"})
        elif "\x00" in value:
            fields.append({"field": field, "error": "must not contain a NUL character"})
    if len(description) > MAX_DESCRIPTION_CHARS:
        fields.append({"field": "description",
                       "error": f"must be at most {MAX_DESCRIPTION_CHARS} characters (got {len(description)})"})
    values = {}
    for field, enum, value in (("category", Category, category), ("risk_level", RiskLevel, risk_level),
                               ("os", TargetOs, os)):
        try:
            values[field] = parse_value(enum, field, value)
        except ValidationFailed as exc:
            fields.extend(exc.details["fields"])
    if fields:
        summary = "; ".join(f"{f['field']}: {f['error']}" for f in fields[:3])
        raise ValidationFailed(f"invalid catalog entry: {summary}", fields)
    risk = values["risk_level"]
    return EntrySpec(name, description.strip(), command, values["category"], risk, values["os"],
                     bool(requires_approval) or risk.needs_approval, bool(network))


class CatalogStore:
    def __init__(self, db: Database):
        self.db = db

    # --- reading ---------------------------------------------------------------------------------

    def get(self, entry_id: str) -> CatalogEntry:
        row = self.db.one("SELECT * FROM command_catalog WHERE id = ?", (str(entry_id),))
        if row is None:
            raise NotFoundError(f"catalog entry {entry_id} not found")
        return _entry(row)

    def list(self, limit: int = 100, offset: int = 0, filters: EntryFilter | None = None) -> list[CatalogEntry]:
        """Ordered by name (case-insensitive), then id."""
        where, params = (filters or EntryFilter()).where()
        rows = self.db.query(f"SELECT * FROM command_catalog{where} ORDER BY name COLLATE NOCASE, id "
                             "LIMIT ? OFFSET ?", (*params, limit, offset))
        return [_entry(r) for r in rows]

    def count(self, filters: EntryFilter | None = None) -> int:
        where, params = (filters or EntryFilter()).where()
        return int(self.db.scalar(f"SELECT count(*) FROM command_catalog{where}", params))

    def search(self, query: str, limit: int = 100) -> list[CatalogEntry]:
        """Entries whose name or description contains ``query`` (case-insensitive, Unicode-aware),
        names matching first, then by name."""
        needle = query.strip().casefold()
        if not needle:
            raise ValidationFailed("q must not be empty", [{"field": "q", "error": "must not be empty"}])
        rows = self.db.query("SELECT * FROM command_catalog ORDER BY name COLLATE NOCASE, id")
        by_name = [r for r in rows if needle in r["name"].casefold()]
        by_description = [r for r in rows if needle in r["description"].casefold() and r not in by_name]
        return [_entry(r) for r in (by_name + by_description)[:limit]]

    # --- writing ---------------------------------------------------------------------------------

    def create(self, spec: EntrySpec, created_by: str | None = None, *, is_default: bool = False) -> CatalogEntry:
        """Store a new entry; ConflictError when the name (in any case) is taken."""
        now = iso()
        entry_id = str(uuid4())
        requires = spec.requires_approval or spec.risk_level.needs_approval
        try:
            self.db.execute(
                "INSERT INTO command_catalog (id, name, description, command, category, risk_level, os, "
                "requires_approval, is_default, network, created_by, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (entry_id, spec.name, spec.description, spec.command, spec.category.value, spec.risk_level.value,
                 spec.os.value, int(requires), int(is_default), int(spec.network), created_by, now, now),
            )
        except apsw.ConstraintError:
            if self.db.one("SELECT 1 FROM command_catalog WHERE name = ?", (spec.name,)) is not None:
                raise ConflictError(f"a catalog entry named {spec.name!r} already exists",
                                    {"fields": [{"field": "name", "error": "already taken"}]}) from None
            raise
        return self.get(entry_id)

    def delete(self, entry_id: str) -> CatalogEntry:
        """Remove the entry and return what it was; NotFoundError if there is none."""
        entry = self.get(entry_id)
        self.db.execute("DELETE FROM command_catalog WHERE id = ?", (entry.id,))
        return entry

    def seeded(self) -> bool:
        return self.db.scalar("SELECT value FROM meta WHERE key = ?", (SEEDED_KEY,)) is not None

    def seed_defaults(self) -> list[CatalogEntry]:
        """Create the default entries unless that was done before (ever); returns those created.
        A default whose name a user already took is skipped."""
        created: list[CatalogEntry] = []
        with self.db.transaction():
            if self.seeded():
                return []
            for spec in DEFAULT_ENTRIES:
                if self.db.one("SELECT 1 FROM command_catalog WHERE name = ?", (spec.name,)) is None:
                    created.append(self.create(spec, is_default=True))
            self.db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (SEEDED_KEY, iso()))
        return created


def _entry(row: dict) -> CatalogEntry:
    return CatalogEntry(
        id=row["id"], name=row["name"], description=row["description"], command=row["command"],
        category=Category(row["category"]), risk_level=RiskLevel(row["risk_level"]), os=TargetOs(row["os"]),
        requires_approval=bool(row["requires_approval"]), is_default=bool(row["is_default"]),
        network=bool(row["network"]), created_by=row["created_by"], created_at=row["created_at"], updated_at=row["updated_at"],
    )
