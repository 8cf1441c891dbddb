"""Agent profiles: templates, validation, mentions, application (precedence, tools) and the store."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from uuid import uuid4

import pytest

from assistant.agents.profiles import (
    AgentProfile,
    InferenceOverrides,
    ProfileDraft,
    ProfileStore,
    Style,
    apply_profiles,
    draft_problems,
    mentioned_names,
    render_template,
    template_problems,
    validate_draft,
    verbosity_max_tokens,
)
from assistant.crypto import Sealer
from assistant.errors import ConflictError, NotFoundError, ValidationFailed
from assistant.llm.base import GenerationOptions
from assistant.storage.db import Database

TODAY = date(2024, 5, 17)


def profile(**fields) -> AgentProfile:
    base = {"id": str(uuid4()), "user_id": "u", "created_at": "t", "updated_at": "t", "name": "coder"}
    return AgentProfile(**{**base, **fields})


def errors_of(draft: ProfileDraft) -> dict[str, str]:
    return {p["field"]: p["error"] for p in draft_problems(draft)}


# --- templates -------------------------------------------------------------------------------------


def test_a_template_with_known_placeholders_and_literal_braces_is_valid() -> None:
    template = "You are {name} ({role}) on {date}. Skills: {skills}. JSON looks like {{\"a\": 1}}. {user_prompt}"
    assert template_problems(template) == []


@pytest.mark.parametrize(("template", "expected"), [
    ("Hi {nme}", ("unknown placeholder {nme} (allowed: {name}, {role}, {emoji}, {skills}, {tone}, {verbosity}, "
                  "{reasoning_depth}, {autonomy_level}, {date}, {user_prompt}; write {{ or }} for a literal brace)")),
    ("Hi {}", "empty placeholder {}: name a variable"),
    ("Hi {0}", "unknown placeholder {0}"),
    ("Hi {name.__class__}", "unknown placeholder {name.__class__}"),
    ("Hi {name[0]}", "unknown placeholder {name[0]}"),
    ("Hi {name!r}", "placeholder {name!r} takes no conversion or format spec: write {name}"),
    ("Hi {name:>10}", "placeholder {name:>10} takes no conversion or format spec"),
    ("Hi {name", "malformed template: expected '}' before end of string; write {{ or }} for a literal brace"),
    ("Hi name}", "malformed template: Single '}' encountered in format string"),
])
def test_template_problems_are_precise(template: str, expected: str) -> None:
    problems = template_problems(template)
    assert len(problems) == 1
    assert problems[0].startswith(expected)


def test_each_unknown_placeholder_is_named_once() -> None:
    problems = template_problems("{foo} {bar} {foo} {name}")
    assert [p.split(" (")[0] for p in problems] == ["unknown placeholder {foo}", "unknown placeholder {bar}"]


def test_render_template_fills_values_and_keeps_literal_braces() -> None:
    out = render_template("{name} says {{hi}} to {user_prompt}{missing_is_empty}", {"name": "bot", "user_prompt": "you"})
    assert out == "bot says {hi} to you"


def test_render_system_prompt_fills_every_variable() -> None:
    p = profile(name="reviewer", role="Reviews Python", emoji="🔍", skills=("python", "testing"),
                style=Style(tone="dry", verbosity="terse", reasoning_depth="deep"), autonomy_level="low",
                system_prompt_template="{emoji} {name}: {role}. [{skills}] {tone}/{verbosity}/{reasoning_depth}/"
                                       "{autonomy_level} {date} <{user_prompt}>")
    assert p.render_system_prompt("fix it", TODAY) == (
        "🔍 reviewer: Reviews Python. [python, testing] dry/terse/deep/low 2024-05-17 <fix it>"
    )


def test_an_empty_template_introduces_the_profile() -> None:
    assert profile(name="coder", role="Writes code.", emoji="🐍").render_system_prompt() == (
        "You are coder 🐍. Your role: Writes code."
    )
    assert profile(name="coder").render_system_prompt() == "You are coder."


def test_the_date_defaults_to_today_in_utc() -> None:
    p = profile(system_prompt_template="{date}")
    assert len(p.render_system_prompt()) == len("2024-05-17")


def test_instructions_state_style_skills_and_autonomy() -> None:
    p = profile(skills=("python", "get_weather"), style=Style(tone="friendly", verbosity="terse",
                                                               reasoning_depth="deep"), autonomy_level="high")
    lines = p.instructions().splitlines()
    assert lines[0] == "Tone: friendly."
    assert lines[1].startswith("Verbosity: terse: answer in as few words as possible")
    assert lines[2].startswith("Reasoning: deep: think the problem through step by step")
    assert lines[3] == "Skills: python, get_weather."
    assert lines[4].startswith("Autonomy: high: act on your own judgement")
    plain = profile().instructions().splitlines()
    assert [line.split(":")[0] for line in plain] == ["Verbosity", "Reasoning", "Autonomy"]
    assert "normal" in plain[0] and "standard" in plain[1] and "medium" in plain[2]


# --- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["coder", "Code_Reviewer-2", "a", "9lives", "x" * 64])
def test_valid_names(name: str) -> None:
    assert draft_problems(ProfileDraft(name=name)) == []


@pytest.mark.parametrize("name", ["", "-coder", "_coder", "code reviewer", "coder!", "@coder", "café", "x" * 65])
def test_invalid_names_say_which_characters_are_allowed(name: str) -> None:
    error = errors_of(ProfileDraft(name=name))["name"]
    assert "1 to 64 characters: ASCII letters, digits, '-' and '_', starting with a letter or digit" in error
    assert "@name" in error


def test_skills_must_be_identifiers_without_duplicates() -> None:
    errors = errors_of(ProfileDraft(name="a", skills=("python", "bad skill", "Python", "", "web.search")))
    assert set(errors) == {"skills.1", "skills.2", "skills.3"}
    assert "a skill identifier is" in errors["skills.1"]
    assert errors["skills.2"] == "duplicate skill 'Python'"
    assert "at most 32 skills" in errors_of(ProfileDraft(name="a", skills=tuple(f"s{i}" for i in range(33))))["skills"]


def test_value_sets_and_ranges() -> None:
    draft = ProfileDraft(
        name="a", style=Style(verbosity="chatty", reasoning_depth="shallow"), autonomy_level="total",
        inference_overrides=InferenceOverrides(temperature=2.5, max_tokens=0, model=""),
        system_prompt_template="{oops}", role="r" * 2001, emoji="e" * 17, skills=(),
    )
    errors = errors_of(draft)
    assert errors["style.verbosity"] == "must be one of terse, normal, verbose (got 'chatty')"
    assert errors["style.reasoning_depth"] == "must be one of standard, deep (got 'shallow')"
    assert errors["autonomy_level"] == "must be one of low, medium, high (got 'total')"
    assert errors["inference_overrides.temperature"] == "must be a number from 0.0 to 2.0 (got 2.5)"
    assert errors["inference_overrides.max_tokens"] == "must be an integer from 1 to 131072 (got 0)"
    assert errors["inference_overrides.model"].startswith("must be 1 to 200 characters")
    assert errors["system_prompt_template"].startswith("unknown placeholder {oops}")
    assert errors["role"] == "must be at most 2,000 characters (got 2,001)"
    assert errors["emoji"] == "must be at most 16 characters (got 17)"


def test_validate_draft_raises_with_every_field() -> None:
    with pytest.raises(ValidationFailed) as info:
        validate_draft(ProfileDraft(name="bad name", system_prompt_template="{x}"))
    assert [f["field"] for f in info.value.details["fields"]] == ["name", "system_prompt_template"]
    assert info.value.message.startswith("invalid agent profile: name: must be")


# --- mentions --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "names"), [
    ("@coder fix this", ["coder"]),
    ("Hey @Coder, and @reviewer: look", ["coder", "reviewer"]),
    ("(@coder) @coder @CODER.", ["coder"]),
    ("@coder's idea", ["coder"]),
    ("mail bob@coder.com or a.b@x", []),
    ("@@coder @-coder @_x", []),
    ("@code_reviewer-2!", ["code_reviewer-2"]),
    ("line one\n@planner", ["planner"]),
    ("@" + "x" * 65, []),
    ("no mentions at all", []),
])
def test_mentioned_names(text: str, names: list[str]) -> None:
    assert mentioned_names(text) == names


# --- application -----------------------------------------------------------------------------------


def test_verbosity_hints() -> None:
    assert verbosity_max_tokens("terse", 512) == 256
    assert verbosity_max_tokens("terse", 100) == 100  # never raises the configured value
    assert verbosity_max_tokens("normal", 512) == 512
    assert verbosity_max_tokens("verbose", 512) == 1024
    assert verbosity_max_tokens("verbose", 2048) == 2048
    assert verbosity_max_tokens("verbose", 512, context_length=800) == 800


def test_no_profiles_change_nothing() -> None:
    applied = apply_profiles([])
    base = GenerationOptions(temperature=0.7, max_tokens=512)
    assert (applied.system, applied.tools, applied.primary) == ("", None, None)
    assert applied.options(base, 4096) == base


def test_the_primary_profile_gives_the_system_block_and_the_others_a_line_each() -> None:
    primary = profile(name="coder", system_prompt_template="You are {name}. Task: {user_prompt}")
    second = profile(name="reviewer", emoji="🔍", role="Reviews code.", skills=("python",))
    third = profile(name="tester")
    applied = apply_profiles([primary, second, third], user_prompt="fix the bug", today=TODAY)
    assert applied.primary is primary
    assert applied.system == (
        "You are coder. Task: fix the bug\n\n" + primary.instructions()
        + "\n\nAlso mentioned in this message (keep their perspectives in mind):\n"
        "- reviewer 🔍: Reviews code. Skills: python.\n- tester"
    )


def test_options_precedence_override_then_hint_then_base() -> None:
    base = GenerationOptions(model=None, temperature=0.7, max_tokens=512)
    p = profile(style=Style(verbosity="terse"), inference_overrides=InferenceOverrides(temperature=0.2, model="m"))
    options = p.apply().options(base, 4096)
    assert (options.temperature, options.max_tokens, options.model) == (0.2, 256, "m")
    p = profile(style=Style(verbosity="terse"), inference_overrides=InferenceOverrides(max_tokens=900))
    options = p.apply().options(base, 4096)
    assert (options.temperature, options.max_tokens, options.model) == (0.7, 900, None)
    p = profile(inference_overrides=InferenceOverrides(max_tokens=9000, temperature=0.0))
    options = p.apply().options(base, 4096)
    assert (options.temperature, options.max_tokens) == (0.0, 4096)  # 0.0 is a value; capped at the context


def test_skills_that_name_registered_tools_restrict_the_tools() -> None:
    registered = ["create_reminder", "execute_code", "list_reminders"]
    p = profile(skills=("planning", "list_reminders", "create_reminder"))
    assert p.apply(registered_tools=registered).tools == ("list_reminders", "create_reminder")
    assert profile(skills=("planning",)).apply(registered_tools=registered).tools is None
    assert profile().apply(registered_tools=registered).tools is None
    secondary = profile(name="other", skills=("execute_code",))
    assert apply_profiles([p, secondary], registered_tools=registered).tools == ("list_reminders", "create_reminder")


# --- the store -------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> ProfileStore:
    db = Database(tmp_path / "profiles.db")
    yield ProfileStore(db, Sealer(bytes(range(32))))
    db.close()


def test_create_get_and_seal(store: ProfileStore) -> None:
    draft = ProfileDraft(name="Coder", role="Writes secret code", emoji="🐍", skills=("python",),
                         style=Style(tone="dry", verbosity="verbose", reasoning_depth="deep"),
                         system_prompt_template="You are {name}.", autonomy_level="high",
                         inference_overrides=InferenceOverrides(temperature=0.3, max_tokens=100, model="m"))
    created = store.create("u1", draft)
    assert created.created_at == created.updated_at and created.created_at.endswith("Z")
    got = store.get("u1", created.id)
    assert got == created
    assert (got.name, got.skills, got.style.verbosity, got.inference_overrides.temperature) == (
        "Coder", ("python",), "verbose", 0.3)
    raw = store.db.one("SELECT * FROM agent_profiles")
    assert b"secret" not in bytes(raw["profile_sealed"]) and b"Coder" not in bytes(raw["profile_sealed"])


def test_invalid_drafts_are_refused_and_nothing_is_stored(store: ProfileStore) -> None:
    with pytest.raises(ValidationFailed):
        store.create("u1", ProfileDraft(name="x", system_prompt_template="{nope}"))
    assert store.count("u1") == 0


def test_names_are_unique_per_user_ignoring_case(store: ProfileStore) -> None:
    first = store.create("u1", ProfileDraft(name="Coder"))
    with pytest.raises(ConflictError) as info:
        store.create("u1", ProfileDraft(name="cODER"))
    assert "'cODER' already exists" in info.value.message
    assert info.value.details == {"id": first.id}
    store.create("u2", ProfileDraft(name="coder"))  # another user may
    assert store.count("u1") == 1 and store.count("u2") == 1


def test_list_is_oldest_first_and_paged(store: ProfileStore) -> None:
    ids = [store.create("u1", ProfileDraft(name=f"p{i}")).id for i in range(5)]
    store.create("u2", ProfileDraft(name="theirs"))
    assert [p.id for p in store.list("u1")] == ids
    assert [p.id for p in store.list("u1", limit=2, offset=1)] == ids[1:3]
    assert store.count("u1") == 5


def test_another_users_profile_is_not_found(store: ProfileStore) -> None:
    mine = store.create("u1", ProfileDraft(name="coder"))
    with pytest.raises(NotFoundError, match=mine.id):
        store.get("u2", mine.id)
    with pytest.raises(NotFoundError):
        store.delete("u2", mine.id)
    with pytest.raises(NotFoundError):
        store.update("u2", mine.id, {"role": "x"})
    assert store.by_name("u2", "coder") is None
    assert store.get("u1", mine.id).role == ""


def test_by_name_ignores_case_and_a_leading_at(store: ProfileStore) -> None:
    created = store.create("u1", ProfileDraft(name="Coder"))
    assert store.by_name("u1", "coder") == created
    assert store.by_name("u1", "@CODER") == created
    assert store.by_name("u1", "coders") is None


def test_update_changes_only_supplied_fields(store: ProfileStore) -> None:
    created = store.create("u1", ProfileDraft(
        name="coder", role="r", skills=("a",), style=Style(tone="dry", verbosity="terse"),
        inference_overrides=InferenceOverrides(temperature=0.3, max_tokens=100)))
    updated = store.update("u1", created.id, {"role": "new role", "style": {"verbosity": "verbose"},
                                              "inference_overrides": {"max_tokens": None}})
    assert updated.role == "new role"
    assert updated.skills == ("a",)
    assert updated.style == Style(tone="dry", verbosity="verbose", reasoning_depth="standard")
    assert updated.inference_overrides == InferenceOverrides(temperature=0.3, max_tokens=None)
    assert updated.created_at == created.created_at and updated.updated_at >= created.updated_at
    assert store.get("u1", created.id) == updated


def test_update_refuses_nulls_unknown_fields_and_invalid_values(store: ProfileStore) -> None:
    created = store.create("u1", ProfileDraft(name="coder"))
    with pytest.raises(ValidationFailed) as info:
        store.update("u1", created.id, {"role": None, "colour": "red", "style": {"tone": None, "mood": 1}})
    assert {(f["field"], f["error"]) for f in info.value.details["fields"]} == {
        ("role", "must not be null"), ("colour", "unknown field"), ("style.tone", "must not be null"),
        ("style.mood", "unknown field")}
    with pytest.raises(ValidationFailed) as info:
        store.update("u1", created.id, {"system_prompt_template": "{bad}"})
    assert info.value.details["fields"][0]["field"] == "system_prompt_template"
    assert store.get("u1", created.id) == created


def test_renaming_to_a_taken_name_conflicts_but_a_case_change_does_not(store: ProfileStore) -> None:
    coder = store.create("u1", ProfileDraft(name="coder"))
    store.create("u1", ProfileDraft(name="reviewer"))
    with pytest.raises(ConflictError):
        store.update("u1", coder.id, {"name": "Reviewer"})
    assert store.update("u1", coder.id, {"name": "CODER"}).name == "CODER"
    assert store.by_name("u1", "coder").id == coder.id
    renamed = store.update("u1", coder.id, {"name": "writer"})
    assert store.by_name("u1", "writer") == renamed and store.by_name("u1", "coder") is None


def test_delete(store: ProfileStore) -> None:
    created = store.create("u1", ProfileDraft(name="coder"))
    store.delete("u1", created.id)
    with pytest.raises(NotFoundError):
        store.get("u1", created.id)
    store.create("u1", ProfileDraft(name="coder"))  # the name is free again


def test_resolve_ids_first_then_mentions_each_once(store: ProfileStore) -> None:
    coder = store.create("u1", ProfileDraft(name="coder"))
    reviewer = store.create("u1", ProfileDraft(name="Reviewer"))
    tester = store.create("u1", ProfileDraft(name="tester"))
    found = store.resolve("u1", [tester.id, tester.id], "@reviewer and @nobody and @TESTER and @coder")
    assert [p.id for p in found] == [tester.id, reviewer.id, coder.id]
    assert store.resolve("u1", [], "no mentions") == []
    assert store.resolve("u2", [], "@coder") == []  # another user's names are just text


def test_resolve_names_every_unknown_id(store: ProfileStore) -> None:
    coder = store.create("u1", ProfileDraft(name="coder"))
    with pytest.raises(ValidationFailed) as info:
        store.resolve("u2", [coder.id, "p-1"])
    assert info.value.details["fields"] == [
        {"field": "mentioned_profile_ids", "error": f"unknown agent profile {coder.id!r}"},
        {"field": "mentioned_profile_ids", "error": "unknown agent profile 'p-1'"},
    ]
    assert store.missing("u1", [coder.id, "p-1"]) == ["p-1"]


def test_for_message_resolves_ids_and_mentions_in_one_query(store: ProfileStore, monkeypatch) -> None:  # noqa: ANN001
    coder = store.create("u1", ProfileDraft(name="coder", skills=("list_reminders", "talk")))
    reviewer = store.create("u1", ProfileDraft(name="Reviewer"))
    theirs = store.create("u2", ProfileDraft(name="tester"))
    queries: list[str] = []
    real_query = store.db.query
    monkeypatch.setattr(store.db, "query", lambda sql, *a, **k: queries.append(sql) or real_query(sql, *a, **k))
    applied = store.for_message("u1", [reviewer.id, theirs.id, "p-1", reviewer.id], "@coder and @REVIEWER and @tester",
                                registered_tools=["list_reminders"], today=TODAY)
    assert len(queries) == 1
    assert [p.id for p in applied.profiles] == [reviewer.id, coder.id]
    assert applied.unknown == (theirs.id, "p-1")
    assert applied.system == apply_profiles([reviewer, coder], user_prompt="@coder and @REVIEWER and @tester",
                                            today=TODAY).system
    assert applied.tools is None  # the primary (reviewer) has no skill naming a tool
    assert store.for_message("u1", [], "@coder hi", registered_tools=["list_reminders"]).tools == ("list_reminders",)
    queries.clear()
    assert store.for_message("u1", [], "no mentions") == apply_profiles([])
    assert queries == []  # nothing named: no query at all
