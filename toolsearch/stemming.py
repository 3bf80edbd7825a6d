"""Stop-words and Snowball stemming for the lexical backends (optional, off unless asked for).

Requests are prose ("Can I find a hotel near the airport?") while tool texts are terse, so the
function words of a request match every description that uses them and the inflections of a
content word ("bookings", "booked", "book") match nothing. :class:`TermNormaliser` drops
:data:`STOPWORDS` and reduces words to their Snowball (Porter 2) stem with PyStemmer, applied
alike to tool tokens and query tokens so both sides agree. On the public dev sets this lifts
``bm25`` clearly on MetaTool and BFCL (figures in ``lab/retrieval.md``).

The stop-words are function words only (articles, pronouns, auxiliaries, prepositions,
politeness): never a verb or noun a tool name could be made of, so "get", "list", "find",
"show" and "set" stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from toolsearch.errors import MissingExtraError

__all__ = ["STOPWORDS", "TermNormaliser"]

#: Function words dropped by ``stopwords=True``.
STOPWORDS: frozenset[str] = frozenset(
    " ".join(
        (
            "a an the and or but if so than then that this these those there here",
            "i me my mine myself we us our ours you your yours he him his she her it its they",
            "them their what which who whom whose when where why how",
            "am is are was were be been being do does did doing have has had having",
            "can could would should shall will might must may",
            "of for to in on at by with from into about as through",
            "please want wanna need like let lets also just any some all",
            "s t d ll m re ve",
        )
    ).split()
)


@lru_cache(maxsize=4)
def _stemmer(language: str) -> Any:
    try:
        import Stemmer
    except ImportError as exc:
        raise MissingExtraError("bm25", "bm25", ["PyStemmer"]) from exc
    return Stemmer.Stemmer(language)


class TermNormaliser:
    """Drops stop-words and/or stems tokens; the identity when both are off."""

    def __init__(self, *, stem: bool = False, stopwords: bool = False) -> None:
        self.stem = bool(stem)
        self.stopwords = bool(stopwords)
        self._stemmer = _stemmer("english") if self.stem else None

    @property
    def active(self) -> bool:
        """Whether it changes anything."""
        return self.stem or self.stopwords

    def __call__(self, tokens: Sequence[str]) -> list[str]:
        kept = [t for t in tokens if t not in STOPWORDS] if self.stopwords else list(tokens)
        if self._stemmer is None:
            return kept
        stems: list[str] = self._stemmer.stemWords(kept)
        return stems
