"""The ToolSearch query syntax, parsed once and shared by every backend.

A query is either a direct selection (``select:a,b``) or free text: whitespace-separated terms,
where ``+term`` marks a term every result must contain. Parsing never fails: any string is a
valid query (an empty one simply matches nothing).

A query is a request, not a document: only its first :data:`MAX_QUERY_CHARS` characters are
read (:func:`cut_query`), before any other work, by every path that takes one — the engine's
dispatch, every backend through :func:`parse_query`, the gateway and the agent loop through the
engine — so a 4 MiB request costs one slice, whatever backend answers it (docs/security.md,
"Query size").

A ``+`` followed only by digits (``+447700900123``, a phone number in a request) is required
only under the reference rules (backend ``keyword``); every other backend reads it as an
ordinary term, as typed (docs/reference-behaviour.md §2, step 4). The engine picks the rule
from the backend's ``reference_syntax`` capability.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "MAX_QUERY_CHARS",
    "SELECT_PREFIX",
    "ParsedQuery",
    "cut_query",
    "is_number",
    "parse_query",
    "parse_select",
]

SELECT_PREFIX = "select:"
#: Characters of a query that are read; the rest is dropped before any work. 32 times the
#: 500 characters of a BM25 query to Anthropic's own tool search, and far above the first
#: :data:`toolsearch.tokenize.MAX_QUERY_TOKENS` terms of any written request.
MAX_QUERY_CHARS = 16_384


def cut_query(raw: str) -> str:
    """The part of ``raw`` that is read: all of it up to :data:`MAX_QUERY_CHARS` characters;
    past that, the first ``MAX_QUERY_CHARS`` less a word the cut would split in two."""
    if len(raw) <= MAX_QUERY_CHARS:
        return raw
    head = raw[:MAX_QUERY_CHARS]
    if raw[MAX_QUERY_CHARS].isspace() or head[-1].isspace():  # the cut splits no word
        return head
    words = head.rsplit(None, 1)
    return words[0] if len(words) > 1 else head


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    """A free-text query split into terms.

    ``terms`` are the lower-cased whitespace-separated words in query order; a term ``+x``
    (longer than one character) puts ``x`` in ``required``, every other term is ``optional``.
    ``scoring_terms`` is what rankers score: the required terms, then the optional ones (with no
    required term, simply ``terms``), repeats kept — the reference scorer's order.
    """

    raw: str
    terms: tuple[str, ...]
    required: tuple[str, ...]
    optional: tuple[str, ...]

    @property
    def scoring_terms(self) -> tuple[str, ...]:
        """Terms a ranker scores, required first; a repeated word counts each time."""
        if self.required:
            return self.required + self.optional
        return self.terms

    @property
    def text(self) -> str:
        """The scoring terms as one lower-cased string, for rankers that read prose."""
        return " ".join(self.scoring_terms)

    @property
    def is_empty(self) -> bool:
        """True when the query has no term at all (empty or whitespace only)."""
        return not self.terms


def parse_query(raw: str, *, digits_required: bool = True) -> ParsedQuery:
    """Split ``raw`` (its first :data:`MAX_QUERY_CHARS`) into lower-cased terms and separate
    ``+required`` ones.

    ``digits_required=False`` keeps a ``+`` followed only by digits (a phone number) as an
    optional term instead; the default is the reference rule, where it is required.
    """
    raw = cut_query(raw)
    terms = tuple(raw.lower().split())
    required: list[str] = []
    optional: list[str] = []
    for term in terms:
        if term.startswith("+") and len(term) > 1 and (digits_required or not is_number(term)):
            required.append(term[1:])
        else:
            optional.append(term)
    return ParsedQuery(raw=raw, terms=terms, required=tuple(required), optional=tuple(optional))


def is_number(term: str) -> bool:
    """Whether ``term`` is a ``+`` and digits only (``+447700900123``, ``+1``)."""
    return term[:1] == "+" and term[1:].isdecimal()


def parse_select(raw: str) -> list[str] | None:
    """The names of a ``select:`` query (prefix case-insensitive), or None for other queries.

    Names are split on commas, trimmed, empties dropped; their case is kept because selection
    resolves names exactly.
    """
    if raw[: len(SELECT_PREFIX)].lower() != SELECT_PREFIX:
        return None
    rest = raw[len(SELECT_PREFIX) :]
    return [name.strip() for name in rest.split(",") if name.strip()]
