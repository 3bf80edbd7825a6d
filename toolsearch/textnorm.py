"""Content words of a text, for checking what a query shares with a tool's wording.

A dataset's ``hard`` queries promise no shared content word with their gold tools, and a
dataset must not hold the same request twice; both checks need one notion of "the words that
carry meaning". Here that is: the tokens of :func:`toolsearch.tokenize.tokenize` (identifiers
split, case folded), minus :data:`STOP_WORDS`, minus numbers and one-letter tokens, each reduced
to its English Snowball stem (PyStemmer, in the ``dev`` extra), so "refunds", "refunding" and
"refund" are one word. The rules are documented in ``datasets/mcp-workbench/README.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from toolsearch.tokenize import split_tool_name, tokenize
from toolsearch.tool import Tool

__all__ = [
    "STOP_WORDS",
    "content_words",
    "near_duplicates",
    "normalised_text",
    "shared_words",
    "tool_words",
    "word_overlap",
]

#: Function words that carry no request of their own: articles, pronouns, prepositions,
#: conjunctions, auxiliary and modal verbs, politeness and filler words, and the pieces
#: contractions split into ("we're" → "we", "re"). Verbs and nouns that name an action or a
#: thing ("send", "list", "file") are content words and are never listed here.
_STOP_LIST = """
    a an the this that these those some any each every all both either neither no not nor
    i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves one ones
    who whom whose which what whatever whoever when whenever where wherever why how
    am is are was were be been being have has had having do does did
    will would shall should can could may might must ought
    and or but if then else so than too very just only also even still yet already
    of in on at to for from by with without about into onto out over under up down off
    above below between through during before after again further once here there
    as such own same other another more most less least few many much lot lots
    s t d ll m re ve don didn doesn isn aren wasn weren wouldn shouldn couldn
    please pls thanks thank ok okay hey hi hello yes yeah
    let lets via per etc eg ie
    """
STOP_WORDS: frozenset[str] = frozenset(_STOP_LIST.split())


@cache
def _stemmer() -> Any:
    import Stemmer  # PyStemmer, the Snowball stemmers

    return Stemmer.Stemmer("english")


def content_words(text: str) -> frozenset[str]:
    """The stemmed content words of ``text`` (stop words, numbers and single letters dropped)."""
    kept = [
        token
        for token in tokenize(text)
        if len(token) > 1 and not token.isdigit() and token not in STOP_WORDS
    ]
    stems: list[str] = _stemmer().stemWords(kept)
    return frozenset(stems)


def tool_words(tool: Tool) -> frozenset[str]:
    """Content words of a tool's server name, name words and description."""
    server, name = split_tool_name(tool.name)
    return content_words(" ".join([*server, *name, tool.description]))


def shared_words(text: str, tools: Iterable[Tool]) -> frozenset[str]:
    """The content words ``text`` shares with any of ``tools``' server, name or description."""
    wording: set[str] = set()
    for tool in tools:
        wording |= tool_words(tool)
    return content_words(text) & wording


def normalised_text(text: str) -> str:
    """``text`` as its case-folded tokens joined by one space: punctuation and case ignored."""
    return " ".join(tokenize(text))


def _jaccard(first: frozenset[str], second: frozenset[str]) -> float:
    union = first | second
    return len(first & second) / len(union) if union else 1.0


def word_overlap(first: str, second: str) -> float:
    """Jaccard overlap of two texts' content words, 0..1 (1 when both have none)."""
    return _jaccard(content_words(first), content_words(second))


def near_duplicates(texts: Sequence[str], threshold: float) -> list[tuple[int, int, float]]:
    """Index pairs ``(i, j, overlap)``, ``i < j``, of texts whose :func:`word_overlap` is at
    least ``threshold``, most alike first."""
    words = [content_words(text) for text in texts]
    found: list[tuple[int, int, float]] = []
    for i, words_a in enumerate(words):
        for j in range(i + 1, len(words)):
            overlap = _jaccard(words_a, words[j])
            if overlap >= threshold:
                found.append((i, j, overlap))
    return sorted(found, key=lambda pair: -pair[2])
