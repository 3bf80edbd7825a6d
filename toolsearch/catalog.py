"""Loading tool catalogues: JSONL, JSON arrays, MCP ``tools/list`` results, dataset folders.

Loading is all or nothing: the first invalid record raises :class:`CatalogError` naming the
file, the line (or array item) and the field, and no partial catalogue is returned. JSON is read
strictly (docs/security.md, "Files and catalogues"): duplicate keys, ``NaN``/``Infinity``,
out-of-range numbers and nesting deeper than :data:`MAX_DEPTH` are errors, never guesses, and
so is a lone surrogate (``"\\udfff"``: valid JSON, not Unicode text) anywhere in a record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from toolsearch.errors import CatalogError
from toolsearch.tool import (
    MAX_JSON_DEPTH,
    MCP_PREFIX,
    SURROGATE_HINT,
    Tool,
    comes_from_mcp,
    json_depth,
    lone_surrogate,
    mcp_tool_name,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_INTEGER_DIGITS",
    "catalogue_defers",
    "catalogue_file",
    "decode_json",
    "load_catalog",
    "load_nonempty_catalog",
    "parse_jsonl",
    "tool_from_dict",
    "tools_from_mcp_result",
]

#: Deepest nesting of objects and arrays a tool record may have (see ``tool.MAX_JSON_DEPTH``).
MAX_DEPTH = MAX_JSON_DEPTH
#: Longest integer literal accepted (digits); anything longer is a corrupt or hostile file.
MAX_INTEGER_DIGITS = 100

_SCHEMA_KEYS = ("input_schema", "inputSchema", "parameters")
_SERVER_CANNOT_SET = ("aliases", "is_mcp", "mcp_name")
_HINT_KEYS = ("search_hint", "searchHint")
_ALWAYS_KEYS = ("always_load", "alwaysLoad")
_KNOWN = {
    "name",
    "description",
    *_SCHEMA_KEYS,
    *_HINT_KEYS,
    *_ALWAYS_KEYS,
    "should_defer",
    "aliases",
    "server",
    "is_mcp",
    "_meta",
}


class _Where:
    """Where a record came from, for error messages."""

    def __init__(self, path: str | None, line: int | None, item: int | None = None) -> None:
        self.path, self.line, self.item = path, line, item

    def error(self, message: str, field: str | None = None) -> CatalogError:
        if self.item is not None:
            field = f"[{self.item}]" + (f".{field}" if field else "")
        return CatalogError(message, path=self.path, line=self.line, field=field)


class _StrictJsonError(ValueError):
    """Valid JSON syntax, but not data a catalogue may hold."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _StrictJsonError(f"duplicate key {key!r} in one object")
            seen.add(key)
    return data


def _reject_constant(name: str) -> Any:
    raise _StrictJsonError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _StrictJsonError(f"the number {text[:40]} does not fit a float")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _StrictJsonError(
            f"an integer of {len(text.lstrip('-')):,} digits (at most {MAX_INTEGER_DIGITS})"
        )
    return int(text)


def decode_json(text: str, *, path: str | Path | None = None, line: int | None = None) -> Any:
    """Strict JSON: duplicate keys, ``NaN``/``Infinity``, numbers no float holds, integers
    longer than :data:`MAX_INTEGER_DIGITS` digits and nesting deeper than :data:`MAX_DEPTH`
    are a :class:`CatalogError` naming ``path`` and the line, like a syntax error."""
    try:
        data = json.loads(
            text,
            object_pairs_hook=_no_duplicate_keys,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except json.JSONDecodeError as exc:
        at = line if line is not None else exc.lineno
        raise CatalogError(f"invalid JSON: {exc.msg}", path=path, line=at) from exc
    except _StrictJsonError as exc:
        raise CatalogError(f"invalid JSON: {exc}", path=path, line=line) from None
    except RecursionError:
        raise CatalogError(
            f"invalid JSON: nested deeper than {MAX_DEPTH} levels", path=path, line=line
        ) from None
    return data


def _pick(data: Mapping[str, Any], keys: Iterable[str]) -> tuple[str | None, Any]:
    for key in keys:
        if key in data:
            return key, data[key]
    return None, None


def tool_from_dict(
    data: Any, *, path: str | None = None, line: int | None = None, item: int | None = None
) -> Tool:
    """Build a :class:`Tool` from one catalogue record, validating every field.

    Accepts this project's fields (``input_schema``, ``search_hint``, ``always_load``...), MCP's
    (``inputSchema``, ``_meta`` hints) and OpenAI's function wrapper
    (``{"type": "function", "function": {...}}``); other fields are kept as metadata.

    A catalogue lists the tools to search, so a plain (non-MCP) tool without ``always_load``
    is deferred unless the record says ``"should_defer": false`` (:func:`catalogue_defers`).
    """
    where = _Where(path, line, item)
    if not isinstance(data, Mapping):
        raise where.error(f"a tool must be a JSON object, got {type(data).__name__}")
    if json_depth(data, MAX_DEPTH) > MAX_DEPTH:
        raise where.error(f"the record nests objects and arrays deeper than {MAX_DEPTH} levels")
    if data.get("type") == "function" and isinstance(data.get("function"), Mapping):
        data = {**data["function"], **{k: v for k, v in data.items() if k not in ("function",)}}
        data.pop("type", None)
    name = data.get("name")
    if "name" not in data:
        raise where.error("missing required field", "name")
    if not isinstance(name, str) or not name.strip():
        raise where.error(f"must be a non-empty string, got {name!r}", "name")
    if any(ch.isspace() for ch in name):
        raise where.error(f"must not contain whitespace, got {name!r}", "name")
    description = data.get("description")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise where.error(f"must be a string, got {type(description).__name__}", "description")
    schema_key, schema = _pick(data, _SCHEMA_KEYS)
    if schema is None:
        schema = {"type": "object", "properties": {}}
    elif not isinstance(schema, Mapping):
        raise where.error(
            f"must be a JSON object (a JSON Schema), got {type(schema).__name__}", schema_key
        )
    meta = data.get("_meta") or {}
    if not isinstance(meta, Mapping):
        raise where.error(f"must be a JSON object, got {type(meta).__name__}", "_meta")
    hint_key, hint = _pick(data, _HINT_KEYS)
    if hint is None and isinstance(meta.get("anthropic/searchHint"), str):
        hint, hint_key = meta["anthropic/searchHint"], "_meta.anthropic/searchHint"
    if hint is not None and not isinstance(hint, str):
        raise where.error(f"must be a string, got {type(hint).__name__}", hint_key)
    always_key, always = _pick(data, _ALWAYS_KEYS)
    if always is None:
        always = meta.get("anthropic/alwaysLoad") is True
    if not isinstance(always, bool):
        raise where.error(f"must be true or false, got {always!r}", always_key)
    should_defer = data.get("should_defer")
    if should_defer is not None and not isinstance(should_defer, bool):
        raise where.error(f"must be true or false, got {should_defer!r}", "should_defer")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        raise where.error(f"must be a list of non-empty strings, got {aliases!r}", "aliases")
    server = data.get("server")
    if server is not None and (not isinstance(server, str) or not server):
        raise where.error(f"must be a non-empty string, got {server!r}", "server")
    is_mcp = data.get("is_mcp")
    if is_mcp is not None and not isinstance(is_mcp, bool):
        raise where.error(f"must be true or false, got {is_mcp!r}", "is_mcp")
    metadata = {k: v for k, v in data.items() if k not in _KNOWN}
    if meta:
        metadata["_meta"] = dict(meta)
    try:
        return Tool(
            name=name,
            description=description,
            input_schema=_json_copy(schema, where, schema_key),
            search_hint=hint,
            always_load=always,
            should_defer=catalogue_defers(should_defer, name, server, is_mcp, always),
            aliases=tuple(aliases),
            server=server,
            is_mcp=is_mcp,
            metadata=metadata,
        )
    except ValueError:
        surrogate = lone_surrogate(data)  # the one thing Tool refuses that is not checked above
        if surrogate is None:
            raise
        field_path, what = surrogate
        raise where.error(f"has {what}, {SURROGATE_HINT}", field_path.lstrip(".")) from None


def catalogue_defers(
    should_defer: bool | None, name: str, server: str | None, is_mcp: bool | None, always: bool
) -> bool:
    """A catalogue record's ``should_defer``: as given, else true for a plain tool that is not
    ``always_load``. With :func:`toolsearch.tool.is_deferred` (the reference rule, unchanged)
    every tool of a catalogue is then deferred unless the record says otherwise, in the
    library, the CLI and the benchmark alike (docs/getting-started.md, "Catalogues")."""
    if should_defer is not None:
        return should_defer
    return not (always or comes_from_mcp(name, server, is_mcp))


def _json_copy(value: Any, where: _Where, field: str | None) -> Any:
    """A plain-JSON deep copy; values JSON cannot hold (NaN, sets, objects) are refused."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise where.error(f"must be plain JSON: {exc}", field) from None


def tools_from_mcp_result(
    result: Mapping[str, Any],
    server: str,
    *,
    always_load: bool = False,
    path: str | None = None,
) -> list[Tool]:
    """Tools of one MCP server's ``tools/list`` result, named ``mcp__<server>__<tool>``.

    ``_meta["anthropic/searchHint"]`` and ``_meta["anthropic/alwaysLoad"]`` are honoured;
    ``always_load`` is the server-level setting that applies to all of its tools. Aliases a
    server sends are dropped: an alias could claim another server's tool name.
    """
    items = result.get("tools")
    if not isinstance(items, list):
        raise CatalogError(
            "an MCP tools/list result needs a 'tools' array", path=path, field="tools"
        )
    tools: list[Tool] = []
    for item, raw in enumerate(items):
        where = _Where(path, None, item)
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise where.error("an MCP tool needs a non-empty string name", "name")
        # A server names only its own tools: aliases (a catalogue feature MCP does not have)
        # and identity fields it sends could make its tool stand in for another server's.
        record = {k: v for k, v in raw.items() if k not in _SERVER_CANNOT_SET}
        record["mcp_name"] = raw["name"]
        record["name"] = mcp_tool_name(server, raw["name"])
        record["server"] = server
        tool = tool_from_dict(record, path=path, item=item)
        if always_load and not tool.always_load:
            tool = _with_always_load(tool)
        tools.append(tool)
    _check_unique(tools, [None] * len(tools), path)
    return tools


def _with_always_load(tool: Tool) -> Tool:
    from dataclasses import replace

    return replace(tool, always_load=True)


def parse_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded value)`` for every non-blank line of a JSON Lines file."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot read file: {exc.strerror or exc}", path=path) from exc
    with handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                yield number, decode_json(text, path=path, line=number)
        except UnicodeDecodeError as exc:
            raise CatalogError(f"not UTF-8 text: {exc}", path=path) from exc


def _check_unique(tools: list[Tool], lines: list[int | None], path: str | None) -> None:
    seen: dict[str, int | None] = {}
    for tool, line in zip(tools, lines, strict=True):
        if tool.name in seen:
            first = seen[tool.name]
            also = f" (first defined on line {first})" if first is not None else ""
            raise CatalogError(
                f"duplicate tool name {tool.name!r}{also}", path=path, line=line, field="name"
            )
        seen[tool.name] = line


def _named_in_full(items: Any, path: str) -> bool:
    """True when every tool of a ``{"tools": [...]}`` object already has an ``mcp__`` name
    (a catalogue, kept as named), False when none has (a ``tools/list`` result, to be named
    for its server); a mix is an error, as prefixing would double some names."""
    if not isinstance(items, list):
        return False
    named = [
        isinstance(t, Mapping) and str(t.get("name", "")).startswith(MCP_PREFIX) for t in items
    ]
    if all(named) and named:
        return True
    if any(named):
        item = named.index(True)
        raise CatalogError(
            "some tools already have mcp__ names and others do not; name all of them in full "
            "(a catalogue) or none (an MCP tools/list result named after the file)",
            path=path,
            field=f"tools[{item}].name",
        )
    return False


def catalogue_file(path: str | Path) -> Path:
    """The file a catalogue argument reads: the path, a dataset folder's ``tools.jsonl``, or the
    catalogue of a dataset named so (:func:`toolsearch.datasets.named_path`)."""
    from toolsearch.datasets import named_path

    found = Path(named_path(path))
    if found.is_dir():
        if not (found / "tools.jsonl").is_file():
            raise CatalogError("dataset folder has no tools.jsonl", path=found)
        return found / "tools.jsonl"
    return found


def load_nonempty_catalog(path: str | Path) -> list[Tool]:
    """:func:`load_catalog`, where a catalogue without a tool (an empty file, ``[]``) is a
    :class:`CatalogError` naming the file: what a command searches must have tools."""
    tools = load_catalog(path)
    if not tools:
        raise CatalogError(
            "the catalogue has no tools (an empty file?); a catalogue lists at least one tool",
            path=catalogue_file(path),
        )
    return tools


def load_catalog(path: str | Path, *, server: str | None = None) -> list[Tool]:
    """Load every tool from ``path``.

    A folder is a dataset folder (its ``tools.jsonl``); ``*.jsonl`` has one tool per line;
    other files are JSON: an array of tools, or an MCP ``tools/list`` result (an object with a
    ``tools`` array) whose tools are named for ``server`` (default: the file's stem). A name
    that is no existing path but a dataset's (``"starter"``, ``"mcp-workbench"``) loads that
    dataset's catalogue.
    """
    path = catalogue_file(path)
    if path.suffix == ".jsonl":
        tools: list[Tool] = []
        lines: list[int | None] = []
        for number, data in parse_jsonl(path):
            tools.append(tool_from_dict(data, path=str(path), line=number))
            lines.append(number)
        _check_unique(tools, lines, str(path))
        return tools
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot read file: {exc.strerror or exc}", path=path) from exc
    except UnicodeDecodeError as exc:
        raise CatalogError(f"not UTF-8 text: {exc}", path=path) from exc
    data = decode_json(text, path=path)
    if isinstance(data, Mapping) and "tools" in data:
        if server is not None or not _named_in_full(data["tools"], str(path)):
            return tools_from_mcp_result(data, server or path.stem, path=str(path))
        data = data["tools"]  # a catalogue wrapped in an object: its names are already full
    if not isinstance(data, list):
        raise CatalogError(
            "expected a JSON array of tools or an MCP tools/list result "
            f"(an object with 'tools'), got {type(data).__name__}",
            path=path,
        )
    tools = [tool_from_dict(item, path=str(path), item=i) for i, item in enumerate(data)]
    _check_unique(tools, [None] * len(tools), str(path))
    return tools
