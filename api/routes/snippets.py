"""The caller's snippets: list, search, get, resolved view, create, update, delete.

A user never sees, finds or changes another user's snippets: those answer 404. A path id that is
not a UUID is 422 with `details.fields` naming `snippet_id`.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response

from api.deps import CurrentPrincipal, Limit, Offset, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.snippets import ResolvedSnippetOut, SnippetCreate, SnippetList, SnippetOut, SnippetUpdate
from assistant.snippets import MAX_TITLE_CHARS, SnippetPage, SnippetStore

router = APIRouter(prefix="/v1/snippets", tags=["snippets"])

Store = Annotated[SnippetStore, service("snippets", "the snippet store is not configured")]


def page(found: SnippetPage) -> SnippetList:
    return SnippetList(snippets=[SnippetOut.of(s) for s in found.snippets], total=found.total)


@router.get("", response_model=SnippetList, responses=error_responses(*AUTH_ERRORS, 422))
def list_snippets(user: CurrentPrincipal, store: Store, limit: Limit = 100, offset: Offset = 0) -> SnippetList:
    """The caller's snippets ordered by title A→Z (case-insensitive; equal titles by creation
    time), paged by `limit` (default 100, at most 1,000) and `offset` (default 0). `total` counts
    all of the caller's snippets."""
    return page(store.list(str(user.user_id), limit, offset))


@router.get("/search", response_model=SnippetList, responses=error_responses(*AUTH_ERRORS, 422))
def search_snippets(
    user: CurrentPrincipal,
    store: Store,
    q: Annotated[str, Query(min_length=1, max_length=MAX_TITLE_CHARS, description="Text to find in titles.")],
    limit: Limit = 100,
    offset: Offset = 0,
) -> SnippetList:
    """Snippets whose title contains `q`, case-insensitively (runs of whitespace count as one
    space). Order: the exact title first, then titles starting with `q`, then the other matches,
    each group A→Z. `total` counts all matches; `limit`/`offset` as in the list. A missing, empty
    or blank `q` (or one longer than 200 characters) is 422."""
    return page(store.search(str(user.user_id), q, limit, offset))


@router.get("/{snippet_id}", response_model=SnippetOut, responses=error_responses(*AUTH_ERRORS, 404, 422))
def get_snippet(snippet_id: UUID, user: CurrentPrincipal, store: Store) -> SnippetOut:
    return SnippetOut.of(store.get(str(user.user_id), str(snippet_id)))


@router.get("/{snippet_id}/resolved", response_model=ResolvedSnippetOut,
            responses=error_responses(*AUTH_ERRORS, 404, 422))
def resolve_snippet(snippet_id: UUID, user: CurrentPrincipal, store: Store) -> ResolvedSnippetOut:
    """The content with `/snippet <Title>` references expanded recursively among the caller's
    snippets.

    - A reference is `/snippet` at the start of a line or after whitespace, then spaces or tabs,
      then a title: **the longest of the caller's titles** the rest of the line starts with
      (case-insensitively, whitespace runs as one space), ending at the end of the line or before a
      character that is not a letter, digit or `_`: in `Hello /snippet Name!` the title is `Name`
      and the `!` stays. Text after a title may hold more references. When no title matches, the
      rest of the line (trimmed) is the unknown title. `/snippet` right after other characters
      (e.g. in inline code) and lines of fenced code blocks (three or more backticks or tildes)
      are not references.
    - The reference (`/snippet` and its title) is replaced by the referenced snippet's resolved
      content, minus one final line break; the text around it on the line stays.
    - Depth: the snippet itself is depth 0; references are expanded up to depth 10.
    - A reference that is not expanded stays as written, followed by a marker:
      `[snippet not found]`; `[cycle: A → B → A]` when the snippet is already being expanded on
      this path (a snippet referenced twice side by side is not a cycle and is expanded twice);
      `[depth limit 10 reached]`; `[size limit reached]` once 1,000,000 characters of
      snippet text have been copied. Resolution never loops and never fails."""
    return ResolvedSnippetOut.of(store.resolved(str(user.user_id), str(snippet_id)))


@router.post("", status_code=201, response_model=SnippetOut,
             responses=error_responses(400, *AUTH_ERRORS, 409, 413, 422))
def create_snippet(body: SnippetCreate, user: CurrentPrincipal, store: Store) -> SnippetOut:
    """Create a snippet. `title` (required) is trimmed, 1 to 200 characters, one line; `content`
    defaults to empty, at most 50,000 characters. Both are sealed at rest. A title the caller
    already uses (ignoring case) is 409 `CONFLICT`, whose message names it and whose `details`
    give the existing `title` and `snippet_id`; limits broken are 422 with `details.fields`."""
    return SnippetOut.of(store.create(str(user.user_id), body.title, body.content))


@router.put("/{snippet_id}", response_model=SnippetOut,
            responses=error_responses(400, *AUTH_ERRORS, 404, 409, 413, 422))
def update_snippet(snippet_id: UUID, body: SnippetUpdate, user: CurrentPrincipal,
                   store: Store) -> SnippetOut:
    """Change only the fields supplied (`title`, `content`, or both; same limits as creation).
    A body with neither is 422 (field `body`); `null` for a field is 422. `updated_at` moves only
    when a value actually changes: sending the current values returns the snippet unchanged.
    Renaming to a title another of the caller's snippets has is 409 `CONFLICT`; changing only the
    case of the snippet's own title is allowed."""
    return SnippetOut.of(
        store.update(str(user.user_id), str(snippet_id), title=body.title, content=body.content)
    )


@router.delete("/{snippet_id}", status_code=204, response_class=Response,
               responses=error_responses(*AUTH_ERRORS, 404, 422))
def delete_snippet(snippet_id: UUID, user: CurrentPrincipal, store: Store) -> Response:
    """Delete the snippet. References to its title in other snippets then resolve as
    `[snippet not found]`."""
    store.delete(str(user.user_id), str(snippet_id))
    return Response(status_code=204)
