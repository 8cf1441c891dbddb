"""Journal before commit: every change a dream makes is written down first, then applied, then marked.

A step plans an operation (what it will change: ids, numbers, never a half-done change) and calls
:meth:`PhaseContext.record`. The entry is committed as ``pending`` before anything changes; the
operation's **applier** (registered per :class:`~assistant.dream.types.Operation` with
:func:`applier`) makes the change from the entry alone; the entry becomes ``applied`` (with an
after-snapshot when ``journal.store_before_after_snapshots``) or ``failed`` (with the error; an
applier that raises must leave nothing half-written: one transaction, or idempotent parts).

Appliers are idempotent: called again with the same entry they finish what is missing and change
nothing twice. That is what makes a crash safe. A restart finds the interrupted session's pending
entries and applies them again (:func:`replay`), then marks the session failed: memories end as if
the operation had run once. ``key`` (per user) makes planning idempotent too: an operation whose key
was already applied (an earlier cycle, or night) is skipped without an entry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from assistant.dream.types import EntryStatus, JournalEntry, Operation

if TYPE_CHECKING:
    from assistant.dream.deps import DreamDeps

log = logging.getLogger("assistant.dream")


@dataclass
class Applied:
    """What an applier did: an after-snapshot, updated details or affected ids (None: unchanged)."""

    after: dict[str, Any] | None = None
    details: dict[str, Any] | None = None
    memories: list[str] | None = None
    nodes: list[str] | None = None
    edges: list[str] | None = None
    count: int = 1  # how many changes the entry stands for (a decay run: the memories it changed)
    extra: dict[str, Any] = field(default_factory=dict)  # anything the step wants back (new ids)


class Applier(Protocol):
    def __call__(self, deps: DreamDeps, entry: JournalEntry) -> Applied: ...


APPLIERS: dict[Operation, Applier] = {}


def applier(operation: Operation) -> Callable[[Applier], Applier]:
    """Register the function that applies journal entries of ``operation``."""

    def register(fn: Applier) -> Applier:
        APPLIERS[operation] = fn
        return fn

    return register


def apply_entry(deps: DreamDeps, entry: JournalEntry, *, snapshots: bool) -> tuple[JournalEntry, Applied | None]:
    """Apply a pending entry with its operation's applier; mark it applied or failed."""
    fn = APPLIERS.get(entry.operation)
    if fn is None:
        return deps.store.finish_entry(entry, EntryStatus.FAILED, error=f"no applier for {entry.operation}"), None
    try:
        result = fn(deps, entry)
    except Exception as exc:  # journaled as failed; the session goes on
        log.exception("dream operation %s failed", entry.operation)
        return deps.store.finish_entry(entry, EntryStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:500]), None
    done = deps.store.finish_entry(
        entry, EntryStatus.APPLIED, after=result.after if snapshots else None, details=result.details,
        memories=result.memories, nodes=result.nodes, edges=result.edges)
    return done, result


def replay(deps: DreamDeps, session_id: str) -> int:
    """Apply again the entries a crash left pending (appliers are idempotent). Returns how many."""
    done = 0
    for entry in deps.store.pending_entries(session_id):
        apply_entry(deps, entry, snapshots=deps.settings.journal.store_before_after_snapshots)
        done += 1
    return done
