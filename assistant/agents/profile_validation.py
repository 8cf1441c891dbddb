"""Agent profiles, validation: every problem of a draft as ``{field, error}``."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from assistant.agents.profile_model import (
    MAX_EMOJI_CHARS,
    MAX_MODEL_CHARS,
    MAX_ROLE_CHARS,
    MAX_SKILLS,
    MAX_TEMPLATE_CHARS,
    MAX_TOKENS_LIMIT,
    MAX_TONE_CHARS,
    NAME_RE,
    NAME_RULE,
    SKILL_RE,
    SKILL_RULE,
    AutonomyLevel,
    ProfileDraft,
    ReasoningDepth,
    Verbosity,
    template_problems,
)
from assistant.errors import ValidationFailed


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
