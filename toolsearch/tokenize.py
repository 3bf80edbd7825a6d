"""Tool-aware tokenisation shared by the lexical backends (``bm25``, ``fts5``).

Tool catalogues are full of identifiers — ``mcp__github__create_issue``, ``uber.ride``,
``NotebookEdit``, ``pullNumber`` — that a prose tokeniser keeps as one opaque word, so a query
for "create issue" never meets them. :func:`tokenize` splits them the way people read them and
is applied unchanged to queries, so both sides always agree.

Rules, in order:

1. NFKC normalisation (full-width letters → ASCII, ligatures → letters).
2. Words are maximal runs of letters, digits and combining marks; everything else — spaces,
   punctuation, symbols, ``_``, ``.``, ``-``, ``/`` — separates words. So snake_case, dotted
   (``uber.ride``) and hyphenated names fall apart into their parts.
3. A mixed-case word is split at camelCase boundaries, acronyms kept whole
   (``getHTTPResponse`` → ``get``, ``http``, ``response``), and the whole word is kept as well
   (``github`` from ``GitHub``): queries reach the backends lower-cased, so the compound is what a
   query such as "github" or "notebookedit" can meet. A query is read against a catalogue: a
   mixed-case word of the query whose whole lower-cased form the catalogue knows
   (:func:`query_tokens`'s ``whole``: ``github`` where a server is called ``github``) is that
   word alone. Brand names are written in camel case (GitHub, GitLab, PayPal, HubSpot,
   BigQuery, PostgreSQL), and their parts are other words: "GitHub" read as ``git`` + ``hub``
   named a server called ``git`` in every GitHub request.
4. Scripts written without spaces between words (Han, Hiragana, Katakana, Hangul, Thai, Lao,
   Khmer, Myanmar) have no word boundaries to find, so a run of them becomes its characters plus
   its overlapping character bigrams (``天气预报`` → ``天 气 预 报 天气 气预 预报``): unigrams
   let a one-character query match, bigrams reward the right characters side by side.
5. Everything is case-folded (``Straße`` → ``strasse``).

A tool is read as five fields (:data:`FIELDS`): its MCP *server* (its words without
:data:`GENERIC_SERVER_WORDS`: ``okta-mcp-server`` is ``okta``, see :func:`service_words`); its
*name* parts (the tool part of an ``mcp__server__tool`` name, or the whole name, plus aliases);
its *description*; its *hint* (``search_hint``); and its *params* — property names of
``input_schema``, nested objects, array items and ``anyOf``/``oneOf``/``allOf`` branches
included. :data:`DEFAULT_FIELD_WEIGHTS` says how much each field counts: ``bm25`` repeats a
field's tokens that many times (a name part then counts three times in term frequency and
document length); ``fts5`` passes the same numbers to SQLite's ``bm25()`` as column weights.

Queries are the free-text terms of a :class:`~toolsearch.query.ParsedQuery`
(:func:`query_tokens`), required terms first, repeats kept, at most :data:`MAX_QUERY_TOKENS`.
Nothing here ever raises on text: any string tokenises, possibly to nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import Any

from toolsearch.query import ParsedQuery
from toolsearch.tool import MCP_PREFIX, Tool

__all__ = [
    "DEFAULT_FIELD_WEIGHTS",
    "FIELDS",
    "GENERIC_SERVER_WORDS",
    "MAX_QUERY_TOKENS",
    "QUERY_RULES_VERSION",
    "TOKENIZER_VERSION",
    "SchemaCache",
    "ToolFields",
    "check_field_weights",
    "param_names",
    "query_tokens",
    "service_words",
    "split_tool_name",
    "tokenize",
    "tool_fields",
    "weighted_tokens",
]

#: Bumped whenever a rule above changes, so persistent indexes know to re-tokenise.
TOKENIZER_VERSION = 2
#: Bumped whenever the reading of queries alone changes (tools are tokenised as before, so no
#: index needs rebuilding), so rankings cached by a benchmark know to rerun. 2: a camel-case
#: query word the catalogue knows is read whole (rule 3).
QUERY_RULES_VERSION = 2

#: Words of MCP server names that say how a service is packaged, not which service it is: in
#: the Docker MCP registry's server names (``okta-mcp-server``, ``keboola-mcp``,
#: ``notion-remote``) they are the only words shared by many servers. Nobody asking for Okta
#: says "mcp server", so they are dropped from a tool's server words (lab/retrieval.md).
GENERIC_SERVER_WORDS = frozenset({"mcp", "server", "remote"})

#: The fields of a tool, in the order backends store them.
FIELDS: tuple[str, ...] = ("server", "name", "description", "hint", "params")

#: How much each field counts, measured with ``bm25`` on the public development sets of BFCL
#: and MetaTool: parameter names matter, name parts count three times, and the server weight
#: makes no measurable difference there. No dev set carries search hints, so the hint weight
#: follows the reference scorer, which counts a hint match twice a description match.
DEFAULT_FIELD_WEIGHTS: Mapping[str, int] = {
    "server": 1,
    "name": 3,
    "description": 1,
    "hint": 2,
    "params": 1,
}

#: Longer queries are cut to their first this-many tokens: a query is a request, not a document,
#: and SQLite would otherwise be handed an expression of tens of thousands of phrases.
MAX_QUERY_TOKENS = 1024

# Code points of the scripts that do not separate words with spaces (rule 4).
_SPACELESS = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1100-\u11ff"  # Hangul Jamo
    "\u1780-\u17ff"  # Khmer
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u31ff"  # Bopomofo, Hangul compatibility Jamo, Katakana extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7ff"  # Hangul syllables, Jamo extended B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003134f"  # CJK extensions B-G
)


@cache
def _mark_class() -> str:
    """Combining marks (categories Mn, Mc, Me) as a character-class body.

    Python's ``\\w`` excludes them, which would cut Devanagari, Thai or decomposed Latin words
    at every vowel sign or accent. Built once, on first use (about 0.1 s).
    """
    ranges: list[tuple[int, int]] = []
    codepoints = [*range(0x300, 0x20000), *range(0xE0100, 0xE01F0)]
    for cp in codepoints:
        if unicodedata.category(chr(cp))[0] == "M":
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )


@cache
def _word_pattern() -> re.Pattern[str]:
    marks = _mark_class()
    spaceless = f"[{_SPACELESS}](?:[{_SPACELESS}]|[{marks}])*"
    word = f"(?:[^\\W_{_SPACELESS}]|[{marks}])+"
    return re.compile(f"{spaceless}|{word}")


_SPACELESS_START = re.compile(f"[{_SPACELESS}]")
# The same pattern for ASCII text (most of any catalogue), without the large Unicode classes.
_ASCII_WORD = re.compile("[A-Za-z0-9]+")


def _camel_parts(word: str) -> list[str]:
    """Split a mixed-case word at lower→upper and acronym→word boundaries."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(word)):
        prev, cur = word[i - 1], word[i]
        if cur.isupper() and not prev.isupper():
            if i > start:
                parts.append(word[start:i])
            start = i
        elif cur.islower() and prev.isupper() and i - 1 > start and word[i - 2].isupper():
            parts.append(word[start : i - 1])
            start = i - 1
    parts.append(word[start:])
    return parts


def _spaceless_tokens(run: str) -> list[str]:
    # Marks stay on the character they modify.
    units: list[str] = []
    for c in run:
        if units and unicodedata.category(c)[0] == "M":
            units[-1] += c
        else:
            units.append(c)
    tokens = [u.casefold() for u in units]
    return tokens + [a + b for a, b in pairwise(tokens)]


def _word_tokens(word: str) -> tuple[str, ...]:
    """Tokens of one word as matched by the word pattern (rules 3-5)."""
    if _SPACELESS_START.match(word):
        return tuple(_spaceless_tokens(word))
    if word.islower() or word.isupper() or not any(c.isupper() for c in word[1:]):
        return (word.casefold(),)
    parts = _camel_parts(word)
    head = (word.casefold(),) if len(parts) > 1 else ()
    return head + tuple(part.casefold() for part in parts)


# Catalogues reuse a small vocabulary over and over; remembering each word's tokens makes
# tokenising a large catalogue mostly dictionary look-ups. Bounded: cleared when full.
_WORD_CACHE: dict[str, tuple[str, ...]] = {}
_WORD_CACHE_SIZE = 1 << 17
_WORD_CACHE_MAX_LEN = 64


def tokenize(text: str, *, whole: Container[str] = frozenset()) -> list[str]:
    """Tokens of ``text`` by the module's rules (identifiers split, CJK as uni- and bigrams).

    A mixed-case word whose lower-cased form is in ``whole`` is one token, not split into its
    camel-case parts (rule 3). Never raises; non-string input (a malformed catalogue field)
    tokenises to nothing.
    """
    if not isinstance(text, str) or not text:
        return []
    if text.isascii():
        words = _ASCII_WORD.findall(text)
    else:
        words = _word_pattern().findall(unicodedata.normalize("NFKC", text))
    tokens: list[str] = []
    cache = _WORD_CACHE
    for word in words:
        found = cache.get(word)
        if found is None:
            found = _word_tokens(word)
            if len(word) <= _WORD_CACHE_MAX_LEN:
                if len(cache) >= _WORD_CACHE_SIZE:
                    cache.clear()
                cache[word] = found
        if len(found) > 1 and found[0] in whole and found[0] == word.casefold():
            found = found[:1]  # a camel-case word the reader knows whole (not a CJK run)
        tokens.extend(found)
    return tokens


def split_tool_name(name: str) -> tuple[list[str], list[str]]:
    """``(server tokens, name tokens)`` of a tool name.

    ``mcp__github_eu__create_issue`` → ``(["github", "eu"], ["create", "issue"])``;
    other names have no server part: ``uber.ride`` → ``([], ["uber", "ride"])``.
    """
    if name.startswith(MCP_PREFIX):
        rest = name[len(MCP_PREFIX) :]
        server, sep, tool = rest.partition("__")
        if not sep:
            return tokenize(server), []
        return tokenize(server), tokenize(tool)
    return [], tokenize(name)


def service_words(server: Sequence[str]) -> list[str]:
    """The words of a server name that name its service: all but :data:`GENERIC_SERVER_WORDS`
    (``okta mcp server`` → ``okta``), or all of them when nothing else is left (a server
    called ``mcp-server`` keeps both words)."""
    named = [word for word in server if word not in GENERIC_SERVER_WORDS]
    return named or list(server)


def param_names(schema: object, *, max_depth: int = 8) -> list[str]:
    """Property names of a JSON Schema, depth first, nested objects and arrays included.

    Tolerates anything (non-mapping schemas, odd ``properties`` values) and stops at
    ``max_depth`` levels so a pathological schema cannot recurse forever.
    """
    names: list[str] = []

    def walk(node: object, depth: int) -> None:
        if depth > max_depth or not isinstance(node, Mapping):
            return
        props = node.get("properties")
        if isinstance(props, Mapping):
            for key, value in props.items():
                if isinstance(key, str):
                    names.append(key)
                walk(value, depth + 1)
        items = node.get("items")
        if isinstance(items, list | tuple):
            for item in items:
                walk(item, depth + 1)
        else:
            walk(items, depth + 1)
        for combinator in ("anyOf", "oneOf", "allOf"):
            branches = node.get(combinator)
            if isinstance(branches, list | tuple):
                for branch in branches:
                    walk(branch, depth + 1)
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            walk(extra, depth + 1)

    walk(schema, 0)
    return names


@dataclass(frozen=True, slots=True)
class ToolFields:
    """The tokens of one tool, field by field (see :data:`FIELDS`)."""

    server: tuple[str, ...]
    name: tuple[str, ...]
    description: tuple[str, ...]
    hint: tuple[str, ...]
    params: tuple[str, ...]

    def field(self, field: str) -> tuple[str, ...]:
        """The tokens of the field called ``field``."""
        value: tuple[str, ...] = getattr(self, field)
        return value

    def column_text(self) -> dict[str, str]:
        """Each field's tokens joined by single spaces: per-column text for a full-text engine
        whose own tokeniser then only needs to split on spaces."""
        return {field: " ".join(self.field(field)) for field in FIELDS}


_SCHEMA_CACHE_LIMIT = 4096


SchemaCache = dict[int, tuple[Any, tuple[str, ...]]]


def tool_fields(tool: Tool, *, schema_cache: SchemaCache | None = None) -> ToolFields:
    """Tokenise ``tool`` into its five fields.

    The server comes from the ``mcp__server__`` name (what the model sees), else from
    ``tool.server``. Pass the same empty ``schema_cache`` dict to every call of one index build
    to tokenise a schema object shared by many tools only once.
    """
    server, name = split_tool_name(tool.name)
    if not server and tool.server:
        server = tokenize(tool.server)
    server = service_words(server)
    for alias in tool.aliases:
        name.extend(split_tool_name(alias)[1] if isinstance(alias, str) else [])
    params = _param_tokens(tool.input_schema, schema_cache)
    return ToolFields(
        server=tuple(server),
        name=tuple(name),
        description=tuple(tokenize(tool.description)),
        hint=tuple(tokenize(tool.search_hint or "")),
        params=params,
    )


def _param_tokens(schema: object, cache: SchemaCache | None) -> tuple[str, ...]:
    # Scaled catalogues share one schema object between many tools; a cache keyed by identity
    # (holding the object, so the id cannot be reused) tokenises each schema once per build.
    if cache is not None:
        found = cache.get(id(schema))
        if found is not None and found[0] is schema:
            return found[1]
    tokens = tuple(token for key in param_names(schema) for token in tokenize(key))
    if cache is not None and len(cache) < _SCHEMA_CACHE_LIMIT:
        cache[id(schema)] = (schema, tokens)
    return tokens


def check_field_weights(weights: Mapping[str, float] | None, *, integer: bool) -> dict[str, float]:
    """Validated field weights: :data:`DEFAULT_FIELD_WEIGHTS` updated by ``weights``.

    Raises :class:`~toolsearch.errors.ConfigError` naming an unknown field or a bad value.
    """
    from toolsearch.errors import ConfigError

    merged: dict[str, float] = dict(DEFAULT_FIELD_WEIGHTS)
    if weights is None:
        return merged
    if not isinstance(weights, Mapping):
        raise ConfigError(f"field_weights must be a mapping of field to weight, got {weights!r}")
    for field, value in weights.items():
        if field not in FIELDS:
            raise ConfigError(
                f"unknown field {field!r} in field_weights; fields: {', '.join(FIELDS)}"
            )
        kind = "a non-negative integer" if integer else "a non-negative number"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"field_weights[{field!r}] must be {kind}, got {value!r}")
        if integer and not float(value).is_integer():
            raise ConfigError(f"field_weights[{field!r}] must be {kind}, got {value!r}")
        if not value >= 0 or value == float("inf"):
            raise ConfigError(f"field_weights[{field!r}] must be {kind}, got {value!r}")
        merged[field] = int(value) if integer else float(value)
    if not any(merged.values()):
        raise ConfigError(f"field_weights must give at least one field a weight > 0: {merged}")
    return merged


def weighted_tokens(fields: ToolFields, weights: Mapping[str, float]) -> list[str]:
    """One bag of tokens for a tool: each field's tokens repeated ``weights[field]`` times
    (integer weights; BM25 over the bag then weighs term frequency and length alike)."""
    bag: list[str] = []
    for field in FIELDS:
        tokens = fields.field(field)
        bag.extend(tokens * int(weights.get(field, 0)))
    return bag


def query_tokens(
    query: ParsedQuery, *, limit: int = MAX_QUERY_TOKENS, whole: Container[str] = frozenset()
) -> list[str]:
    """The tokens a lexical backend scores for ``query``: its scoring terms (required first,
    repeats kept) through :func:`tokenize`, cut to ``limit`` tokens.

    ``whole`` holds the words the catalogue searched knows (its vocabulary): a mixed-case query
    word found there is read as that word alone (``GitHub`` → ``github``, not ``git`` and
    ``hub``), one it does not know by its parts as well (``createIssue`` → ``createissue``,
    ``create``, ``issue``).

    :attr:`ParsedQuery.terms` are lower-cased; when the raw text lines up with them word for
    word, the original spelling is tokenised instead so a camelCase query term
    (``createIssue``) is split exactly as the same word in a description.
    """
    # No token spans whitespace, so tokenising the joined terms equals joining their tokens.
    tokens = tokenize(" ".join(_cased_scoring_terms(query)), whole=whole)
    return tokens[:limit] if len(tokens) > limit else tokens


def _cased_scoring_terms(query: ParsedQuery) -> Sequence[str]:
    raw = query.raw.split() if isinstance(query.raw, str) else []
    if len(raw) != len(query.terms) or [word.lower() for word in raw] != list(query.terms):
        return query.scoring_terms
    if not query.required:
        return raw
    required = [word[1:] for word in raw if word.startswith("+") and len(word) > 1]
    optional = [word for word in raw if not (word.startswith("+") and len(word) > 1)]
    return required + optional
