"""The ToolSearch query syntax, parsed once and shared by every backend.

A query is either a direct selection (``select:a,b``) or free text: whitespace-separated terms,
where ``+term`` marks a term every result must contain. Parsing never fails: any string is a
valid query (an empty one simply matches nothing).

A ``+`` followed only by digits (``+447700900123``, a phone number in a request) is required
only under the reference rules (backend ``keyword``); every other backend reads it as an
ordinary term, as typed (docs/reference-behaviour.md §2, step 4). The engine picks the rule
from the backend's ``reference_syntax`` capability.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SELECT_PREFIX", "ParsedQuery", "is_number", "parse_query", "parse_select"]

SELECT_PREFIX = "select:"


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
    """Split ``raw`` into lower-cased terms and separate ``+required`` ones.

    ``digits_required=False`` keeps a ``+`` followed only by digits (a phone number) as an
    optional term instead; the default is the reference rule, where it is required.
    """
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
