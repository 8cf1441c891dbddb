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

Storage: the whole profile (name included) is sealed at rest; uniqueness of the name per user,
ignoring case, and ``@name`` lookups go through a keyed token of the lower-cased name.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date
from enum import StrEnum
from typing import Any
from uuid import UUID, uuid4

import apsw

from assistant.clock import iso, utcnow
from assistant.crypto import Sealer
from assistant.errors import ConflictError, NotFoundError, ValidationFailed
from assistant.llm.base import GenerationOptions
from assistant.storage.db import Database

NAME_MAX = 64
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
NAME_RULE = "1 to 64 characters: ASCII letters, digits, '-' and '_', starting with a letter or digit"
# "@name" not glued to a word before it (so "bob@example.com" mentions nobody); the name is the
# longest run of name characters after the "@".
MENTION_RE = re.compile(r"(?<![A-Za-z0-9_.@-])@([A-Za-z0-9][A-Za-z0-9_-]*)")
SKILL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SKILL_RULE = "1 to 64 characters: ASCII letters, digits, '-', '_' and '.', starting with a letter or digit"
MAX_SKILLS = 32
MAX_ROLE_CHARS = 2_000
MAX_EMOJI_CHARS = 16
MAX_TONE_CHARS = 200
MAX_TEMPLATE_CHARS = 20_000
MAX_MODEL_CHARS = 200
MAX_TOKENS_LIMIT = 131_072
TERSE_MAX_TOKENS = 256  # terse: at most this many (never more than the configured max_tokens)
VERBOSE_MIN_TOKENS = 1_024  # verbose: at least this many (never more than the context length)


class Verbosity(StrEnum):
    TERSE = "terse"
    NORMAL = "normal"
    VERBOSE = "verbose"


class ReasoningDepth(StrEnum):
    STANDARD = "standard"
    DEEP = "deep"


class AutonomyLevel(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


VERBOSITY_TEXT = {
    Verbosity.TERSE: "terse: answer in as few words as possible, without preamble or repetition.",
    Verbosity.NORMAL: "normal: answer at a moderate length, with the details that matter.",
    Verbosity.VERBOSE: "verbose: answer thoroughly, explaining your reasoning and giving examples where they help.",
}
DEPTH_TEXT = {
    ReasoningDepth.STANDARD: "standard: reason as much as the question needs.",
    ReasoningDepth.DEEP: "deep: think the problem through step by step, consider alternatives and check "
                         "your answer before giving it.",
}
AUTONOMY_TEXT = {
    AutonomyLevel.LOW: "low: suggest actions and ask the user before doing anything with side effects.",
    AutonomyLevel.MEDIUM: "medium: act on clear requests; ask before anything irreversible.",
    AutonomyLevel.HIGH: "high: act on your own judgement to complete the task, and report what you did.",
}

TEMPLATE_VARIABLES = {
    "name": "the profile's name",
    "role": "the profile's role",
    "emoji": "the profile's emoji",
    "skills": "the skills, joined with ', '",
    "tone": "the style's tone",
    "verbosity": "terse, normal or verbose",
    "reasoning_depth": "standard or deep",
    "autonomy_level": "low, medium or high",
    "date": "today's date, YYYY-MM-DD (UTC)",
    "user_prompt": "the user's message (for a sub-agent: its sub-task)",
}
ALLOWED_PLACEHOLDERS = ", ".join("{" + v + "}" for v in TEMPLATE_VARIABLES)


# --- the profile ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Style:
    tone: str = ""
    verbosity: str = Verbosity.NORMAL.value
    reasoning_depth: str = ReasoningDepth.STANDARD.value


@dataclass(frozen=True)
class InferenceOverrides:
    temperature: float | None = None
    max_tokens: int | None = None
    model: str | None = None


@dataclass(frozen=True, kw_only=True)
class ProfileDraft:
    """What a caller supplies: everything but the id and timestamps."""

    name: str
    role: str = ""
    emoji: str = ""
    skills: tuple[str, ...] = ()
    style: Style = field(default_factory=Style)
    system_prompt_template: str = ""
    inference_overrides: InferenceOverrides = field(default_factory=InferenceOverrides)
    autonomy_level: str = AutonomyLevel.MEDIUM.value

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: data[k] for k in (f.name for f in fields(ProfileDraft))}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> dict[str, Any]:
        return {
            **data,
            "skills": tuple(data.get("skills", ())),
            "style": Style(**data.get("style", {})),
            "inference_overrides": InferenceOverrides(**data.get("inference_overrides", {})),
        }


@dataclass(frozen=True, kw_only=True)
class AgentProfile(ProfileDraft):
    id: str
    user_id: str
    created_at: str
    updated_at: str

    def variables(self, user_prompt: str = "", today: date | None = None) -> dict[str, str]:
        """The values of the template's placeholders."""
        return {
            "name": self.name,
            "role": self.role,
            "emoji": self.emoji,
            "skills": ", ".join(self.skills),
            "tone": self.style.tone,
            "verbosity": self.style.verbosity,
            "reasoning_depth": self.style.reasoning_depth,
            "autonomy_level": self.autonomy_level,
            "date": (today or utcnow().date()).isoformat(),
            "user_prompt": user_prompt,
        }

    def render_system_prompt(self, user_prompt: str = "", today: date | None = None) -> str:
        """The template with its placeholders filled; an empty template introduces the profile."""
        if self.system_prompt_template.strip():
            return render_template(self.system_prompt_template, self.variables(user_prompt, today)).strip()
        intro = f"You are {self.name}" + (f" {self.emoji}" if self.emoji else "") + "."
        if self.role.strip():
            intro += f" Your role: {self.role.strip().rstrip('.')}."
        return intro

    def instructions(self) -> str:
        """The style, skills and autonomy as instructions, one per line."""
        lines = [f"Tone: {self.style.tone.strip().rstrip('.')}."] if self.style.tone.strip() else []
        lines.append("Verbosity: " + VERBOSITY_TEXT[Verbosity(self.style.verbosity)])
        lines.append("Reasoning: " + DEPTH_TEXT[ReasoningDepth(self.style.reasoning_depth)])
        if self.skills:
            lines.append(f"Skills: {', '.join(self.skills)}.")
        lines.append("Autonomy: " + AUTONOMY_TEXT[AutonomyLevel(self.autonomy_level)])
        return "\n".join(lines)

    def system_block(self, user_prompt: str = "", today: date | None = None) -> str:
        """What a profile adds to a system prompt: the rendered template, then the instructions."""
        return f"{self.render_system_prompt(user_prompt, today)}\n\n{self.instructions()}"

    def summary_line(self) -> str:
        """One line for a profile mentioned next to the primary one."""
        line = f"- {self.name}" + (f" {self.emoji}" if self.emoji else "")
        if self.role.strip():
            line += f": {self.role.strip().rstrip('.')}."
        if self.skills:
            line += f" Skills: {', '.join(self.skills)}."
        return line

    def apply(self, user_prompt: str = "", registered_tools: Iterable[str] = (),
              today: date | None = None) -> ProfileApplication:
        """This profile alone applied (see :func:`apply_profiles`)."""
        return apply_profiles((self,), user_prompt=user_prompt, registered_tools=registered_tools, today=today)


# --- templates -----------------------------------------------------------------------------------


def template_problems(template: str) -> list[str]:
    """What is wrong with a template: malformed braces, unknown or decorated placeholders."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        return [f"malformed template: {exc}; write {{{{ or }}}} for a literal brace"]
    problems: list[str] = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        if name == "":
            problem = f"empty placeholder {shown}: name a variable ({ALLOWED_PLACEHOLDERS})"
        elif name not in TEMPLATE_VARIABLES:
            problem = (f"unknown placeholder {shown} (allowed: {ALLOWED_PLACEHOLDERS}; "
                       "write {{ or }} for a literal brace)")
        elif conversion or spec:
            problem = f"placeholder {shown} takes no conversion or format spec: write {{{name}}}"
        else:
            continue
        if problem not in problems:
            problems.append(problem)
    return problems


def render_template(template: str, values: Mapping[str, str]) -> str:
    """Fill ``{variable}`` placeholders (``{{``/``}}`` are literal braces). Only plain names are
    looked up, never attributes or items, so a template cannot reach into Python objects."""
    parts: list[str] = []
    for literal, name, _, _ in string.Formatter().parse(template):
        parts.append(literal)
        if name is not None:
            parts.append(values.get(name, ""))
    return "".join(parts)


# --- validation ----------------------------------------------------------------------------------


def _choice(value: Any, values: type[StrEnum], where: str, problems: list[dict[str, str]]) -> None:
    allowed = [v.value for v in values]
    if value not in allowed:
        problems.append({"field": where, "error": f"must be one of {', '.join(allowed)} (got {value!r})"})


def _text(value: Any, limit: int, where: str, problems: list[dict[str, str]]) -> None:
    if not isinstance(value, str):
        problems.append({"field": where, "error": "must be a string"})
    elif len(value) > limit:
        problems.append({"field": where, "error": f"must be at most {limit:,} characters (got {len(value):,})"})


def draft_problems(draft: ProfileDraft) -> list[dict[str, str]]:
    """Every ``{field, error}`` of a draft; empty when it is valid."""
    problems: list[dict[str, str]] = []
    if not isinstance(draft.name, str) or not NAME_RE.fullmatch(draft.name):
        problems.append({"field": "name", "error": f"must be {NAME_RULE} (it is used as @name; got {draft.name!r})"})
    _text(draft.role, MAX_ROLE_CHARS, "role", problems)
    _text(draft.emoji, MAX_EMOJI_CHARS, "emoji", problems)
    if len(draft.skills) > MAX_SKILLS:
        problems.append({"field": "skills", "error": f"at most {MAX_SKILLS} skills (got {len(draft.skills)})"})
    seen: set[str] = set()
    for i, skill in enumerate(draft.skills):
        if not isinstance(skill, str) or not SKILL_RE.fullmatch(skill):
            problems.append({"field": f"skills.{i}", "error": f"a skill identifier is {SKILL_RULE} (got {skill!r})"})
        elif skill.lower() in seen:
            problems.append({"field": f"skills.{i}", "error": f"duplicate skill {skill!r}"})
        else:
            seen.add(skill.lower())
    _text(draft.style.tone, MAX_TONE_CHARS, "style.tone", problems)
    _choice(draft.style.verbosity, Verbosity, "style.verbosity", problems)
    _choice(draft.style.reasoning_depth, ReasoningDepth, "style.reasoning_depth", problems)
    _text(draft.system_prompt_template, MAX_TEMPLATE_CHARS, "system_prompt_template", problems)
    if isinstance(draft.system_prompt_template, str):
        problems += [{"field": "system_prompt_template", "error": p}
                     for p in template_problems(draft.system_prompt_template)]
    o = draft.inference_overrides
    if o.temperature is not None and (isinstance(o.temperature, bool) or not isinstance(o.temperature, int | float)
                                      or not 0.0 <= o.temperature <= 2.0):
        problems.append({"field": "inference_overrides.temperature",
                         "error": f"must be a number from 0.0 to 2.0 (got {o.temperature!r})"})
    if o.max_tokens is not None and (isinstance(o.max_tokens, bool) or not isinstance(o.max_tokens, int)
                                     or not 1 <= o.max_tokens <= MAX_TOKENS_LIMIT):
        problems.append({"field": "inference_overrides.max_tokens",
                         "error": f"must be an integer from 1 to {MAX_TOKENS_LIMIT} (got {o.max_tokens!r})"})
    if o.model is not None and (not isinstance(o.model, str) or not 1 <= len(o.model) <= MAX_MODEL_CHARS):
        problems.append({"field": "inference_overrides.model",
                         "error": f"must be 1 to {MAX_MODEL_CHARS} characters (got {o.model!r})"})
    _choice(draft.autonomy_level, AutonomyLevel, "autonomy_level", problems)
    return problems


def validate_draft(draft: ProfileDraft) -> None:
    """Raise ValidationFailed naming every problem of ``draft``."""
    problems = draft_problems(draft)
    if problems:
        summary = "; ".join(f"{p['field']}: {p['error']}" for p in problems[:3])
        raise ValidationFailed(f"invalid agent profile: {summary}", problems)


# --- mentions and application --------------------------------------------------------------------


def mentioned_names(text: str) -> list[str]:
    """The ``@name`` mentions of ``text`` in order, lower-cased, each once. Whether a name is a
    profile is for the store to say: an unknown ``@word`` is just text."""
    names: list[str] = []
    for match in MENTION_RE.finditer(text):
        name = match.group(1).lower()
        if len(name) <= NAME_MAX and name not in names:
            names.append(name)
    return names


def verbosity_max_tokens(verbosity: str, default: int, context_length: int | None = None) -> int:
    """The max_tokens a verbosity suggests: terse at most 256, normal the default, verbose at
    least 1,024 (capped at the context length)."""
    if verbosity == Verbosity.TERSE:
        return min(default, TERSE_MAX_TOKENS)
    if verbosity == Verbosity.VERBOSE:
        wanted = max(default, VERBOSE_MIN_TOKENS)
        return min(wanted, context_length) if context_length else wanted
    return default


@dataclass(frozen=True)
class ProfileApplication:
    """Profiles applied to one message: the first is primary (see the module docstring)."""

    profiles: tuple[AgentProfile, ...] = ()
    system: str = ""  # appended to the system prompt ("" without profiles)
    tools: tuple[str, ...] | None = None  # tools the primary's skills name; None = no restriction

    @property
    def primary(self) -> AgentProfile | None:
        return self.profiles[0] if self.profiles else None

    def options(self, base: GenerationOptions, context_length: int | None = None) -> GenerationOptions:
        """``base`` with the primary profile's overrides; max_tokens is the override, else the
        verbosity's hint from ``base.max_tokens``, capped at ``context_length``."""
        p = self.primary
        if p is None:
            return base
        o = p.inference_overrides
        max_tokens = o.max_tokens or verbosity_max_tokens(p.style.verbosity, base.max_tokens, context_length)
        if context_length:
            max_tokens = min(max_tokens, context_length)
        return replace(
            base,
            model=o.model if o.model is not None else base.model,
            temperature=o.temperature if o.temperature is not None else base.temperature,
            max_tokens=max_tokens,
        )


def apply_profiles(profiles: Sequence[AgentProfile], *, user_prompt: str = "",
                   registered_tools: Iterable[str] = (), today: date | None = None) -> ProfileApplication:
    """Apply ``profiles`` (primary first) to a message ``user_prompt``."""
    if not profiles:
        return ProfileApplication()
    primary, others = profiles[0], profiles[1:]
    system = primary.system_block(user_prompt, today)
    if others:
        system += ("\n\nAlso mentioned in this message (keep their perspectives in mind):\n"
                   + "\n".join(p.summary_line() for p in others))
    registered = set(registered_tools)
    tools = tuple(s for s in primary.skills if s in registered)
    return ProfileApplication(tuple(profiles), system, tools or None)


# --- the store -----------------------------------------------------------------------------------

DRAFT_FIELDS = tuple(f.name for f in fields(ProfileDraft))
NESTED = {"style": Style, "inference_overrides": InferenceOverrides}


class ProfileStore:
    """Agent profiles, owned by one user each; another user's profile is "not found"."""

    def __init__(self, db: Database, sealer: Sealer | None = None):
        self.db = db
        self.sealer = sealer or Sealer(None)

    def _token(self, name: str) -> bytes:
        return self.sealer.token("agent-profile:" + name.lower())

    def _profile(self, row: dict[str, Any]) -> AgentProfile:
        data = json.loads(self.sealer.open(row["profile_sealed"]))
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
                (profile_id, user, self._token(draft.name), self.sealer.seal(json.dumps(draft.to_json())), now, now),
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
                (self._token(draft.name), self.sealer.seal(json.dumps(draft.to_json())), now, current.id),
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

    def resolve(self, user_id: UUID | str, profile_ids: Iterable[str] = (), text: str = "") -> list[AgentProfile]:
        """The profiles a message refers to: ``profile_ids`` in order, then the ``@name``
        mentions of ``text`` in order, each once. An unknown id is ValidationFailed naming it;
        an ``@word`` that names no profile is ignored."""
        ids = list(dict.fromkeys(str(i) for i in profile_ids))
        unknown = self.missing(user_id, ids)
        if unknown:
            problems = [{"field": "mentioned_profile_ids", "error": f"unknown agent profile {i!r}"} for i in unknown]
            raise ValidationFailed("request validation failed: " + "; ".join(p["error"] for p in problems), problems)
        profiles = [self.get(user_id, i) for i in ids]
        for name in mentioned_names(text):
            found = self.by_name(user_id, name)
            if found is not None and all(found.id != p.id for p in profiles):
                profiles.append(found)
        return profiles
