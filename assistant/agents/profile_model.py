"""Agent profiles, the values: the profile, its templates, its ``@name`` mentions, and what
applying profiles to a message gives (:class:`ProfileApplication`). Storage is in
:mod:`assistant.agents.profiles`, validation in :mod:`assistant.agents.profile_validation`."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date
from enum import StrEnum
from typing import Any

from assistant.clock import utcnow
from assistant.llm.base import GenerationOptions

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
    unknown: tuple[str, ...] = ()  # ids the message named that are not the user's profiles

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
