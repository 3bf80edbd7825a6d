"""Labeled query-to-tool datasets in the folder layout every toolsearch tool reads::

    <dataset>/
      tools.jsonl    one tool a line (see toolsearch.catalog)
      queries.jsonl  one query a line: {"id", "text", "style"?, ...extra fields kept}
      qrels.tsv      header "query-id<TAB>tool-name<TAB>score[<TAB>group]", one relevant pair a row

A query with no qrels row is a *negative* query: no tool answers it. Loading checks every
reference (each qrels row must name a known query and a known tool, once) and reports file and
line.

The optional ``group`` column says which gold tools are *alternatives*: rows of one query with
the same group value each satisfy that group, and a query needs one tool from each of its
groups. Without the column every row is its own group. A query's ``n_tools`` (how many tools
it needs) is the number of its groups: derived, never typed in queries.jsonl (a typed value
that disagrees is an error). See ``docs/benchmark.md`` for how every metric reads groups.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolsearch.catalog import load_nonempty_catalog, parse_jsonl
from toolsearch.errors import CatalogError
from toolsearch.tool import Tool

__all__ = [
    "GROUP_COLUMN",
    "QRELS_HEADER",
    "Dataset",
    "QrelsLayout",
    "QrelsTable",
    "Query",
    "check_typed_n_tools",
    "check_unique",
    "checked_id",
    "load_dataset",
    "read_qrels",
]

QRELS_HEADER: tuple[str, str, str] = ("query-id", "tool-name", "score")
#: The optional fourth qrels column: rows of one query with the same value are alternatives.
GROUP_COLUMN = "group"
DATASET_FILES = ("tools.jsonl", "queries.jsonl", "qrels.tsv")


@dataclass(frozen=True, slots=True)
class Query:
    """One labeled query; ``metadata`` keeps any extra fields of its line."""

    id: str
    text: str
    style: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Dataset:
    """Tools, queries and graded relevance judgements (``qrels[query_id][tool] = grade``).

    ``qrel_groups[query_id][tool] = label`` groups a query's gold tools into alternatives; a
    query absent from it has every gold tool in a group of its own. A query listed there must
    label exactly its gold tools.
    """

    name: str
    tools: Sequence[Tool]
    queries: Sequence[Query]
    qrels: Mapping[str, Mapping[str, int]]
    path: Path | None = None
    qrel_groups: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for qid, labels in self.qrel_groups.items():
            gold = set(self.qrels.get(qid, {}))
            if set(labels) != gold:
                odd = sorted(set(labels) ^ gold)
                raise CatalogError(
                    f"query {qid!r}: the groups must label exactly its gold tools "
                    f"(mismatch: {', '.join(odd)})"
                )

    def groups(self, query_id: str) -> tuple[tuple[str, ...], ...]:
        """The query's required groups of alternative tools, in qrels order (empty for a
        negative query)."""
        gold = self.qrels.get(query_id, {})
        labels = self.qrel_groups.get(query_id)
        if labels is None:
            return tuple((tool,) for tool in gold)
        grouped: dict[str, list[str]] = {}
        for tool in gold:
            grouped.setdefault(labels[tool], []).append(tool)
        return tuple(tuple(members) for members in grouped.values())

    def n_tools(self, query_id: str) -> int:
        """How many tools the query needs: one per group (0 for a negative query)."""
        return len(self.groups(query_id))

    @property
    def query_groups(self) -> dict[str, tuple[tuple[str, ...], ...]]:
        """``{query id: groups}`` for every positive query (what the metrics read)."""
        return {qid: self.groups(qid) for qid in self.qrels if self.qrels[qid]}

    @property
    def has_groups(self) -> bool:
        """True when some query has alternatives (a group with more than one tool)."""
        return any(len(g) > 1 for groups in self.query_groups.values() for g in groups)

    @property
    def positives(self) -> list[Query]:
        """Queries that at least one tool answers."""
        return [q for q in self.queries if self.qrels.get(q.id)]

    @property
    def negatives(self) -> list[Query]:
        """Queries no tool answers (no qrels row)."""
        return [q for q in self.queries if not self.qrels.get(q.id)]

    @property
    def styles(self) -> list[str]:
        """The distinct query styles, in first-seen order."""
        return list(dict.fromkeys(q.style for q in self.queries if q.style))

    def sha256(self) -> str:
        """A hash of the dataset files' bytes (or of the loaded content when built in code)."""
        digest = hashlib.sha256()
        if self.path is not None:
            for filename in DATASET_FILES:
                file = self.path / filename
                if file.is_file():
                    digest.update(filename.encode())
                    digest.update(file.read_bytes())
            return digest.hexdigest()
        for tool in self.tools:
            digest.update(tool.content_hash().encode())
        self._hash_judgements(digest)
        return digest.hexdigest()

    def judgements_sha256(self) -> str:
        """A hash of the queries and their judgements only (ids, texts, styles, qrels with
        grades and groups): what must match for two runs' metrics to be comparable when only
        the tools' texts changed."""
        digest = hashlib.sha256()
        self._hash_judgements(digest)
        return digest.hexdigest()

    def tool_hashes(self) -> dict[str, str]:
        """``{tool name: a short hash of its content}``, to name the tools that changed."""
        return {tool.name: tool.content_hash()[:16] for tool in self.tools}

    def _hash_judgements(self, digest: Any) -> None:
        for query in self.queries:
            digest.update(f"{query.id}\t{query.text}\t{query.style}\n".encode())
        for qid in sorted(self.qrels):
            labels = self.qrel_groups.get(qid, {})
            for tool_name, grade in sorted(self.qrels[qid].items()):
                group = labels.get(tool_name, "")
                digest.update(f"{qid}\t{tool_name}\t{grade}\t{group}\n".encode())


def checked_id(raw: Any, path: Path, line: int, field: str) -> str:
    """A query or tool id as written in a JSONL file: a non-empty string without whitespace
    (it must fit in a tab-separated qrels row); an integer is read as its digits."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or not raw.strip():
        raise CatalogError(
            f"must be a non-empty string, got {raw!r}", path=path, line=line, field=field
        )
    if any(ch.isspace() for ch in raw):
        raise CatalogError(
            f"{raw!r} contains whitespace, so it cannot be a tool or query id",
            path=path,
            line=line,
            field=field,
        )
    return raw


def check_unique(
    value: str, seen: dict[str, int], kind: str, path: Path, line: int, field: str
) -> None:
    """Record that ``value`` is on ``line``; an id already in ``seen`` is an error naming both
    lines."""
    if value in seen:
        raise CatalogError(
            f"duplicate {kind} id {value!r} (first on line {seen[value]})",
            path=path,
            line=line,
            field=field,
        )
    seen[value] = line


def _load_queries(path: Path) -> list[Query]:
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for line, data in parse_jsonl(path):
        if not isinstance(data, Mapping):
            raise CatalogError("a query must be a JSON object", path=path, line=line)
        qid = checked_id(data.get("id"), path, line, "id")
        check_unique(qid, seen, "query", path, line, "id")
        text, style = data.get("text"), data.get("style")
        if not isinstance(text, str):
            raise CatalogError(
                f"must be a string, got {text!r}", path=path, line=line, field="text"
            )
        if style is not None and not isinstance(style, str):
            raise CatalogError(
                f"must be a string, got {style!r}", path=path, line=line, field="style"
            )
        extra = {k: v for k, v in data.items() if k not in ("id", "text", "style")}
        queries.append(Query(qid, text, style, extra))
    return queries


@dataclass(frozen=True, slots=True)
class QrelsLayout:
    """How one qrels table is written: its column names, whether a header row is required,
    whether scores may be written as integral floats (``1.0``), whether the optional group
    column is allowed, and the files its ids refer to (named in error messages)."""

    columns: tuple[str, str, str] = QRELS_HEADER
    header_required: bool = True
    float_scores: bool = False
    groups: bool = True
    queries_file: str = "queries.jsonl"
    tools_file: str = "tools.jsonl"


@dataclass(frozen=True, slots=True)
class QrelsTable:
    """Every judgement of a qrels table, zero grades included, and the group of each row of
    the queries whose rows carry one (``groups[qid][tool] = label``)."""

    grades: dict[str, dict[str, int]]
    groups: dict[str, dict[str, str]]

    def positive(self) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, str]]]:
        """Grades and groups with the zero-grade rows dropped (they judge a tool irrelevant)."""
        grades: dict[str, dict[str, int]] = {}
        for qid, gold in self.grades.items():
            kept = {tool: grade for tool, grade in gold.items() if grade > 0}
            if kept:
                grades[qid] = kept
        groups = {
            qid: {tool: label for tool, label in labels.items() if tool in grades.get(qid, {})}
            for qid, labels in self.groups.items()
        }
        return grades, {qid: labels for qid, labels in groups.items() if labels}


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CatalogError(f"cannot read file: {exc.strerror or exc}", path=path) from exc
    except UnicodeDecodeError as exc:
        raise CatalogError(f"not UTF-8 text: {exc}", path=path) from exc


def _header_width(lines: Sequence[str], path: Path, layout: QrelsLayout) -> int | None:
    """3 or 4 (with the group column) when the first line is a header, None when it is not
    (allowed only when the layout does not require a header)."""
    cells = tuple(cell.strip() for cell in lines[0].rstrip("\r").split("\t")) if lines else ()
    if cells == layout.columns or (layout.groups and cells == (*layout.columns, GROUP_COLUMN)):
        return len(cells)
    if cells[:2] == layout.columns[:2] or layout.header_required:
        expected = repr("<TAB>".join(layout.columns))
        if layout.groups:
            expected += f" (optionally with '<TAB>{GROUP_COLUMN}')"
        found = repr(lines[0]) if lines else "an empty file"
        raise CatalogError(f"header must be {expected}, got {found}", path=path, line=1)
    return None


def _grade(raw: str, layout: QrelsLayout, path: Path, line: int) -> int:
    try:
        value = float(raw) if layout.float_scores else int(raw)
    except ValueError:
        raise CatalogError(
            f"must be an integer, got {raw!r}", path=path, line=line, field="score"
        ) from None
    if value < 0 or (isinstance(value, float) and not value.is_integer()):
        raise CatalogError(
            f"must be a non-negative integer, got {raw!r}", path=path, line=line, field="score"
        )
    return int(value)


def _check_ids(
    qid: str,
    tool_name: str,
    query_ids: Collection[str],
    tool_names: Collection[str],
    layout: QrelsLayout,
    path: Path,
    line: int,
) -> None:
    if qid not in query_ids:
        raise CatalogError(
            f"unknown query {qid!r} (not in {layout.queries_file})",
            path=path,
            line=line,
            field=layout.columns[0],
        )
    if tool_name not in tool_names:
        kind = "tool" if layout.columns[1] == "tool-name" else "document"
        raise CatalogError(
            f"unknown {kind} {tool_name!r} (not in {layout.tools_file})",
            path=path,
            line=line,
            field=layout.columns[1],
        )


def read_qrels(
    path: str | Path,
    query_ids: Collection[str],
    tool_names: Collection[str],
    layout: QrelsLayout = QrelsLayout(),
) -> QrelsTable:
    """Read and validate a qrels table: the one implementation behind the dataset layout and
    BEIR import. Every row must name a known query and tool, once; the score must be a
    non-negative integer; with the group column every row has a non-empty group, and a
    query's rows either all carry groups or none do (the header decides, so this holds)."""
    file = Path(path)
    lines = _read_lines(file)
    width = _header_width(lines, file, layout)
    first = 2 if width is not None else 1
    expected = width or 3
    grades: dict[str, dict[str, int]] = {}
    groups: dict[str, dict[str, str]] = {}
    seen: dict[tuple[str, str], int] = {}
    for number, text in enumerate(lines[first - 1 :], start=first):
        if not text.strip():
            continue
        cells = [cell.strip() for cell in text.rstrip("\r").split("\t")]
        if len(cells) != expected:
            names = ", ".join((*layout.columns, GROUP_COLUMN)[:expected])
            raise CatalogError(
                f"expected {expected} tab-separated fields ({names}), got {len(cells)}",
                path=file,
                line=number,
            )
        qid, tool_name = cells[0], cells[1]
        _check_ids(qid, tool_name, query_ids, tool_names, layout, file, number)
        if (qid, tool_name) in seen:
            raise CatalogError(
                f"{qid!r} judges {tool_name!r} twice (first on line {seen[qid, tool_name]})",
                path=file,
                line=number,
            )
        seen[qid, tool_name] = number
        grades.setdefault(qid, {})[tool_name] = _grade(cells[2], layout, file, number)
        if expected == 4:
            if not cells[3]:
                raise CatalogError(
                    "must not be empty (rows of one group are alternatives; give a single "
                    "tool a group of its own)",
                    path=file,
                    line=number,
                    field=GROUP_COLUMN,
                )
            groups.setdefault(qid, {})[tool_name] = cells[3]
    return QrelsTable(grades, groups)


def check_typed_n_tools(dataset: Dataset, path: Path | None = None) -> None:
    """A query that types ``n_tools`` must agree with the count its qrels groups give."""
    for query in dataset.queries:
        if "n_tools" not in query.metadata:
            continue
        typed, derived = query.metadata["n_tools"], dataset.n_tools(query.id)
        if typed != derived:
            raise CatalogError(
                f"query {query.id!r} types n_tools = {typed!r} but its qrels give {derived} "
                "group(s); n_tools is derived from the qrels groups — drop the field or fix "
                "the groups",
                path=path,
                field="n_tools",
            )


def _optional_file(folder: Path, name: str) -> Path:
    """``folder / name``, which may be missing but, when present, must be a file."""
    path = folder / name
    if path.exists() and not path.is_file():
        raise CatalogError(f"{name} must be a file, found a folder or other entry", path=path)
    return path


def load_dataset(path: str | Path, *, name: str | None = None) -> Dataset:
    """Load and cross-check a dataset folder, or a dataset named as ``load_catalog`` names one.
    A catalogue-only folder (no queries) loads with no queries; qrels without queries, and a
    ``tools.jsonl`` without a tool, are errors."""
    from toolsearch.datasets import named_path

    folder = Path(named_path(path))
    if not folder.is_dir():
        raise CatalogError("not a dataset folder (expected a directory)", path=folder)
    tools = load_nonempty_catalog(folder)
    queries_path = _optional_file(folder, "queries.jsonl")
    qrels_path = _optional_file(folder, "qrels.tsv")
    queries = _load_queries(queries_path) if queries_path.is_file() else []
    if qrels_path.is_file():
        if not queries_path.is_file():
            raise CatalogError("qrels.tsv without queries.jsonl", path=qrels_path)
        table = read_qrels(qrels_path, {q.id for q in queries}, {t.name for t in tools})
        qrels, groups = table.positive()
    elif queries:
        raise CatalogError("queries.jsonl without qrels.tsv", path=queries_path)
    else:
        qrels, groups = {}, {}
    dataset = Dataset(name or folder.resolve().name, tools, queries, qrels, folder, groups)
    check_typed_n_tools(dataset, queries_path)
    return dataset
