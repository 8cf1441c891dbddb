"""Agent profiles: named personas a user creates and applies to a chat message (or a sub-agent).

A profile has a ``name`` (used as ``@name``), a ``role``, an ``emoji``, ``skills``, a ``style``
(tone, verbosity, reasoning depth), a ``system_prompt_template``, ``inference_overrides``
(temperature, max_tokens, model) and an ``autonomy_level``.

Applying profiles (:func:`apply_profiles`, :meth:`AgentProfile.apply`) gives a
:class:`ProfileApplication`:

- ``system``: the primary profile's rendered template (or, for an empty template, "You are
  <name>. Your role: <role>.") followed by its instructions (tone, verbosity, reasoning depth,
  skills, autonomy). Chat appends it to the system prompt; it does not replace it.
- ``options(base)``: generation options with the primary profile's overrides (temperature,
  max_tokens, model) and its verbosity's max_tokens hint; callers apply their own explicit values
  on top (in chat, request values win).
- ``tools``: the primary profile's skills that name a registered tool (None when none does: no
  restriction).

With several profiles the first is primary; the others add one line each (name, role, skills).

A chat message resolves its profiles once (:meth:`ProfileStore.for_message`: one query for
its ids and ``@name`` mentions) into one :class:`ProfileApplication` that the chat service reads.

Modules: the values (profile, templates, mentions, application) are in
:mod:`assistant.agents.profile_model`, validation in :mod:`assistant.agents.profile_validation`;
this module stores them and re-exports both, so ``from assistant.agents.profiles import ...``
keeps working.

Storage: the whole profile (name included) is sealed at rest; uniqueness of the name per user,
ignoring case, and ``@name`` lookups go through a keyed token of the lower-cased name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from datetime import date
from typing import Any
from uuid import UUID, uuid4

import apsw

from assistant.agents.profile_model import (
    ALLOWED_PLACEHOLDERS,
    AUTONOMY_TEXT,
    DEPTH_TEXT,
    MAX_EMOJI_CHARS,
    MAX_MODEL_CHARS,
    MAX_ROLE_CHARS,
    MAX_SKILLS,
    MAX_TEMPLATE_CHARS,
    MAX_TOKENS_LIMIT,
    MAX_TONE_CHARS,
    MENTION_RE,
    NAME_MAX,
    NAME_RE,
    NAME_RULE,
    SKILL_RE,
    SKILL_RULE,
    TEMPLATE_VARIABLES,
    TERSE_MAX_TOKENS,
    VERBOSE_MIN_TOKENS,
    VERBOSITY_TEXT,
    AgentProfile,
    AutonomyLevel,
    InferenceOverrides,
    ProfileApplication,
    ProfileDraft,
    ReasoningDepth,
    Style,
    Verbosity,
    apply_profiles,
    mentioned_names,
    render_template,
    template_problems,
    verbosity_max_tokens,
)
from assistant.agents.profile_validation import draft_problems, validate_draft
from assistant.clock import iso
from assistant.crypto import SealContext, Sealer
from assistant.errors import ConflictError, NotFoundError, ValidationFailed
from assistant.storage.db import Database

__all__ = [
    "ALLOWED_PLACEHOLDERS", "AUTONOMY_TEXT", "DEPTH_TEXT", "MAX_EMOJI_CHARS", "MAX_MODEL_CHARS", "MAX_ROLE_CHARS",
    "MAX_SKILLS", "MAX_TEMPLATE_CHARS", "MAX_TOKENS_LIMIT", "MAX_TONE_CHARS", "MENTION_RE", "NAME_MAX", "NAME_RE",
    "NAME_RULE", "SKILL_RE", "SKILL_RULE", "TEMPLATE_VARIABLES", "TERSE_MAX_TOKENS", "VERBOSE_MIN_TOKENS",
    "VERBOSITY_TEXT", "AgentProfile", "AutonomyLevel", "InferenceOverrides", "ProfileApplication", "ProfileDraft",
    "ProfileStore", "ReasoningDepth", "Style", "Verbosity", "apply_profiles", "draft_problems", "mentioned_names",
    "render_template", "template_problems", "validate_draft", "verbosity_max_tokens",
]


# --- the store -----------------------------------------------------------------------------------

DRAFT_FIELDS = tuple(f.name for f in fields(ProfileDraft))
NESTED = {"style": Style, "inference_overrides": InferenceOverrides}


def _at(profile_id: str, user_id: str) -> SealContext:
    """Where a profile is sealed (its associated data)."""
    return SealContext("agent_profiles", "profile_sealed", profile_id, user_id)


class ProfileStore:
    """Agent profiles, owned by one user each; another user's profile is "not found"."""

    def __init__(self, db: Database, sealer: Sealer | None = None):
        self.db = db
        self.sealer = sealer or Sealer(None)

    def _token(self, name: str) -> bytes:
        return self.sealer.token("agent-profile:" + name.lower())

    def _profile(self, row: dict[str, Any]) -> AgentProfile:
        data = json.loads(self.sealer.open(row["profile_sealed"], _at(row["id"], row["user_id"])))
        return AgentProfile(id=row["id"], user_id=row["user_id"], created_at=row["created_at"],
                            updated_at=row["updated_at"], **ProfileDraft.from_json(data))

    def _check_name_free(self, db: Database, user_id: str, name: str, own_id: str | None = None) -> None:
        row = db.one("SELECT id FROM agent_profiles WHERE user_id = ? AND name_token = ?", (user_id, self._token(name)))
        if row is not None and row["id"] != own_id:
            raise ConflictError(
                f"an agent profile named {name!r} already exists (names are unique per user, ignoring case)",
                {"id": row["id"]},
            )

    def _write(self, sql: str, params: tuple[Any, ...], name: str) -> None:
        try:
            self.db.execute(sql, params)
        except apsw.ConstraintError as exc:  # a concurrent writer took the name first
            raise ConflictError(f"an agent profile named {name!r} already exists") from exc

    def create(self, user_id: UUID | str, draft: ProfileDraft) -> AgentProfile:
        """Store a new profile; ValidationFailed (422) or ConflictError (409, name taken)."""
        validate_draft(draft)
        user, now, profile_id = str(user_id), iso(), str(uuid4())
        with self.db.transaction() as db:
            self._check_name_free(db, user, draft.name)
            self._write(
                "INSERT INTO agent_profiles (id, user_id, name_token, profile_sealed, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (profile_id, user, self._token(draft.name),
                 self.sealer.seal(json.dumps(draft.to_json()), _at(profile_id, user)), now, now),
                draft.name,
            )
        return AgentProfile(id=profile_id, user_id=user, created_at=now, updated_at=now,
                            **{k: getattr(draft, k) for k in DRAFT_FIELDS})

    def list(self, user_id: UUID | str, limit: int = 100, offset: int = 0) -> list[AgentProfile]:
        """Oldest first (creation order)."""
        rows = self.db.query(
            "SELECT * FROM agent_profiles WHERE user_id = ? ORDER BY created_at, rowid LIMIT ? OFFSET ?",
            (str(user_id), limit, offset),
        )
        return [self._profile(r) for r in rows]

    def count(self, user_id: UUID | str) -> int:
        return self.db.scalar("SELECT count(*) FROM agent_profiles WHERE user_id = ?", (str(user_id),))

    def get(self, user_id: UUID | str, profile_id: UUID | str) -> AgentProfile:
        """The profile, if it exists and belongs to ``user_id``; otherwise NotFoundError."""
        row = self.db.one("SELECT * FROM agent_profiles WHERE id = ? AND user_id = ?", (str(profile_id), str(user_id)))
        if row is None:
            raise NotFoundError(f"agent profile {profile_id} not found")
        return self._profile(row)

    def by_name(self, user_id: UUID | str, name: str) -> AgentProfile | None:
        """The user's profile called ``name`` (ignoring case, an optional leading "@"), or None."""
        row = self.db.one("SELECT * FROM agent_profiles WHERE user_id = ? AND name_token = ?",
                          (str(user_id), self._token(name.removeprefix("@"))))
        return None if row is None else self._profile(row)

    def update(self, user_id: UUID | str, profile_id: UUID | str, changes: Mapping[str, Any]) -> AgentProfile:
        """Change only the fields in ``changes``; ``style`` and ``inference_overrides`` are merged
        key by key (an override set to None is cleared). The result is validated as a whole."""
        unknown = [k for k in changes if k not in DRAFT_FIELDS]
        nulls = [k for k, v in changes.items() if v is None and k in DRAFT_FIELDS]
        problems = [{"field": k, "error": "unknown field"} for k in unknown]
        problems += [{"field": k, "error": "must not be null"} for k in nulls]
        for key, kind in NESTED.items():
            if isinstance(changes.get(key), Mapping):
                known = {f.name for f in fields(kind)}
                problems += [{"field": f"{key}.{k}", "error": "unknown field"} for k in changes[key] if k not in known]
                if key == "style":
                    problems += [{"field": f"style.{k}", "error": "must not be null"}
                                 for k, v in changes[key].items() if v is None and k in known]
        if problems:
            raise ValidationFailed("invalid agent profile update: "
                                   + "; ".join(f"{p['field']}: {p['error']}" for p in problems[:3]), problems)
        user = str(user_id)
        with self.db.transaction() as db:
            current = self.get(user, profile_id)
            values = {k: getattr(current, k) for k in DRAFT_FIELDS}
            for key, value in changes.items():
                if key in NESTED and isinstance(value, Mapping):
                    value = replace(values[key], **value)
                elif key == "skills":
                    value = tuple(value)
                values[key] = value
            draft = ProfileDraft(**values)
            validate_draft(draft)
            if draft.name.lower() != current.name.lower():
                self._check_name_free(db, user, draft.name, current.id)
            now = iso()
            self._write(
                "UPDATE agent_profiles SET name_token = ?, profile_sealed = ?, updated_at = ? WHERE id = ?",
                (self._token(draft.name), self.sealer.seal(json.dumps(draft.to_json()), _at(current.id, user)), now,
                 current.id),
                draft.name,
            )
        return replace(current, **values, updated_at=now)

    def delete(self, user_id: UUID | str, profile_id: UUID | str) -> None:
        with self.db.transaction() as db:
            self.get(user_id, profile_id)
            db.execute("DELETE FROM agent_profiles WHERE id = ?", (str(profile_id),))

    def missing(self, user_id: UUID | str, profile_ids: Iterable[str]) -> list[str]:
        """The ids among ``profile_ids`` that are not this user's profiles, in order."""
        ids = list(dict.fromkeys(str(i) for i in profile_ids))
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        found = {r["id"] for r in self.db.query(
            f"SELECT id FROM agent_profiles WHERE user_id = ? AND id IN ({marks})", (str(user_id), *ids))}
        return [i for i in ids if i not in found]

    def _lookup(self, user_id: UUID | str, profile_ids: Iterable[str],
                text: str) -> tuple[list[AgentProfile], list[str]]:
        """One query: the profiles ``profile_ids`` name in order, then those of the ``@name``
        mentions of ``text`` in order, each once; and the ids that are not this user's profiles."""
        ids = list(dict.fromkeys(str(i) for i in profile_ids))
        tokens = [self._token(name) for name in mentioned_names(text)]
        if not ids and not tokens:
            return [], []
        conditions = []
        if ids:
            conditions.append(f"id IN ({', '.join('?' * len(ids))})")
        if tokens:
            conditions.append(f"name_token IN ({', '.join('?' * len(tokens))})")
        rows = self.db.query(f"SELECT * FROM agent_profiles WHERE user_id = ? AND ({' OR '.join(conditions)})",
                             (str(user_id), *ids, *tokens))
        by_id = {r["id"]: r for r in rows}
        by_token = {bytes(r["name_token"]): r for r in rows}
        chosen = [by_id[i] for i in ids if i in by_id]
        for token in tokens:
            row = by_token.get(token)
            if row is not None and all(row["id"] != c["id"] for c in chosen):
                chosen.append(row)
        return [self._profile(r) for r in chosen], [i for i in ids if i not in by_id]

    def resolve(self, user_id: UUID | str, profile_ids: Iterable[str] = (), text: str = "") -> list[AgentProfile]:
        """The profiles a message refers to: ``profile_ids`` in order, then the ``@name``
        mentions of ``text`` in order, each once. An unknown id is ValidationFailed naming it;
        an ``@word`` that names no profile is ignored."""
        profiles, unknown = self._lookup(user_id, profile_ids, text)
        if unknown:
            problems = [{"field": "mentioned_profile_ids", "error": f"unknown agent profile {i!r}"} for i in unknown]
            raise ValidationFailed("request validation failed: " + "; ".join(p["error"] for p in problems), problems)
        return profiles

    def for_message(self, user_id: UUID | str, profile_ids: Iterable[str] = (), text: str = "", *,
                    registered_tools: Iterable[str] = (), today: date | None = None) -> ProfileApplication:
        """The profiles a message refers to (as :meth:`resolve`, in one query) applied to it. Ids
        that are not this user's profiles are not an error here: they are listed in the result's
        ``unknown`` for the caller to report with its other problems."""
        profiles, unknown = self._lookup(user_id, profile_ids, text)
        applied = apply_profiles(profiles, user_prompt=text, registered_tools=registered_tools, today=today)
        return replace(applied, unknown=tuple(unknown))
