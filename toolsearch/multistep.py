"""Multi-step requests: split a task into its steps, rank each step, merge the rankings.

"Read Jira issue OPS-200 and create a matching Linear issue" needs two tools, and one search
for the whole sentence tends to return five Jira tools. Per-step retrieval (as in MCP-Zero and
the per-step retrieval studies of multi-tool agents) searches each step on its own and merges
the rankings, so every step's best tool reaches the first few results.

:func:`split_steps` cuts a request at sentence ends, semicolons, line breaks, list markers
("1.", "2)", "-", "Step 3:"; dropped, so a numbered list's markers never count as steps),
"then", "after that", and at "and" between two clauses of at least :data:`MIN_CLAUSE_WORDS`
words each (not at bare commas, which mostly separate adjectives and list items of one
request); a request shorter than :data:`MIN_SPLIT_WORDS` words, or with no such boundary, is
one step (short queries are never changed). :func:`merge_steps` keeps the steps that are at
least as *confident* as the whole request (their best raw similarity is no lower: a step that
finds nothing better than the whole request is an elaboration, not a new need), then puts the
whole request's first :data:`LEAD` hits first and interleaves the rest of it with the kept
steps' rankings round-robin (:func:`merge_round_robin`), each tool once. The same merge,
ungated, serves callers that pass several queries at once (:meth:`ToolSearch.search_many`).
Measurements: ``lab/retrieval.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from toolsearch.backend import Hit

__all__ = [
    "LEAD",
    "MIN_CLAUSE_WORDS",
    "MIN_SPLIT_WORDS",
    "Ranking",
    "merge_matches",
    "merge_round_robin",
    "merge_steps",
    "search_steps",
    "split_steps",
]

#: Requests shorter than this many words are never split.
MIN_SPLIT_WORDS = 8
#: Each side of an "and" must have this many words for the "and" to separate two steps.
MIN_CLAUSE_WORDS = 3
#: At most this many steps are searched (a pasted document is not a task list).
MAX_STEPS = 6
#: The whole request's best hits that stay first when steps are merged in.
LEAD = 1

#: A sentence end matches only where a run of ``.!?;`` starts (the look-behind) and takes the
#: run whole (possessive ``++``): tried at every dot of a long run, it would rescan the rest of
#: the run from each one, which is quadratic in its length.
_HARD = re.compile(
    r"(?:(?<![.!?;])[.!?;]++\s+|\s*\n+\s*|,?\s+(?:and\s+)?then\s+|,?\s+(?:and\s+)?after\s+that\s+)",
    re.I,
)
#: A list marker ("1.", "2)", "(3)", "-", "*", "•", "Step 4:") at the start of the text or of a
#: line, or after a sentence end or a colon: it starts a step and is no part of it.
_MARKER = re.compile(
    r"(^|\n|[.:;!?](?=\s))\s*(?:[-*•]|\(?\d{1,2}[.)]|step\s+\d{1,2}\s*[:.)-]?)\s+", re.I
)
#: Runs of blanks, and of blank lines, become one space and one line break before splitting:
#: a boundary pattern that starts and ends with whitespace then never meets a long run, which
#: would make matching quadratic in its length.
_BLANKS = re.compile(r"[^\S\n]+")
_BREAKS = re.compile(r" ?\n\s*")
_AND = re.compile(r",?\s+(?:and|&)\s+", re.I)


def _words(text: str) -> int:
    return len(text.split())


def _split_and(clause: str) -> list[str]:
    """Cut a clause at "and" where both neighbours are clauses of their own."""
    parts = [p.strip() for p in _AND.split(clause) if p.strip()]
    # Parts are gathered in lists and joined once: growing a string part by part would copy it
    # once per "and", quadratic in a clause of thousands of short parts.
    groups: list[list[str]] = []
    last_words = 0
    for part in parts:
        words = _words(part)
        if groups and (words < MIN_CLAUSE_WORDS or last_words < MIN_CLAUSE_WORDS):
            groups[-1].append(part)
            last_words += words + 1  # the joining "and" is a word of the step too
        else:
            groups.append([part])
            last_words = words
    return [" and ".join(group) for group in groups]


def split_steps(text: str) -> list[str]:
    """The steps of a request, in order; ``[text]`` when it is short or a single step."""
    if not isinstance(text, str) or _words(text) < MIN_SPLIT_WORDS:
        return [text]
    steps: list[str] = []
    tidy = _BREAKS.sub("\n", _BLANKS.sub(" ", text))
    for clause in _HARD.split(_MARKER.sub("\\1\n", tidy)):
        clause = clause.strip(" .,:;!?")
        if any(ch.isalpha() for ch in clause):
            steps.extend(_split_and(clause))
    steps = [s for s in steps if s.strip()]
    if len(steps) < 2:
        return [text]
    return steps[:MAX_STEPS]


def merge_round_robin(rankings: Sequence[Sequence[Hit]], k: int, *, lead: int = 0) -> list[Hit]:
    """Interleave ``rankings`` (the first one leads each round; its first ``lead`` hits come
    before all of that), each tool once, at most ``k`` hits, with scores ``top · (n - i) / n``
    (``top`` = the best score of all the rankings, ``n`` = the number of merged hits) so the
    order survives any re-sort by score."""
    order = list(dict.fromkeys(hit.name for hit in rankings[0][:lead])) if rankings else []
    seen = set(order)
    rounds = [rankings[0][lead:], *rankings[1:]] if rankings else []
    depth = max((len(r) for r in rounds), default=0)
    for position in range(depth):
        for ranking in rounds:
            if position < len(ranking) and ranking[position].name not in seen:
                seen.add(ranking[position].name)
                order.append(ranking[position].name)
    order = order[: max(k, 0)]
    top = max((r[0].score for r in rankings if r), default=1.0)
    n = len(order)
    return [Hit(name, round(top * (n - i) / n, 12)) for i, name in enumerate(order)]


class Ranking:
    """One search's hits and how sure it is: the best raw similarity of the backend's
    confidence signal (the hybrid's leading member), comparable across queries.

    ``hits`` may be a function computing them: :func:`merge_steps` reads the hits of the steps
    it keeps only, so a backend that knows a step's confidence early (the hybrid, from its
    leading member) skips the rest of the work for steps that are dropped.
    """

    def __init__(self, hits: list[Hit] | Callable[[], list[Hit]], confidence: float) -> None:
        self._hits = hits
        self.confidence = confidence

    @property
    def hits(self) -> list[Hit]:
        if callable(self._hits):
            self._hits = self._hits()
        return self._hits


def merge_steps(whole: Ranking, steps: Sequence[Ranking], k: int, *, lead: int = LEAD) -> list[Hit]:
    """The whole request's ranking merged with the steps at least as confident as it (see the
    module); the whole ranking alone, cut to ``k``, when no step is. Only the whole ranking's
    first ``k + lead`` hits and each step's first ``k`` can reach the result, so a caller may
    rank no deeper."""
    kept = [step.hits for step in steps if step.confidence >= whole.confidence]
    if not kept:
        return whole.hits[: max(k, 0)]
    return merge_round_robin([whole.hits, *kept], k, lead=lead)


def search_steps(
    search: Callable[[str, int], Ranking],
    text: str,
    k: int,
    *,
    depth: int,
    whole: Ranking | None = None,
) -> list[Hit]:
    """``search(text, k)`` for a one-step request; for several steps, the whole request's and
    each step's ``depth`` best merged by :func:`merge_steps` (at most ``k``). ``whole`` is the
    whole request's ranking when the caller has it already."""
    steps = split_steps(text)
    if len(steps) < 2:
        return (whole or search(text, k)).hits[: max(k, 0)]
    first = whole or search(text, depth)
    return merge_steps(first, [search(step, depth) for step in steps], k)


def merge_matches(results: Sequence[Sequence[Any]], k: int) -> list[Any]:
    """Round-robin merge of several calls' matches (first call first), each tool once, at most
    ``k``: what :meth:`toolsearch.engine.ToolSearch.search_many` returns."""
    seen: set[str] = set()
    merged: list[Any] = []
    depth = max((len(r) for r in results), default=0)
    for position in range(depth):
        for matches in results:
            if position < len(matches) and matches[position].name not in seen:
                seen.add(matches[position].name)
                merged.append(matches[position])
    return merged[: max(k, 0)]
