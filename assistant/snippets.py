"""Snippets: reusable Markdown texts owned by one user, and the resolver of ``/snippet <Title>``.

**Storage.** Title and content are sealed (XChaCha20-Poly1305) like conversation texts. Titles are
unique per user, ignoring case: each row keeps ``title_key``, a keyed BLAKE2b token
(:meth:`assistant.crypto.Sealer.token`, whose key is derived from the store's key) of the user id
and the normalised title, under ``UNIQUE (user_id, title_key)``. Equal titles give equal keys, the
title itself is not on disk, and the same title of two users gives two unrelated keys. Ordering and
searching open the user's titles in memory: a user has tens or hundreds of snippets, not millions.

**Titles** are trimmed, 1..200 characters, one line (no line breaks or other control characters).
Two titles are the same when they are equal after Unicode NFC normalisation, case folding
(``str.casefold``) and collapsing each run of whitespace to one space (:func:`normalise_title`).

**References.** A reference is ``/snippet`` at the start of a line or after whitespace, one or more
spaces or tabs, then a title: the LONGEST title of the user's snippets that the rest of the line
starts with (compared like titles), ending at the end of the line or before a character that is not
a letter, digit or "_" — so in "Hello /snippet Name!" the title is "Name" and the "!" stays, and with
snippets "Intro" and "Intro long", "/snippet Intro long." names the second. Text after a title may
hold further references. When no title matches, the reference runs to the end of the line (the
rest of it, trimmed, is shown as the unknown title). ``/snippet`` glued to other text (in
inline code, after a backtick; or ``a/snippet X``) is not a reference, nor is any line of a fenced
code block (fences of three or more backticks or tildes). :func:`resolve` replaces the reference
(``/snippet`` and the title; the text around it on the line stays) with the referenced snippet's
content, itself resolved, minus one final line break. A reference that is not expanded stays as
written, followed by a marker:

- ``[snippet not found]`` — no snippet of the user has that title;
- ``[cycle: A → B → A]`` — the snippet is already being expanded on this path (the marker shows the
  loop). The same snippet referenced twice side by side (a diamond) is not a cycle;
- ``[depth limit 10 reached]`` — the root is depth 0, what it references depth 1, ...; a reference
  that would expand at depth 11 is left;
- ``[size limit reached]`` — the expansion has already copied 1,000,000 characters of snippet text
  (so a snippet that references a large one thousands of times cannot exhaust memory).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Collection
from dataclasses import dataclass
from uuid import uuid4

import apsw

from assistant.clock import iso
from assistant.crypto import SealContext, Sealer
from assistant.errors import ConflictError, NotFoundError, ValidationFailed
from assistant.storage.db import Database

MAX_TITLE_CHARS = 200
MAX_CONTENT_CHARS = 50_000
MAX_DEPTH = 10
MAX_RESOLVED_CHARS = 1_000_000

LINE_BREAK = re.compile(r"(\r\n|\r|\n)")
FINAL_LINE_BREAK = re.compile(r"(?:\r\n|\r|\n)\Z")
REFERENCE = re.compile(r"(?<!\S)/snippet[ \t]+(?=\S)")
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")

#: Finds a snippet by normalised title: its ``(title, content)``, or None.
Lookup = Callable[[str], tuple[str, str] | None]


@dataclass(frozen=True)
class Snippet:
    id: str
    user_id: str
    title: str
    content: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class SnippetPage:
    snippets: list[Snippet]
    total: int  # all matching snippets, not only this page


@dataclass(frozen=True)
class ResolvedSnippet:
    id: str
    title: str
    resolved_content: str
    original_content: str


# --- titles ----------------------------------------------------------------------------------------


def normalise_title(title: str) -> str:
    """The form titles are compared in: NFC, case-folded, whitespace runs as one space, trimmed."""
    return unicodedata.normalize("NFC", " ".join(title.split())).casefold()


def title_problem(title: str) -> str | None:
    """Why ``title`` cannot be a snippet title, or None."""
    stripped = title.strip()
    if not stripped:
        return "must not be empty"
    if len(stripped) > MAX_TITLE_CHARS:
        return f"must be at most {MAX_TITLE_CHARS} characters after trimming (this one has {len(stripped)})"
    if any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in stripped):
        return "must be one line without line breaks, tabs or other control characters"
    return None


def content_problem(content: str) -> str | None:
    if len(content) > MAX_CONTENT_CHARS:
        return f"must be at most {MAX_CONTENT_CHARS:,} characters (this one has {len(content):,})"
    return None


# --- the resolver (pure) ------------------------------------------------------------------------


def resolve(title: str, content: str, find: Lookup, *, titles: Collection[str] | None = None,
            max_depth: int = MAX_DEPTH, max_chars: int = MAX_RESOLVED_CHARS) -> str:
    """``content`` of the snippet ``title`` with its references expanded (see the module doc).

    ``find`` maps a normalised title (:func:`normalise_title`) to ``(title, content)`` or None.
    ``titles``, the normalised titles that exist, lets a reference be matched without calling
    ``find`` for each candidate; without it, candidates are tried with ``find``, longest first.
    """
    return _Resolver(find, titles, max_depth, max_chars).expand(content, ((normalise_title(title), title),))


def title_ends(rest: str) -> list[int]:
    """Where a title could end in ``rest`` (the text after ``/snippet `` on a line), longest
    first: after a non-blank character that ends the line or is followed by a character that is
    not a word character (letter, digit, "_") or is not one itself, within the first
    MAX_TITLE_CHARS non-blank characters."""
    ends: list[int] = []
    seen = 0
    for i, ch in enumerate(rest):
        if ch.isspace():
            continue
        seen += 1
        if seen > MAX_TITLE_CHARS:
            break
        after = rest[i + 1] if i + 1 < len(rest) else ""
        if not after or not _is_word(after) or not _is_word(ch):
            ends.append(i + 1)
    return ends[::-1]


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class _Resolver:
    def __init__(self, find: Lookup, titles: Collection[str] | None, max_depth: int, max_chars: int):
        self.find = find
        self.titles = titles
        self.max_depth = max_depth
        self.budget = max_chars  # characters of snippet text (and markers) still allowed

    def expand(self, content: str, chain: tuple[tuple[str, str], ...]) -> str:
        """``chain``: ``(key, title)`` of the snippets being expanded, outermost first."""
        parts = LINE_BREAK.split(content)  # line, break, line, break, ..., line
        fence: str | None = None
        for i in range(0, len(parts), 2):
            fence, code = _fence_state(parts[i], fence)
            if not code:
                parts[i] = self.expand_line(parts[i], chain)
        return "".join(parts)

    def expand_line(self, line: str, chain: tuple[tuple[str, str], ...]) -> str:
        out: list[str] = []
        pos = 0
        while match := REFERENCE.search(line, pos):
            out.append(line[pos:match.start()])
            rest = line[match.end():]
            end, found = self.match_title(rest)
            if found is None:  # unknown: the rest of the line is the title
                out.append(self.marked(line[match.start():].rstrip(), "snippet not found"))
                return "".join(out)
            key = normalise_title(rest[:end])
            if not rest[end:].strip():  # blanks that end the line go with the reference
                end = len(rest)
            out.append(self.reference(line[match.start():match.end() + end].rstrip(), key, found, chain))
            pos = match.end() + end
        out.append(line[pos:])
        return "".join(out)

    def match_title(self, rest: str) -> tuple[int, tuple[str, str] | None]:
        """The longest title ``rest`` starts with: its end in ``rest`` and ``(title, content)``."""
        for end in title_ends(rest):
            key = normalise_title(rest[:end])
            if self.titles is not None and key not in self.titles:
                continue
            found = self.find(key)
            if found is not None:
                return end, found
        return 0, None

    def reference(self, written: str, key: str, found: tuple[str, str], chain: tuple[tuple[str, str], ...]) -> str:
        title, content = found
        keys = [k for k, _ in chain]
        if key in keys:
            loop = [t for _, t in chain[keys.index(key):]] + [title]
            return self.marked(written, "cycle: " + " → ".join(loop))
        if len(chain) > self.max_depth:
            return self.marked(written, f"depth limit {self.max_depth} reached")
        if len(content) > self.budget:
            return self.marked(written, "size limit reached")
        self.budget -= len(content)
        return FINAL_LINE_BREAK.sub("", self.expand(content, (*chain, (key, title))), count=1)

    def marked(self, written: str, note: str) -> str:
        if len(note) > self.budget:
            note = "size limit reached"
        self.budget -= len(note)
        return f"{written} [{note}]"


def _fence_state(line: str, fence: str | None) -> tuple[str | None, bool]:
    """``(fence open after this line, this line is code)`` for CommonMark fenced code blocks."""
    match = FENCE.match(line)
    if fence is None:
        if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            return match.group(1), True
        return None, False
    if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) and not match.group(2).strip():
        return None, True
    return fence, True


# --- the store -------------------------------------------------------------------------------------


def sealed_at(column: str, snippet_id: str, user_id: str) -> SealContext:
    """Where a snippet's title or content is sealed (its associated data)."""
    return SealContext("snippets", column, snippet_id, user_id)


class SnippetStore:
    """The snippets of each user, sealed at rest. Another user's snippet is NotFoundError."""

    def __init__(self, db: Database, sealer: Sealer | None = None, *, clock: Callable[[], str] = iso):
        self.db = db
        self.sealer = sealer or Sealer(None)
        self.clock = clock

    def title_key(self, user_id: str, title: str) -> bytes:
        return self.sealer.token(f"snippet-title\x00{user_id}\x00{normalise_title(title)}")

    def _snippet(self, row: dict) -> Snippet:
        sid, user = row["id"], row["user_id"]
        return Snippet(id=sid, user_id=user, title=self.sealer.open(row["title_sealed"], sealed_at("title_sealed", sid, user)),
                       content=self.sealer.open(row["content_sealed"], sealed_at("content_sealed", sid, user)),
                       created_at=row["created_at"],
                       updated_at=row["updated_at"])

    def _titles(self, user_id: str) -> list[tuple[str, str, str]]:
        """``(id, title, created_at)`` of every snippet of the user, A→Z (case-insensitive)."""
        rows = self.db.query("SELECT id, title_sealed, created_at FROM snippets WHERE user_id = ?", (user_id,))
        titles = [(r["id"], self.sealer.open(r["title_sealed"], sealed_at("title_sealed", r["id"], user_id)),
                   r["created_at"]) for r in rows]
        return sorted(titles, key=lambda t: (normalise_title(t[1]), t[1], t[2], t[0]))

    def _rows(self, user_id: str, ids: list[str]) -> list[Snippet]:
        """The snippets ``ids`` in that order."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.db.query(f"SELECT * FROM snippets WHERE user_id = ? AND id IN ({marks})", (user_id, *ids))
        by_id = {r["id"]: self._snippet(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    # --- reads -----------------------------------------------------------------------------------

    def get(self, user_id: str, snippet_id: str) -> Snippet:
        row = self.db.one("SELECT * FROM snippets WHERE id = ? AND user_id = ?", (str(snippet_id), str(user_id)))
        if row is None:
            raise NotFoundError(f"snippet {snippet_id} not found")
        return self._snippet(row)

    def list(self, user_id: str, limit: int = 100, offset: int = 0) -> SnippetPage:
        """The user's snippets by title A→Z (case-insensitive; ties by creation); ``total`` counts all."""
        titles = self._titles(str(user_id))
        page = [t[0] for t in titles[offset:offset + limit]]
        return SnippetPage(self._rows(str(user_id), page), len(titles))

    def search(self, user_id: str, q: str, limit: int = 100, offset: int = 0) -> SnippetPage:
        """Snippets whose title contains ``q`` (compared like titles: case-insensitive, whitespace
        runs as one space). Exact matches first, then titles starting with ``q``, then the rest;
        A→Z within each group. ``total`` counts all matches."""
        needle = normalise_title(q)
        if not needle:
            raise ValidationFailed("q must not be blank", [{"field": "q", "error": "must not be blank"}])
        ranked = []
        for position, (snippet_id, title, _) in enumerate(self._titles(str(user_id))):
            normal = normalise_title(title)
            if needle in normal:
                ranked.append((0 if normal == needle else 1 if normal.startswith(needle) else 2, position, snippet_id))
        ranked.sort()
        return SnippetPage(self._rows(str(user_id), [r[2] for r in ranked[offset:offset + limit]]), len(ranked))

    def resolved(self, user_id: str, snippet_id: str) -> ResolvedSnippet:
        """The snippet with its ``/snippet <Title>`` references expanded among the user's snippets."""
        snippet = self.get(user_id, snippet_id)
        ids = {normalise_title(title): i for i, title, _ in self._titles(str(user_id))}
        loaded: dict[str, tuple[str, str]] = {}

        def find(key: str) -> tuple[str, str] | None:
            if key not in loaded and key in ids:
                found = self.get(user_id, ids[key])
                loaded[key] = (found.title, found.content)
            return loaded.get(key)

        return ResolvedSnippet(snippet.id, snippet.title,
                               resolve(snippet.title, snippet.content, find, titles=ids.keys()), snippet.content)

    # --- writes ----------------------------------------------------------------------------------

    @staticmethod
    def _check(title: str | None, content: str | None) -> None:
        problems = [
            {"field": field, "error": problem}
            for field, problem in (("title", title_problem(title) if title is not None else None),
                                   ("content", content_problem(content) if content is not None else None))
            if problem
        ]
        if problems:
            summary = "; ".join(f"{p['field']}: {p['error']}" for p in problems)
            raise ValidationFailed(f"invalid snippet: {summary}", problems)

    def _conflict(self, user_id: str, key: bytes, title: str, except_id: str | None = None) -> None:
        row = self.db.one("SELECT id, title_sealed FROM snippets WHERE user_id = ? AND title_key = ?", (user_id, key))
        if row is not None and row["id"] != except_id:
            existing = self.sealer.open(row["title_sealed"], sealed_at("title_sealed", row["id"], user_id))
            also = "" if existing == title else f" (as {existing!r})"
            raise ConflictError(
                f"a snippet titled {title!r} already exists{also}; titles are unique per user, ignoring case",
                {"title": existing, "snippet_id": row["id"]},
            )

    def create(self, user_id: str, title: str, content: str = "") -> Snippet:
        """A new snippet; ValidationFailed for a bad title or content, ConflictError for a title taken."""
        self._check(title, content)
        user_id, title = str(user_id), title.strip()
        key = self.title_key(user_id, title)
        now = self.clock()
        snippet = Snippet(str(uuid4()), user_id, title, content, now, now)
        try:
            with self.db.transaction() as db:
                self._conflict(user_id, key, title)
                db.execute(
                    "INSERT INTO snippets (id, user_id, title_sealed, title_key, content_sealed, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (snippet.id, user_id, self.sealer.seal(title, sealed_at("title_sealed", snippet.id, user_id)), key,
                     self.sealer.seal(content, sealed_at("content_sealed", snippet.id, user_id)), now, now),
                )
        except apsw.ConstraintError:  # another process took the title between check and insert
            self._conflict(user_id, key, title)
            raise
        return snippet

    def update(self, user_id: str, snippet_id: str, *, title: str | None = None,
               content: str | None = None) -> Snippet:
        """Change the fields given (None: unchanged). ``updated_at`` moves only when a value changes;
        giving neither is ValidationFailed."""
        if title is None and content is None:
            raise ValidationFailed("nothing to update: give title, content or both",
                                   [{"field": "body", "error": "give title, content or both"}])
        self._check(title, content)
        user_id = str(user_id)
        with self.db.transaction() as db:
            current = self.get(user_id, snippet_id)
            new_title = title.strip() if title is not None else current.title
            new_content = content if content is not None else current.content
            if (new_title, new_content) == (current.title, current.content):
                return current
            key = self.title_key(user_id, new_title)
            self._conflict(user_id, key, new_title, except_id=current.id)
            now = self.clock()
            db.execute(
                "UPDATE snippets SET title_sealed = ?, title_key = ?, content_sealed = ?, updated_at = ? WHERE id = ?",
                (self.sealer.seal(new_title, sealed_at("title_sealed", current.id, user_id)), key,
                 self.sealer.seal(new_content, sealed_at("content_sealed", current.id, user_id)), now, current.id),
            )
        return Snippet(current.id, user_id, new_title, new_content, current.created_at, now)

    def delete(self, user_id: str, snippet_id: str) -> None:
        with self.db.transaction() as db:
            self.get(user_id, snippet_id)
            db.execute("DELETE FROM snippets WHERE id = ? AND user_id = ?", (str(snippet_id), str(user_id)))
