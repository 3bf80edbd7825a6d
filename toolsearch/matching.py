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
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from toolsearch.tool import MCP_PREFIX, Tool

__all__ = ["MAX_CACHED_TERM", "ParsedName", "TermIndex", "parse_tool_name", "whole_word_pattern"]

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


#: Longest term whose compiled pattern is cached; a longer one is compiled each time it is
#: needed (only when a text holds it literally), so the cache stays small whatever is queried.
MAX_CACHED_TERM = 64


@lru_cache(maxsize=4096)
def whole_word_pattern(term: str) -> re.Pattern[str]:
    """``\\b<term>\\b`` with the term escaped (Unicode word boundaries); cached, so only
    for terms of at most :data:`MAX_CACHED_TERM` characters (see :func:`_compile_whole_word`)."""
    return _compile_whole_word(term)


def _compile_whole_word(term: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(term)}\b")


def _pattern(term: str) -> re.Pattern[str]:
    if len(term) <= MAX_CACHED_TERM:
        return whole_word_pattern(term)
    return _compile_whole_word(term)


_NO_NAME = ParsedName((), "", False)


def _is_word(term: str) -> bool:
    return _WORD_RUN.fullmatch(term) is not None


class TermIndex:
    """Inverted indexes over a tool sequence; tool ids are positions in that sequence.

    ``\\bterm\\b`` matches a text exactly when ``term`` (made of word characters only) is one of
    the text's maximal runs of word characters, so whole-word matching of ordinary terms is a
    set look-up. A term with other characters can only match a text that has every word run of
    the term among its own (the term's edges are word boundaries) and holds the term literally,
    so the pattern is compiled, and run, for those texts only: a megabyte term no text holds
    costs a few substring searches (docs/security.md, "Query size").

    The index can change in place (:meth:`add`, :meth:`discard`): the ids of tools built from
    the constructor's sequence are their positions, a later tool takes a free id, and an
    update costs in proportion to the tools it touches (docs/security.md, "Updates").
    """

    def __init__(self, tools: Sequence[Tool] = ()) -> None:
        self.size = 0
        self.tools: list[Tool | None] = []
        self.parsed: list[ParsedName] = []
        self.descriptions: list[str] = []
        self.hints: list[str] = []
        self._free: list[int] = []
        self._part_ids: dict[str, set[int]] = {}
        self._description_words: dict[str, set[int]] = {}
        self._hint_words: dict[str, set[int]] = {}
        # Tools whose full name is not simply their parts joined by spaces; for every other
        # tool "full contains the term" is implied by "a part contains the term".
        self._irregular_full: set[int] = set()
        # Every name part ever indexed, in one newline-separated string: a substring search
        # is then a few str.find calls in C instead of a Python loop over the vocabulary.
        # Parts no tool has any more stay until they are the majority (then it is rebuilt).
        self._vocabulary: list[str] = []
        self._blob = ""
        self._starts: list[int] = []
        self._live_parts = 0
        self.add(tools)

    def add(self, tools: Iterable[Tool]) -> list[int]:
        """Index ``tools``; returns their ids, in order."""
        ids: list[int] = []
        new_parts: list[str] = []
        for tool in tools:
            tool_id = self._free.pop() if self._free else len(self.tools)
            self._store(tool_id, tool)
            parsed = self.parsed[tool_id]
            for part in dict.fromkeys(parsed.parts):
                holders = self._part_ids.get(part)
                if holders is None:
                    holders = self._part_ids[part] = set()
                    new_parts.append(part)
                if not holders:
                    self._live_parts += 1
                holders.add(tool_id)
            _add_words(self._description_words, self.descriptions[tool_id], tool_id)
            _add_words(self._hint_words, self.hints[tool_id], tool_id)
            if tuple(parsed.full.split()) != parsed.parts or any(
                not _is_word_free_of_space(p) for p in parsed.parts
            ):
                self._irregular_full.add(tool_id)
            ids.append(tool_id)
        self.size += len(ids)
        if new_parts:
            self._extend_vocabulary(new_parts)
        return ids

    def discard(self, ids: Iterable[int]) -> None:
        """Drop the tools with these ids (their ids become free)."""
        for tool_id in ids:
            if self.tools[tool_id] is None:
                continue
            for part in dict.fromkeys(self.parsed[tool_id].parts):
                holders = self._part_ids[part]
                holders.discard(tool_id)
                if not holders:
                    self._live_parts -= 1
            _discard_words(self._description_words, self.descriptions[tool_id], tool_id)
            _discard_words(self._hint_words, self.hints[tool_id], tool_id)
            self._irregular_full.discard(tool_id)
            self._store(tool_id, None)
            self._free.append(tool_id)
            self.size -= 1
        if len(self._vocabulary) > 2 * self._live_parts + 1024:
            self._compact_vocabulary()

    def _store(self, tool_id: int, tool: Tool | None) -> None:
        parsed = _NO_NAME if tool is None else parse_tool_name(tool.name)
        description = "" if tool is None else tool.description.lower()
        hint = "" if tool is None else (tool.search_hint or "").lower()
        if tool_id == len(self.tools):
            self.tools.append(tool)
            self.parsed.append(parsed)
            self.descriptions.append(description)
            self.hints.append(hint)
        else:
            self.tools[tool_id] = tool
            self.parsed[tool_id] = parsed
            self.descriptions[tool_id] = description
            self.hints[tool_id] = hint

    def _extend_vocabulary(self, parts: list[str]) -> None:
        offset = len(self._blob) + 1 if self._vocabulary else 0
        added, starts = _joined(parts, "\n")
        self._starts.extend(offset + start for start in starts)
        self._blob = f"{self._blob}\n{added}" if self._vocabulary else added
        self._vocabulary.extend(parts)

    def _compact_vocabulary(self) -> None:
        self._part_ids = {part: ids for part, ids in self._part_ids.items() if ids}
        self._vocabulary = list(self._part_ids)
        self._blob, self._starts = _joined(self._vocabulary, "\n")

    @property
    def ids(self) -> set[int]:
        """Ids of every indexed tool."""
        return {i for i, tool in enumerate(self.tools) if tool is not None}

    def exact_part(self, term: str) -> Collection[int]:
        """Ids of tools with a name part equal to ``term``."""
        return self._part_ids.get(term, ())

    def substring_part(self, term: str) -> set[int]:
        """Ids of tools with a name part containing ``term`` (equal parts included)."""
        found: set[int] = set()
        for index in _occurrences(self._blob, self._starts, term, "\n"):
            found.update(self._part_ids.get(self._vocabulary[index], ()))
        return found

    def full_contains(self, term: str, tool_id: int) -> bool:
        """Whether the tool's full name text contains ``term``."""
        return term in self.parsed[tool_id].full

    @property
    def irregular_full(self) -> Collection[int]:
        """Tools for which :meth:`full_contains` is not implied by :meth:`substring_part`."""
        return self._irregular_full

    def description_word(self, term: str) -> Iterable[int]:
        """Ids of tools whose lower-cased description matches ``term`` as a whole word."""
        return self._whole_word(term, self._description_words, self.descriptions)

    def hint_word(self, term: str) -> Iterable[int]:
        """Ids of tools with a non-empty search hint matching ``term`` as a whole word."""
        return self._whole_word(term, self._hint_words, self.hints)

    def _whole_word(
        self, term: str, words: dict[str, set[int]], texts: Sequence[str]
    ) -> Iterable[int]:
        if _is_word(term):
            return words.get(term, ())
        runs = sorted((words.get(run, set()) for run in set(_WORD_RUN.findall(term))), key=len)
        if runs:
            candidates: Iterable[int] = runs[0].intersection(*runs[1:])
        else:  # no word characters at all: any text might hold it
            candidates = range(len(texts))
        # A whole-word match is a literal occurrence first: the pattern (which costs its
        # length to compile) is made only for texts that hold the term.
        holders = [i for i in candidates if term in texts[i]]
        if not holders:
            return []
        pattern = _pattern(term)
        return [i for i in holders if pattern.search(texts[i])]

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
        return keep if keep is not None else self.ids


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


def _add_words(index: dict[str, set[int]], text: str, tool_id: int) -> None:
    for word in set(_WORD_RUN.findall(text)):
        holders = index.get(word)
        if holders is None:
            index[word] = {tool_id}
        else:
            holders.add(tool_id)


def _discard_words(index: dict[str, set[int]], text: str, tool_id: int) -> None:
    for word in set(_WORD_RUN.findall(text)):
        holders = index.get(word)
        if holders is not None:
            holders.discard(tool_id)
            if not holders:
                del index[word]
