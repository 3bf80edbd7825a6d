"""PostgreSQL full-text values for the ``postgres`` backend: a weighted ``tsvector`` per tool and
a ``tsquery`` per query, both written as literals from :mod:`toolsearch.tokenize` tokens.

PostgreSQL's own parsers and dictionaries are bypassed on purpose: the tool and the query are
tokenised by the project's tokeniser (identifiers split, CJK as uni- and bigrams, case-folded),
exactly as for ``bm25`` and ``fts5``, and each token becomes one lexeme. The weight labels are
fixed (see :data:`FIELD_LABELS`): name parts ``A``, search hint ``B``, description and server
``C``, parameter names ``D``; how much each label counts is a ranking parameter
(:data:`RANK_WEIGHTS`), not part of the stored value, so it can change without rewriting rows.

A query is the OR of its tokens, each a quoted lexeme; optionally without the function words
of :data:`toolsearch.stemming.STOPWORDS` (unless it has nothing else), which makes far fewer
tools rows to rank (docs/postgres.md, "How it ranks"). Tokens contain only letters, digits and
combining marks, so nothing typed by a user can become an operator (``&``, ``|``, ``!``,
``<->``, ``:*``, parentheses) or a weight label; quotes and backslashes are still doubled, so
the literal stays valid whatever a future tokeniser lets through. The literal is passed as a
bound parameter and cast with ``::tsquery``, so it is never part of the SQL text either.

Limits PostgreSQL puts on these types are kept here: lexemes of at most 2,046 bytes (a longer
token can match nothing and is dropped on both sides), positions 1..16,383, 255 positions per
lexeme.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from toolsearch.query import ParsedQuery
from toolsearch.stemming import STOPWORDS
from toolsearch.tokenize import ToolFields, query_tokens

__all__ = [
    "FIELD_LABELS",
    "RANK_FUNCTIONS",
    "RANK_WEIGHTS",
    "candidate_query",
    "document_literal",
    "lexemes",
    "query_lexemes",
    "query_literal",
    "tsquery_of",
]

#: The weight label of each field of :data:`toolsearch.tokenize.FIELDS`.
FIELD_LABELS: dict[str, str] = {
    "name": "A",
    "hint": "B",
    "description": "C",
    "server": "C",
    "params": "D",
}

#: Multipliers of the labels D, C, B, A (the order ``ts_rank`` reads its weight array in):
#: the project's field weights (name 3, hint 2, description/server/params 1) scaled to A = 1.
#: Measured against PostgreSQL's default {0.1, 0.2, 0.4, 1.0}: see docs/postgres.md.
RANK_WEIGHTS: tuple[float, float, float, float] = (1 / 3, 1 / 3, 2 / 3, 1.0)

#: The ranking functions a backend may use (PostgreSQL's two).
RANK_FUNCTIONS: tuple[str, ...] = ("ts_rank", "ts_rank_cd")

_MAX_LEXEME_BYTES = 2046
_MAX_POSITION = 16383
_MAX_POSITIONS_PER_LEXEME = 255


def _quoted(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def lexemes(tokens: Iterable[str]) -> list[str]:
    """``tokens`` that PostgreSQL can hold as lexemes: no NUL, valid UTF-8, short enough."""
    kept = []
    for token in tokens:
        clean = token.replace("\x00", "")
        if not clean.isascii():
            clean = clean.encode("utf-8", "ignore").decode("utf-8")
        if clean and len(clean.encode("utf-8")) <= _MAX_LEXEME_BYTES:
            kept.append(clean)
    return kept


def document_literal(fields: ToolFields) -> str:
    """The ``tsvector`` literal of one tool: every token at its position, labelled by field.

    Positions run through the fields in :data:`FIELD_LABELS` order, so a name part and a
    description word never share one; a lexeme keeps its first 255 positions.
    """
    positions: dict[str, list[str]] = {}
    position = 0
    for field, label in FIELD_LABELS.items():
        for token in lexemes(fields.field(field)):
            position = min(position + 1, _MAX_POSITION)
            found = positions.setdefault(token, [])
            if len(found) < _MAX_POSITIONS_PER_LEXEME:
                found.append(f"{position}{label}")
    return " ".join(f"{_quoted(token)}:{','.join(marks)}" for token, marks in positions.items())


def query_literal(query: ParsedQuery, *, stopwords: bool = False) -> str:
    """The ``tsquery`` literal of ``query``: its distinct tokens, each quoted, joined by ``|``
    (empty when it has no token PostgreSQL could match); with ``stopwords``, function words
    are left out unless the query has no other token."""
    return tsquery_of(query_lexemes(query, stopwords=stopwords))


def query_lexemes(query: ParsedQuery, *, stopwords: bool = False) -> list[str]:
    """The distinct lexemes of ``query`` (first-seen order) that :func:`query_literal` ORs."""
    tokens = query_tokens(query)
    if stopwords:
        tokens = [t for t in tokens if t not in STOPWORDS] or tokens
    return list(dict.fromkeys(lexemes(tokens)))


def tsquery_of(tokens: Sequence[str]) -> str:
    """``tokens`` as one OR query of quoted lexemes (duplicates once, first-seen order)."""
    return " | ".join(_quoted(token) for token in dict.fromkeys(lexemes(tokens)))


def candidate_query(
    lexemes_: Sequence[str], frequency: Callable[[str], float], rows: float, budget: int
) -> str:
    """The ``tsquery`` literal of the rows the full-text ranking scores: those matching the
    query's rarest lexemes, taken rarest first as long as the rows they match (``frequency``
    of a lexeme, a fraction of ``rows``) stay within ``budget``; every lexeme when ``rows``
    is within the budget. When even the rarest one matches more rows than the budget, the
    rows holding it in a name or search hint (labels A and B, which ``ts_rank`` weighs
    highest) are the candidates.

    A row matching only the frequent lexemes (``the``, ``get``, ``list`` in a large
    catalogue) is never scored: ``ts_rank`` has no inverse document frequency, and scoring
    every row that holds a frequent word was the cost of a search (docs/postgres.md, "Full
    text at scale"). The frequent lexemes still count in the score of every candidate."""
    if rows <= budget or not lexemes_:
        return tsquery_of(lexemes_)
    chosen: set[str] = set()
    matched = 0.0
    for lexeme in sorted(lexemes_, key=lambda item: (frequency(item), item)):
        expected = frequency(lexeme) * rows
        if chosen and matched + expected > budget:
            break
        chosen.add(lexeme)
        matched += expected
    if matched > budget:
        return f"{tsquery_of(sorted(chosen))}:AB"
    return tsquery_of([lexeme for lexeme in lexemes_ if lexeme in chosen])
