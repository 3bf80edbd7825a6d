"""Telling the model which deferred tools exist, by name only (docs/reference-behaviour.md §5).

Two styles:

- **block** — an ``<available-deferred-tools>`` block (sorted names, one a line) prepended to
  every request. Simple, but any change to the pool rewrites the start of the prompt, so the
  provider's prompt cache is lost.
- **delta** (default) — a message persisted in the history that announces the names added and
  removed since what earlier deltas announced. Earlier messages never change, so the cached
  prefix survives while tools come and go. After a compaction boundary nothing counts as
  announced any more, so the next delta re-announces every deferred tool.

*Removed* means announced and no longer in the pool (a server disconnected, a rule changed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolsearch.agent.messages import DELTA_KIND, META_KEY, Message
from toolsearch.agent.state import last_boundary_index

__all__ = [
    "ANNOUNCE_CLOSE",
    "ANNOUNCE_OPEN",
    "REMOVED_CLOSE",
    "REMOVED_OPEN",
    "AnnounceStyle",
    "Delta",
    "announced_names",
    "announcement_block",
    "block_message",
    "compute_delta",
    "delta_message",
]

ANNOUNCE_OPEN = "<available-deferred-tools>"
ANNOUNCE_CLOSE = "</available-deferred-tools>"
REMOVED_OPEN = "<removed-deferred-tools>"
REMOVED_CLOSE = "</removed-deferred-tools>"

AnnounceStyle = Literal["delta", "block"]


def announcement_block(names: Iterable[str]) -> str:
    """The ``<available-deferred-tools>`` block: sorted names, one a line."""
    lines = sorted(set(names))
    return "\n".join([ANNOUNCE_OPEN, *lines, ANNOUNCE_CLOSE])


def block_message(names: Iterable[str]) -> Message:
    """The user message a block-style announcement prepends to a request."""
    return {"role": "user", "content": announcement_block(names)}


@dataclass(frozen=True, slots=True)
class Delta:
    """Names to announce as added and as removed, each sorted."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when nothing changed since the last announcement."""
        return not self.added and not self.removed

    def text(self) -> str:
        """What the model reads: the added names as an announcement block, then the removed."""
        parts: list[str] = []
        if self.added:
            parts.append(announcement_block(self.added))
        if self.removed:
            parts.append("\n".join([REMOVED_OPEN, *self.removed, REMOVED_CLOSE]))
        return "\n".join(parts)


def _delta_meta(message: Mapping[str, Any]) -> tuple[list[str], list[str]] | None:
    meta = message.get(META_KEY)
    if not isinstance(meta, Mapping) or meta.get("kind") != DELTA_KIND:
        return None
    added = meta.get("added", [])
    removed = meta.get("removed", [])
    if not isinstance(added, list) or not isinstance(removed, list):
        return None
    return [str(n) for n in added], [str(n) for n in removed]


def announced_names(messages: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """What the persisted deltas since the last compaction boundary have announced."""
    boundary = last_boundary_index(messages)
    start = 0 if boundary is None else boundary + 1
    announced: set[str] = set()
    for message in messages[start:]:
        delta = _delta_meta(message)
        if delta is not None:
            added, removed = delta
            announced.update(added)
            announced.difference_update(removed)
    return frozenset(announced)


def compute_delta(messages: Sequence[Mapping[str, Any]], deferred: Iterable[str]) -> Delta:
    """The delta that brings the announced set in line with the pool's ``deferred`` names."""
    current = set(deferred)
    announced = announced_names(messages)
    return Delta(tuple(sorted(current - announced)), tuple(sorted(announced - current)))


def delta_message(delta: Delta) -> Message:
    """The user message persisting ``delta`` (its names are kept under ``toolsearch``)."""
    return {
        "role": "user",
        "content": delta.text(),
        META_KEY: {"kind": DELTA_KIND, "added": list(delta.added), "removed": list(delta.removed)},
    }
