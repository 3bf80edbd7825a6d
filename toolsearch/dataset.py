"""Labeled query-to-tool datasets in the folder layout every toolsearch tool reads::

    <dataset>/
      tools.jsonl    one tool a line (see toolsearch.catalog)
      queries.jsonl  one query a line: {"id", "text", "style"?, ...extra fields kept}
      qrels.tsv      header "query-id<TAB>tool-name<TAB>score", one relevant pair a row

A query with no qrels row is a *negative* query: no tool answers it. Loading checks every
reference (each qrels row must name a known query and a known tool) and reports file and line.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolsearch.catalog import load_catalog, parse_jsonl
from toolsearch.errors import CatalogError
from toolsearch.tool import Tool

__all__ = ["QRELS_HEADER", "Dataset", "Query", "load_dataset"]

QRELS_HEADER = ("query-id", "tool-name", "score")
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
    """Tools, queries and graded relevance judgements (``qrels[query_id][tool] = grade``)."""

    name: str
    tools: Sequence[Tool]
    queries: Sequence[Query]
    qrels: Mapping[str, Mapping[str, int]]
    path: Path | None = None

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
        for query in self.queries:
            digest.update(f"{query.id}\t{query.text}\t{query.style}\n".encode())
        for qid in sorted(self.qrels):
            for tool_name, grade in sorted(self.qrels[qid].items()):
                digest.update(f"{qid}\t{tool_name}\t{grade}\n".encode())
        return digest.hexdigest()


def _load_queries(path: Path) -> list[Query]:
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for line, data in parse_jsonl(path):
        if not isinstance(data, Mapping):
            raise CatalogError("a query must be a JSON object", path=path, line=line)
        qid, text, style = data.get("id"), data.get("text"), data.get("style")
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        if not isinstance(qid, str) or not qid.strip():
            raise CatalogError(
                f"must be a non-empty string, got {qid!r}", path=path, line=line, field="id"
            )
        if any(ch.isspace() for ch in qid):
            raise CatalogError(
                f"must not contain whitespace, got {qid!r}", path=path, line=line, field="id"
            )
        if qid in seen:
            raise CatalogError(
                f"duplicate query id {qid!r} (first on line {seen[qid]})",
                path=path,
                line=line,
                field="id",
            )
        if not isinstance(text, str):
            raise CatalogError(
                f"must be a string, got {text!r}", path=path, line=line, field="text"
            )
        if style is not None and not isinstance(style, str):
            raise CatalogError(
                f"must be a string, got {style!r}", path=path, line=line, field="style"
            )
        seen[qid] = line
        extra = {k: v for k, v in data.items() if k not in ("id", "text", "style")}
        queries.append(Query(qid, text, style, extra))
    return queries


def _load_qrels(path: Path, query_ids: set[str], tool_names: set[str]) -> dict[str, dict[str, int]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CatalogError(f"cannot read file: {exc.strerror or exc}", path=path) from exc
    except UnicodeDecodeError as exc:
        raise CatalogError(f"not UTF-8 text: {exc}", path=path) from exc
    if not lines or tuple(lines[0].split("\t")) != QRELS_HEADER:
        found = lines[0] if lines else "an empty file"
        raise CatalogError(
            f"header must be {'<TAB>'.join(QRELS_HEADER)!r}, got {found!r}", path=path, line=1
        )
    qrels: dict[str, dict[str, int]] = {}
    for number, text in enumerate(lines[1:], start=2):
        if not text.strip():
            continue
        cells = text.split("\t")
        if len(cells) != 3:
            raise CatalogError(
                f"expected 3 tab-separated fields, got {len(cells)}", path=path, line=number
            )
        qid, tool_name, raw_score = cells
        if qid not in query_ids:
            raise CatalogError(
                f"unknown query {qid!r} (not in queries.jsonl)",
                path=path,
                line=number,
                field="query-id",
            )
        if tool_name not in tool_names:
            raise CatalogError(
                f"unknown tool {tool_name!r} (not in tools.jsonl)",
                path=path,
                line=number,
                field="tool-name",
            )
        try:
            grade = int(raw_score)
        except ValueError:
            raise CatalogError(
                f"must be an integer, got {raw_score!r}", path=path, line=number, field="score"
            ) from None
        if grade < 0:
            raise CatalogError(
                f"must not be negative, got {grade}", path=path, line=number, field="score"
            )
        if grade > 0:
            qrels.setdefault(qid, {})[tool_name] = grade
    return qrels


def load_dataset(path: str | Path, *, name: str | None = None) -> Dataset:
    """Load and cross-check a dataset folder. A catalogue-only folder (no queries) loads with
    no queries; qrels without queries is an error."""
    folder = Path(path)
    if not folder.is_dir():
        raise CatalogError("not a dataset folder (expected a directory)", path=folder)
    tools = load_catalog(folder)
    queries_path, qrels_path = folder / "queries.jsonl", folder / "qrels.tsv"
    queries = _load_queries(queries_path) if queries_path.is_file() else []
    if qrels_path.is_file():
        if not queries_path.is_file():
            raise CatalogError("qrels.tsv without queries.jsonl", path=qrels_path)
        qrels = _load_qrels(qrels_path, {q.id for q in queries}, {t.name for t in tools})
    elif queries:
        raise CatalogError("queries.jsonl without qrels.tsv", path=queries_path)
    else:
        qrels = {}
    return Dataset(name or folder.resolve().name, tools, queries, qrels, folder)
