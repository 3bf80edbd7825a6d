"""Name parsing and term matching of the reference ToolSearch scorer, precomputed once.

The anchor scorer matches a term against a tool's *name parts*, its *full* name text, and its
description and search hint as a *whole word* (``\\b<term>\\b``). :class:`TermIndex` answers each
of those questions for a whole catalogue from inverted indexes built once, so a query costs
dictionary look-ups instead of a regex per tool per term. The same index implements the
``+required`` filter that every backend shares.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from toolsearch.tool import MCP_PREFIX, Tool

__all__ = ["ParsedName", "TermIndex", "parse_tool_name", "whole_word_pattern"]

_CAMEL_BOUNDARY = re.compile(r"([a-z])([A-Z])")
_WORD_RUN = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class ParsedName:
    """A tool name as the reference scorer sees it."""

    parts: tuple[str, ...]
    full: str
    is_mcp: bool


def parse_tool_name(name: str) -> ParsedName:
    """Split a tool name into lower-cased parts.

    ``mcp__slack__send_message`` → parts ``slack, send, message`` (split on ``__`` then ``_``;
    hyphens kept); ``NotebookEdit`` → ``notebook, edit`` (camelCase and ``_`` split).
    """
    if name.startswith(MCP_PREFIX):
        rest = name[len(MCP_PREFIX) :].lower()
        parts = tuple(p for chunk in rest.split("__") for p in chunk.split("_") if p)
        return ParsedName(parts, rest.replace("__", " ").replace("_", " "), True)
    spaced = _CAMEL_BOUNDARY.sub(r"\1 \2", name).replace("_", " ").lower()
    parts = tuple(spaced.split())
    return ParsedName(parts, " ".join(parts), False)


@lru_cache(maxsize=4096)
def whole_word_pattern(term: str) -> re.Pattern[str]:
    """``\\b<term>\\b`` with the term escaped (Unicode word boundaries)."""
    return re.compile(rf"\b{re.escape(term)}\b")


def _is_word(term: str) -> bool:
    return _WORD_RUN.fullmatch(term) is not None


class TermIndex:
    """Inverted indexes over a tool sequence; tool ids are positions in that sequence.

    ``\\bterm\\b`` matches a text exactly when ``term`` (made of word characters only) is one of
    the text's maximal runs of word characters, so whole-word matching of ordinary terms is a
    set look-up; terms with other characters fall back to the compiled pattern.
    """

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.size = len(tools)
        self.parsed: list[ParsedName] = []
        self.descriptions: list[str] = []
        self.hints: list[str] = []
        self._part_ids: dict[str, list[int]] = {}
        self._description_words: dict[str, list[int]] = {}
        self._hint_words: dict[str, list[int]] = {}
        # Tools whose full name is not simply their parts joined by spaces; for every other
        # tool "full contains the term" is implied by "a part contains the term".
        self._irregular_full: list[int] = []
        for tool_id, tool in enumerate(tools):
            parsed = parse_tool_name(tool.name)
            self.parsed.append(parsed)
            description = tool.description.lower()
            hint = (tool.search_hint or "").lower()
            self.descriptions.append(description)
            self.hints.append(hint)
            for part in dict.fromkeys(parsed.parts):
                self._part_ids.setdefault(part, []).append(tool_id)
            _add_words(self._description_words, description, tool_id)
            _add_words(self._hint_words, hint, tool_id)
            if tuple(parsed.full.split()) != parsed.parts or any(
                not _is_word_free_of_space(p) for p in parsed.parts
            ):
                self._irregular_full.append(tool_id)
        self._vocabulary = tuple(self._part_ids)
        self._description_blob, self._description_starts = _joined(self.descriptions, "\x00")
        self._hint_blob, self._hint_starts = _joined(self.hints, "\x00")
        # All parts in one newline-separated string: a substring search is then a few
        # str.find calls in C instead of a Python loop over the vocabulary.
        self._blob, self._starts = _joined(self._vocabulary, "\n")

    def exact_part(self, term: str) -> Sequence[int]:
        """Ids of tools with a name part equal to ``term``."""
        return self._part_ids.get(term, ())

    def substring_part(self, term: str) -> set[int]:
        """Ids of tools with a name part containing ``term`` (equal parts included)."""
        found: set[int] = set()
        for index in _occurrences(self._blob, self._starts, term, "\n"):
            found.update(self._part_ids[self._vocabulary[index]])
        return found

    def full_contains(self, term: str, tool_id: int) -> bool:
        """Whether the tool's full name text contains ``term``."""
        return term in self.parsed[tool_id].full

    @property
    def irregular_full(self) -> Sequence[int]:
        """Tools for which :meth:`full_contains` is not implied by :meth:`substring_part`."""
        return self._irregular_full

    def description_word(self, term: str) -> Iterable[int]:
        """Ids of tools whose lower-cased description matches ``term`` as a whole word."""
        return self._whole_word(
            term, self._description_words, self.descriptions,
            self._description_blob, self._description_starts,
        )  # fmt: skip

    def hint_word(self, term: str) -> Iterable[int]:
        """Ids of tools with a non-empty search hint matching ``term`` as a whole word."""
        return self._whole_word(
            term, self._hint_words, self.hints, self._hint_blob, self._hint_starts
        )

    def _whole_word(
        self,
        term: str,
        words: dict[str, list[int]],
        texts: Sequence[str],
        blob: str,
        starts: list[int],
    ) -> Iterable[int]:
        if _is_word(term):
            return words.get(term, ())
        pattern = whole_word_pattern(term)
        # Only texts that contain the term literally can match it as a whole word.
        return [i for i in _occurrences(blob, starts, term, "\x00") if pattern.search(texts[i])]

    def required_filter(self, required: Sequence[str]) -> set[int]:
        """Ids of tools where every required term is in (or equals) a name part, or matches
        the description or the search hint as a whole word."""
        keep: set[int] | None = None
        for term in dict.fromkeys(required):
            matching = self.substring_part(term)
            matching.update(self.description_word(term))
            matching.update(self.hint_word(term))
            keep = matching if keep is None else keep & matching
            if not keep:
                return set()
        return keep if keep is not None else set(range(self.size))


def _joined(texts: Sequence[str], separator: str) -> tuple[str, list[int]]:
    """``texts`` joined by ``separator``, and where each text starts in the result."""
    starts: list[int] = []
    offset = 0
    for text in texts:
        starts.append(offset)
        offset += len(text) + 1
    return separator.join(texts), starts


def _occurrences(blob: str, starts: list[int], term: str, separator: str) -> list[int]:
    """Indexes of the texts joined in ``blob`` that contain ``term``, ascending, each once."""
    if not term:
        return list(range(len(starts)))
    if separator in term:
        pieces = blob.split(separator) if blob or starts else []
        return [i for i, text in enumerate(pieces) if term in text]
    found: list[int] = []
    position = blob.find(term)
    while position != -1:
        index = bisect_right(starts, position) - 1
        found.append(index)
        if index + 1 >= len(starts):
            break
        position = blob.find(term, starts[index + 1])
    return found


def _is_word_free_of_space(part: str) -> bool:
    return not any(ch.isspace() for ch in part)


def _add_words(index: dict[str, list[int]], text: str, tool_id: int) -> None:
    for word in dict.fromkeys(_WORD_RUN.findall(text)):
        index.setdefault(word, []).append(tool_id)
