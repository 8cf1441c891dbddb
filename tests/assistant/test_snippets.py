"""Snippets: the pure resolver (references, depth, cycles, diamonds, unknown titles, fences, size)
and the sealed store (uniqueness ignoring case, limits, ordering, search, partial updates)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.crypto import Sealer
from assistant.errors import ConflictError, NotFoundError, ValidationFailed
from assistant.snippets import (
    MAX_CONTENT_CHARS,
    MAX_DEPTH,
    SnippetStore,
    normalise_title,
    resolve,
)
from assistant.storage.db import Database

# --- the resolver ----------------------------------------------------------------------------------


class Library:
    """Snippets by title for the resolver, recording which normalised titles were looked up."""

    def __init__(self, **snippets: str):
        self.by_key = {normalise_title(t): (t, c) for t, c in snippets.items()}
        self.lookups: list[str] = []

    def add(self, title: str, content: str) -> None:
        self.by_key[normalise_title(title)] = (title, content)

    def find(self, key: str) -> tuple[str, str] | None:
        self.lookups.append(key)
        return self.by_key.get(key)

    def resolve(self, title: str, **options: int) -> str:
        return resolve(title, self.by_key[normalise_title(title)][1], self.find, **options)


def test_a_reference_is_replaced_by_the_content() -> None:
    lib = Library(Intro="Hello,\n/snippet Sign\nBye", Sign="Regards, Ann")
    assert lib.resolve("Intro") == "Hello,\nRegards, Ann\nBye"


def test_text_without_references_is_unchanged() -> None:
    content = "# Title\n\nSome *markdown* with a URL http://example.com/snippet x\r\nand CRLF\r\n"
    assert resolve("T", content, Library().find) == content


def test_the_title_is_the_rest_of_the_line_trimmed_and_matched_ignoring_case() -> None:
    lib = Library(Root="- /snippet   mY   SIGNATURE \t\nnext", **{"My Signature": "sig"})
    assert lib.resolve("Root") == "- sig\nnext"
    assert lib.lookups == ["my signature"]


def test_the_longest_title_wins_even_over_a_reference_inside_it() -> None:
    lib = Library(Root="/snippet A and /snippet B", A="a", B="b", **{"A and /snippet B": "whole"})
    assert lib.resolve("Root") == "whole"


@pytest.mark.parametrize(("content", "expected"), [
    ("Hello /snippet Name!", "Hello N!"),
    ("Hello /snippet Name, how are you?", "Hello N, how are you?"),
    ("(/snippet Name)", "(/snippet Name)"),  # glued to "(": not a reference
    ("( /snippet Name).", "( N)."),
    ("/snippet name", "N"),  # at the end of the string, ignoring case
    ("/snippet Name.\nnext", "N.\nnext"),
    ("/snippet Names", "/snippet Names [snippet not found]"),  # "Name" is a title, "Names" is not
    ("/snippet Name_x", "/snippet Name_x [snippet not found]"),
    ("/snippet Name2", "/snippet Name2 [snippet not found]"),
])
def test_a_title_ends_at_punctuation_or_the_end_of_the_line(content: str, expected: str) -> None:
    lib = Library(Root=content, Name="N")
    assert lib.resolve("Root") == expected


def test_titles_that_are_prefixes_of_each_other_the_longest_matches() -> None:
    lib = Library(Root="/snippet Intro long. /snippet Intro! /snippet Intro longer?\n/snippet intro LONG",
                  Intro="i", **{"Intro long": "il", "Intro longer": "ilr"})
    assert lib.resolve("Root") == "il. i! ilr?\nil"


def test_a_title_with_punctuation_and_spaces_inside() -> None:
    lib = Library(Root="See /snippet Q&A:  v2!, then /snippet Q", **{"Q&A: v2": "answers", "Q": "q"})
    assert lib.resolve("Root") == "See answers!, then q"


def test_several_references_on_one_line_and_nested_ones() -> None:
    lib = Library(Root="Dear /snippet Name, /snippet Body. /snippet Sign-off", Name="Ann",
                  Body="see /snippet Terms!", Terms="the terms", **{"Sign-off": "Regards, /snippet Name."})
    assert lib.resolve("Root") == "Dear Ann, see the terms!. Regards, Ann."


def test_after_an_unknown_title_the_rest_of_the_line_is_the_title() -> None:
    lib = Library(Root="/snippet Nobody, /snippet Name", Name="N")
    assert lib.resolve("Root") == "/snippet Nobody, /snippet Name [snippet not found]"


def test_a_cycle_inside_a_line_keeps_the_text_after_it() -> None:
    lib = Library(A="x /snippet B! y", B="b /snippet A? z")
    assert lib.resolve("A") == "x b /snippet A [cycle: A → B → A]? z! y"


def test_the_known_titles_spare_lookups() -> None:
    lib = Library(Root="/snippet Name, and more words here.", Name="N")
    assert resolve("Root", "/snippet Name, and more words here.", lib.find, titles={"name"}) == "N, and more words here."
    assert lib.lookups == ["name"]


def test_text_before_the_reference_stays() -> None:
    lib = Library(Root="Greeting: /snippet Hi", Hi="hello")
    assert lib.resolve("Root") == "Greeting: hello"


def test_one_final_line_break_of_the_inserted_content_is_dropped() -> None:
    lib = Library(Root="a\n/snippet X\nb", X="x1\nx2\n\n")
    assert lib.resolve("Root") == "a\nx1\nx2\n\nb"
    lib = Library(Root="a\r\n/snippet X\r\nb", X="x\r\n")
    assert lib.resolve("Root") == "a\r\nx\r\nb"


@pytest.mark.parametrize(
    "line",
    ["a/snippet X", "`/snippet X`", "/snippetX", "/snippet", "/snippet   ", "/SNIPPET X", "(/snippet X)"],
)
def test_what_is_not_a_reference(line: str) -> None:
    lib = Library(Root=line, X="expanded", **{"X`": "expanded", "X)": "expanded"})
    assert lib.resolve("Root") == line
    assert lib.lookups == []


def test_references_may_follow_any_whitespace() -> None:
    lib = Library(Root="\t/snippet X\n  text\t/snippet X", X="x")
    assert lib.resolve("Root") == "\tx\n  text\tx"


def test_fenced_code_is_left_alone() -> None:
    content = "```md\n/snippet X\n```\n~~~~\n/snippet X\n~~~\nstill code\n~~~~~\n/snippet X"
    lib = Library(Root=content, X="x")
    assert lib.resolve("Root") == content.removesuffix("/snippet X") + "x"


def test_a_backtick_line_with_backticks_after_it_is_not_a_fence() -> None:
    lib = Library(Root="``` inline ` code\n/snippet X", X="x")
    assert lib.resolve("Root") == "``` inline ` code\nx"


def test_an_unknown_title_stays_as_written_with_a_marker() -> None:
    lib = Library(Root="a\n/snippet Nowhere  \nb /snippet X", X="/snippet Also Missing")
    assert lib.resolve("Root") == "a\n/snippet Nowhere [snippet not found]\nb /snippet Also Missing [snippet not found]"


def chain(length: int) -> Library:
    """S0 references S1, ..., S(length-2) references S(length-1), which is plain text."""
    lib = Library()
    for i in range(length):
        lib.add(f"S{i}", f"<{i}> /snippet S{i + 1}" if i < length - 1 else f"<{i}>end")
    return lib


def test_depth_exactly_10_is_expanded() -> None:
    lib = chain(MAX_DEPTH + 1)  # S0 (depth 0) ... S10 (depth 10)
    assert lib.resolve("S0") == "".join(f"<{i}> " for i in range(10)) + "<10>end"


def test_depth_11_stays_visible_with_a_marker() -> None:
    lib = chain(MAX_DEPTH + 2)  # S11 would be at depth 11
    result = lib.resolve("S0")
    assert result == "".join(f"<{i}> " for i in range(11)) + "/snippet S11 [depth limit 10 reached]"
    assert "<11>" not in result


def test_the_depth_limit_is_a_parameter() -> None:
    assert chain(4).resolve("S0", max_depth=2) == "<0> <1> <2> /snippet S3 [depth limit 2 reached]"


def test_a_cycle_of_length_1() -> None:
    lib = Library(A="a\n/snippet a\nz")
    assert lib.resolve("A") == "a\n/snippet a [cycle: A → A]\nz"


def test_a_cycle_of_length_2() -> None:
    lib = Library(A="a /snippet B", B="b /snippet A")
    assert lib.resolve("A") == "a b /snippet A [cycle: A → B → A]"
    assert lib.resolve("B") == "b a /snippet B [cycle: B → A → B]"


def test_a_cycle_of_length_3() -> None:
    lib = Library(A="a /snippet B", B="b /snippet C", C="c /snippet A")
    assert lib.resolve("A") == "a b c /snippet A [cycle: A → B → C → A]"


def test_a_cycle_below_the_root_shows_only_the_loop() -> None:
    lib = Library(Root="r /snippet B", B="b /snippet C", C="c /snippet b")
    assert lib.resolve("Root") == "r b c /snippet b [cycle: B → C → B]"


def test_a_diamond_is_not_a_cycle() -> None:
    lib = Library(A="/snippet B\n/snippet C", B="b: /snippet D", C="c: /snippet D", D="d")
    assert lib.resolve("A") == "b: d\nc: d"


def test_the_same_snippet_twice_is_expanded_twice() -> None:
    lib = Library(A="/snippet B\n/snippet b", B="x")
    assert lib.resolve("A") == "x\nx"


def test_cycles_and_diamonds_together_never_loop() -> None:
    lib = Library(A="/snippet B\n/snippet C", B="/snippet C\n/snippet A", C="/snippet B\nc")
    assert lib.resolve("A") == (
        "/snippet B [cycle: B → C → B]\nc\n/snippet A [cycle: A → B → A]\n"
        "/snippet C [cycle: C → B → C]\n/snippet A [cycle: A → C → B → A]\nc"
    )


def test_an_exponential_expansion_stops_at_the_size_limit() -> None:
    lib = Library()
    for i in range(MAX_DEPTH + 1):  # each level references the next one 100 times: 100**10 copies
        lib.add(f"L{i}", "\n".join([f"/snippet L{i + 1}"] * 100) if i < MAX_DEPTH else "x" * 1000)
    result = lib.resolve("L0", max_chars=50_000)
    assert "[size limit reached]" in result
    assert len(result) < 200_000
    assert result.startswith("x" * 1000)


def test_markers_count_against_the_size_limit() -> None:
    long = "T" * 200
    lib = Library(**{long: "\n".join([f"/snippet {long}"] * 1000)})
    result = lib.resolve(long, max_chars=10_000)
    assert result.count("[cycle:") < 1000
    assert "[size limit reached]" in result


# --- the store -----------------------------------------------------------------------------------------


USER, OTHER = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "snippets.db")
    yield database
    database.close()


@pytest.fixture
def ticks() -> Iterator[str]:
    return (f"2024-01-01T00:00:{s:02d}.000Z" for s in itertools.count())


@pytest.fixture
def store(db: Database, ticks: Iterator[str]) -> SnippetStore:
    return SnippetStore(db, Sealer(os.urandom(32)), clock=lambda: next(ticks))


def test_create_and_get(store: SnippetStore) -> None:
    made = store.create(USER, "  Greeting  ", "Hello **there**")
    assert made.title == "Greeting"
    assert made.created_at == made.updated_at
    assert store.get(USER, made.id) == made


def test_content_defaults_to_empty(store: SnippetStore) -> None:
    assert store.create(USER, "Empty").content == ""


def test_title_and_content_are_sealed_at_rest(store: SnippetStore, db: Database) -> None:
    store.create(USER, "Secret recipe title", "grandma's secret ingredient")
    row = db.one("SELECT * FROM snippets")
    raw = b"".join(v if isinstance(v, bytes) else str(v).encode() for v in row.values())
    assert b"Secret recipe" not in raw and b"secret recipe" not in raw
    assert b"ingredient" not in raw


def test_the_title_key_ignores_case_and_whitespace_runs_and_differs_per_user(store: SnippetStore) -> None:
    key = store.title_key(USER, "My  Title")
    assert store.title_key(USER, " my title ") == key
    assert store.title_key(USER, "MY\tTITLE") == key
    assert store.title_key(OTHER, "My Title") != key
    assert store.title_key(USER, "My Titles") != key


def test_titles_are_unique_per_user_ignoring_case(store: SnippetStore) -> None:
    first = store.create(USER, "Standup Notes")
    with pytest.raises(ConflictError) as caught:
        store.create(USER, "standup  notes", "other")
    assert "'standup  notes'" in caught.value.message and "'Standup Notes'" in caught.value.message
    assert caught.value.details == {"title": "Standup Notes", "snippet_id": first.id}
    assert store.create(OTHER, "Standup Notes").title == "Standup Notes"
    assert store.list(USER).total == 1


def test_the_conflict_message_names_the_title(store: SnippetStore) -> None:
    store.create(USER, "Weekly")
    with pytest.raises(ConflictError, match="a snippet titled 'Weekly' already exists;"):
        store.create(USER, "Weekly")


@pytest.mark.parametrize(
    ("title", "content", "fields"),
    [
        ("", "", ["title"]),
        ("   ", "", ["title"]),
        ("x" * 201, "", ["title"]),
        ("two\nlines", "", ["title"]),
        ("tab\there", "", ["title"]),
        ("ok", "x" * (MAX_CONTENT_CHARS + 1), ["content"]),
        ("", "x" * (MAX_CONTENT_CHARS + 1), ["title", "content"]),
    ],
)
def test_limits(store: SnippetStore, title: str, content: str, fields: list[str]) -> None:
    with pytest.raises(ValidationFailed) as caught:
        store.create(USER, title, content)
    assert [f["field"] for f in caught.value.details["fields"]] == fields
    assert store.list(USER).total == 0


def test_limits_at_the_edge_are_accepted(store: SnippetStore) -> None:
    made = store.create(USER, "  " + "t" * 200 + "  ", "c" * MAX_CONTENT_CHARS)
    assert made.title == "t" * 200
    assert len(store.get(USER, made.id).content) == MAX_CONTENT_CHARS


def test_list_is_ordered_by_title_ignoring_case_and_paged(store: SnippetStore) -> None:
    for title in ["banana", "Apple", "cherry", "apricot"]:
        store.create(USER, title)
    store.create(OTHER, "aardvark")
    page = store.list(USER)
    assert [s.title for s in page.snippets] == ["Apple", "apricot", "banana", "cherry"]
    assert page.total == 4
    second = store.list(USER, limit=2, offset=1)
    assert [s.title for s in second.snippets] == ["apricot", "banana"]
    assert second.total == 4
    assert store.list(USER, offset=10).snippets == []


def test_search_matches_titles_ignoring_case_best_first(store: SnippetStore) -> None:
    for title in ["Meeting notes", "Notes", "notes archive", "Recipe", "Old NOTES"]:
        store.create(USER, title, "content mentions notes everywhere")
    store.create(OTHER, "Notes of someone else")
    found = store.search(USER, "  NOTES ")
    assert [s.title for s in found.snippets] == ["Notes", "notes archive", "Meeting notes", "Old NOTES"]
    assert found.total == 4
    assert [s.title for s in store.search(USER, "notes", limit=1, offset=1).snippets] == ["notes archive"]
    assert store.search(USER, "cip").total == 1
    assert store.search(USER, "everywhere").total == 0  # titles only


def test_search_with_a_blank_query_is_invalid(store: SnippetStore) -> None:
    with pytest.raises(ValidationFailed) as caught:
        store.search(USER, "   ")
    assert caught.value.details["fields"] == [{"field": "q", "error": "must not be blank"}]


def test_update_changes_only_the_given_fields(store: SnippetStore) -> None:
    made = store.create(USER, "Title", "body")
    renamed = store.update(USER, made.id, title="New title")
    assert (renamed.title, renamed.content) == ("New title", "body")
    assert renamed.updated_at > made.updated_at
    rewritten = store.update(USER, made.id, content="new body")
    assert (rewritten.title, rewritten.content) == ("New title", "new body")
    assert store.get(USER, made.id) == rewritten
    assert rewritten.created_at == made.created_at


def test_update_without_a_change_keeps_updated_at(store: SnippetStore) -> None:
    made = store.create(USER, "Title", "body")
    same = store.update(USER, made.id, title=" Title ", content="body")
    assert same == made
    assert store.get(USER, made.id).updated_at == made.updated_at


def test_update_with_nothing_is_invalid(store: SnippetStore) -> None:
    made = store.create(USER, "Title")
    with pytest.raises(ValidationFailed) as caught:
        store.update(USER, made.id)
    assert [f["field"] for f in caught.value.details["fields"]] == ["body"]


def test_update_checks_limits_and_uniqueness(store: SnippetStore) -> None:
    made = store.create(USER, "Title", "body")
    store.create(USER, "Taken")
    with pytest.raises(ConflictError, match="'TAKEN'"):
        store.update(USER, made.id, title="TAKEN")
    with pytest.raises(ValidationFailed):
        store.update(USER, made.id, content="x" * (MAX_CONTENT_CHARS + 1))
    assert store.update(USER, made.id, title="TITLE").title == "TITLE"  # its own title in another case
    assert store.get(USER, made.id).content == "body"


def test_another_users_snippet_is_not_found(store: SnippetStore) -> None:
    made = store.create(USER, "Mine", "private")
    with pytest.raises(NotFoundError):
        store.get(OTHER, made.id)
    with pytest.raises(NotFoundError):
        store.update(OTHER, made.id, content="stolen")
    with pytest.raises(NotFoundError):
        store.delete(OTHER, made.id)
    with pytest.raises(NotFoundError):
        store.resolved(OTHER, made.id)
    assert store.get(USER, made.id).content == "private"


def test_delete(store: SnippetStore) -> None:
    made = store.create(USER, "Gone")
    store.delete(USER, made.id)
    with pytest.raises(NotFoundError):
        store.get(USER, made.id)
    with pytest.raises(NotFoundError):
        store.delete(USER, made.id)
    assert store.create(USER, "gone").title == "gone"  # the title is free again


def test_resolved_matches_the_longest_of_the_users_titles(store: SnippetStore) -> None:
    root = store.create(USER, "Root", "Hi /snippet Name! /snippet Name long.")
    store.create(USER, "Name", "Ann")
    store.create(USER, "Name Long", "Ann Smith")
    store.create(OTHER, "Name long.", "theirs")
    assert store.resolved(USER, root.id).resolved_content == "Hi Ann! Ann Smith."


def test_resolved_uses_only_the_users_own_snippets(store: SnippetStore) -> None:
    root = store.create(USER, "Root", "start\n/snippet Part\n/snippet Theirs")
    store.create(USER, "part", "mine /snippet root")
    store.create(OTHER, "Theirs", "not yours")
    resolved = store.resolved(USER, root.id)
    assert resolved.resolved_content == (
        "start\nmine /snippet root [cycle: Root → part → Root]\n/snippet Theirs [snippet not found]"
    )
    assert resolved.original_content == root.content
    assert (resolved.id, resolved.title) == (root.id, "Root")


def test_snippets_survive_reopening_with_the_same_key(tmp_path: Path) -> None:
    key = os.urandom(32)
    db = Database(tmp_path / "reopen.db")
    made = SnippetStore(db, Sealer(key)).create(USER, "Keep", "kept")
    db.close()
    db = Database(tmp_path / "reopen.db")
    try:
        store = SnippetStore(db, Sealer(key))
        assert store.get(USER, made.id) == made
        with pytest.raises(ConflictError):
            store.create(USER, "KEEP")
    finally:
        db.close()


def test_an_unencrypted_store_works_the_same(db: Database) -> None:
    store = SnippetStore(db)
    made = store.create(USER, "Plain", "text")
    assert store.get(USER, made.id).content == "text"
    with pytest.raises(ConflictError):
        store.create(USER, "plain")
