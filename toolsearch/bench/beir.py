"""Moving datasets between toolsearch's layout and BEIR's, both ways.

BEIR (Thakur et al., NeurIPS 2021 Datasets and Benchmarks; also what MTEB's retrieval tasks
read) keeps a dataset as::

    corpus.jsonl       {"_id", "title", "text", "metadata"?}   one document a line
    queries.jsonl      {"_id", "text", "metadata"?}            one query a line
    qrels/<split>.tsv  header "query-id<TAB>corpus-id<TAB>score", one judgement a row

Mapping (import ← BEIR, export → BEIR):

* a document is a tool: ``_id`` ↔ the tool's name (so it must contain no whitespace),
  ``text`` ↔ the description, ``metadata`` ↔ every other tool field (``input_schema``,
  ``search_hint``, ``server``...). Export writes the name as ``title``; on import a ``title``
  that is not empty and differs from ``_id`` is kept by putting it on the description's
  first line, since the title is searchable text in BEIR;
* a query's ``metadata.style`` ↔ its ``style``; other metadata ↔ the query's extra fields;
* qrels groups (alternative gold tools; see :mod:`toolsearch.dataset`) have no place in
  BEIR's three-column qrels, so export writes every gold tool as a plain judgement and puts
  the groups in the query's ``metadata.qrel_groups`` (``{tool: group}``); import reads them
  back from there. Other BEIR tools ignore that key and so score such a query as needing
  every listed tool — the documented loss;
* qrels of one split (``test`` by default) ↔ ``qrels.tsv``. On import the queries judged in
  that split are kept, plus the queries judged in *no* split (they are negative queries: no
  tool answers them); queries judged only in other splits are left out and counted in
  :class:`BeirImport`. Export writes every query, negative ones included (they get no row).

An export followed by an import gives back the same tools, queries and judgements.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolsearch.catalog import parse_jsonl, tool_from_dict
from toolsearch.dataset import (
    DATASET_FILES,
    GROUP_COLUMN,
    QRELS_HEADER,
    Dataset,
    QrelsLayout,
    QrelsTable,
    Query,
    check_unique,
    checked_id,
    load_dataset,
    read_qrels,
)
from toolsearch.errors import CatalogError
from toolsearch.tool import Tool

__all__ = [
    "BEIR_QRELS_HEADER",
    "GROUPS_KEY",
    "BeirImport",
    "export_beir",
    "import_beir",
    "read_beir",
    "write_dataset",
]

BEIR_QRELS_HEADER = ("query-id", "corpus-id", "score")
_BEIR_FILES = ("corpus.jsonl", "queries.jsonl", "qrels")
#: The query metadata key that carries qrels groups through BEIR, which has no group column.
GROUPS_KEY = "qrel_groups"


@dataclass(frozen=True, slots=True)
class BeirImport:
    """What an import read and wrote."""

    dataset: Dataset
    split: str
    excluded_queries: int

    def summary(self) -> str:
        """One line for the CLI."""
        d = self.dataset
        note = (
            f"; {self.excluded_queries} queries judged only in other splits left out"
            if self.excluded_queries
            else ""
        )
        return (
            f"{d.name}: {len(d.tools)} tools, {len(d.queries)} queries "
            f"({len(d.negatives)} negative) from split {self.split!r}{note}"
        )


def _check_target(dst: Path, files: Iterable[str], force: bool) -> None:
    if dst.exists() and not dst.is_dir():
        raise CatalogError("the destination exists and is not a folder", path=dst)
    clash = [name for name in files if (dst / name).exists()]
    if clash and not force:
        raise CatalogError(
            f"the destination already has {', '.join(clash)}; pass --force to overwrite",
            path=dst,
        )


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    try:
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot write: {exc.strerror or exc}", path=path) from exc


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _qrels_rows(dataset: Dataset) -> list[str]:
    """qrels.tsv lines; the group column only when some query has groups (a query without
    them gets one group per tool, named after the tool)."""
    grouped = bool(dataset.qrel_groups)
    rows = ["\t".join((*QRELS_HEADER, GROUP_COLUMN) if grouped else QRELS_HEADER)]
    for query in dataset.queries:
        labels = dataset.qrel_groups.get(query.id, {})
        for tool_name, grade in dataset.qrels.get(query.id, {}).items():
            row = f"{query.id}\t{tool_name}\t{grade}"
            rows.append(f"{row}\t{labels.get(tool_name, tool_name)}" if grouped else row)
    return rows


def write_dataset(dataset: Dataset, dst: str | Path, *, force: bool = False) -> Dataset:
    """Write ``dataset`` as a toolsearch dataset folder and load it back (checking it)."""
    folder = Path(dst)
    _check_target(folder, DATASET_FILES, force)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CatalogError(f"cannot create folder: {exc.strerror or exc}", path=folder) from exc
    _write_lines(folder / "tools.jsonl", (_dumps(tool.to_dict()) for tool in dataset.tools))
    query_lines = []
    for query in dataset.queries:
        record: dict[str, Any] = {"id": query.id, "text": query.text}
        if query.style is not None:
            record["style"] = query.style
        record.update(query.metadata)
        query_lines.append(_dumps(record))
    _write_lines(folder / "queries.jsonl", query_lines)
    _write_lines(folder / "qrels.tsv", _qrels_rows(dataset))
    return load_dataset(folder, name=dataset.name)


# --------------------------------------------------------------------------- import


def _optional_str(data: Mapping[str, Any], key: str, path: Path, line: int) -> str:
    value = data.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CatalogError(
            f"must be a string, got {type(value).__name__}", path=path, line=line, field=key
        )
    return value


def _metadata(data: Mapping[str, Any], path: Path, line: int) -> dict[str, Any]:
    meta = data.get("metadata")
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise CatalogError(
            f"must be a JSON object, got {type(meta).__name__}",
            path=path,
            line=line,
            field="metadata",
        )
    return dict(meta)


def _read_corpus(path: Path) -> list[Tool]:
    if not path.is_file():
        raise CatalogError("missing BEIR corpus file", path=path)
    tools: list[Tool] = []
    seen: dict[str, int] = {}
    for line, data in parse_jsonl(path):
        if not isinstance(data, Mapping):
            raise CatalogError("a corpus document must be a JSON object", path=path, line=line)
        doc_id = checked_id(data.get("_id"), path, line, "_id")
        check_unique(doc_id, seen, "document", path, line, "_id")
        title = _optional_str(data, "title", path, line).strip()
        text = _optional_str(data, "text", path, line)
        description = f"{title}\n{text}" if title and title != doc_id else text
        record = {**_metadata(data, path, line), "name": doc_id, "description": description}
        tools.append(tool_from_dict(record, path=str(path), line=line))
    return tools


def _read_queries(path: Path) -> list[Query]:
    if not path.is_file():
        raise CatalogError("missing BEIR queries file", path=path)
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for line, data in parse_jsonl(path):
        if not isinstance(data, Mapping):
            raise CatalogError("a query must be a JSON object", path=path, line=line)
        qid = checked_id(data.get("_id"), path, line, "_id")
        check_unique(qid, seen, "query", path, line, "_id")
        if not isinstance(data.get("text"), str):
            raise CatalogError(
                f"must be a string, got {data.get('text')!r}", path=path, line=line, field="text"
            )
        meta = _metadata(data, path, line)
        style = meta.pop("style", None)
        if style is not None and not isinstance(style, str):
            raise CatalogError(
                f"must be a string, got {style!r}", path=path, line=line, field="metadata.style"
            )
        queries.append(Query(qid, data["text"], style, meta))
    return queries


#: BEIR's qrels: optional header, ``corpus-id`` column, scores possibly written as ``1.0``,
#: no group column (groups travel in the queries' metadata instead).
_BEIR_LAYOUT = QrelsLayout(
    columns=BEIR_QRELS_HEADER,
    header_required=False,
    float_scores=True,
    groups=False,
    tools_file="corpus.jsonl",
)


def _groups_from_metadata(
    queries: Sequence[Query], qrels: Mapping[str, Mapping[str, int]], path: Path
) -> tuple[list[Query], dict[str, dict[str, str]]]:
    """Take each query's ``metadata.qrel_groups`` (``{tool: group}``, written by
    :func:`export_beir`) out of its metadata, checked against the split's judgements."""
    kept: list[Query] = []
    groups: dict[str, dict[str, str]] = {}
    for query in queries:
        if GROUPS_KEY not in query.metadata:
            kept.append(query)
            continue
        meta = dict(query.metadata)
        labels = meta.pop(GROUPS_KEY)
        where = f"metadata.{GROUPS_KEY}"
        if not isinstance(labels, Mapping) or not all(
            isinstance(v, str) and v.strip() for v in labels.values()
        ):
            raise CatalogError(
                f"query {query.id!r}: must map each gold tool to a non-empty group name",
                path=path,
                field=where,
            )
        gold = set(qrels.get(query.id, {}))
        if gold and set(labels) != gold:
            odd = ", ".join(sorted(set(labels) ^ gold))
            raise CatalogError(
                f"query {query.id!r}: the groups must name exactly the tools judged relevant "
                f"in this split (mismatch: {odd})",
                path=path,
                field=where,
            )
        if gold:
            groups[query.id] = {str(tool): str(label) for tool, label in labels.items()}
        kept.append(Query(query.id, query.text, query.style, meta))
    return kept, groups


def read_beir(src: str | Path, *, split: str = "test", name: str | None = None) -> BeirImport:
    """Read a BEIR folder into a :class:`Dataset` (in memory; see :func:`import_beir`)."""
    folder = Path(src)
    if not folder.is_dir():
        raise CatalogError("not a BEIR folder (expected a directory)", path=folder)
    tools = _read_corpus(folder / "corpus.jsonl")
    queries = _read_queries(folder / "queries.jsonl")
    qrels_dir = folder / "qrels"
    splits = sorted(p.stem for p in qrels_dir.glob("*.tsv")) if qrels_dir.is_dir() else []
    if split not in splits:
        available = ", ".join(splits) or "none"
        raise CatalogError(
            f"no qrels for split {split!r} (qrels/{split}.tsv); splits found: {available}",
            path=qrels_dir,
        )
    query_ids = {q.id for q in queries}
    doc_ids = {t.name for t in tools}
    per_split = {
        s: read_qrels(qrels_dir / f"{s}.tsv", query_ids, doc_ids, _BEIR_LAYOUT).grades
        for s in splits
    }
    chosen = per_split[split]
    judged_anywhere = {qid for judged in per_split.values() for qid in judged}
    kept = [q for q in queries if q.id in chosen or q.id not in judged_anywhere]
    qrels, _ = QrelsTable(chosen, {}).positive()
    kept, groups = _groups_from_metadata(kept, qrels, folder / "queries.jsonl")
    dataset = Dataset(name or folder.resolve().name, tools, kept, qrels, None, groups)
    return BeirImport(dataset, split, len(queries) - len(kept))


def import_beir(
    src: str | Path,
    dst: str | Path,
    *,
    split: str = "test",
    force: bool = False,
) -> BeirImport:
    """Convert the BEIR folder ``src`` into the toolsearch dataset folder ``dst``."""
    read = read_beir(src, split=split, name=Path(dst).name)
    written = write_dataset(read.dataset, dst, force=force)
    return BeirImport(written, split, read.excluded_queries)


# --------------------------------------------------------------------------- export


def export_beir(
    dataset: Dataset | str | Path,
    dst: str | Path,
    *,
    split: str = "test",
    force: bool = False,
) -> Path:
    """Write ``dataset`` (or the dataset folder at that path) as the BEIR folder ``dst``."""
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    if not split or "/" in split or split.startswith("."):
        raise CatalogError(f"invalid split name {split!r}")
    folder = Path(dst)
    _check_target(folder, _BEIR_FILES, force)
    try:
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CatalogError(f"cannot create folder: {exc.strerror or exc}", path=folder) from exc
    corpus = []
    for tool in data.tools:
        fields = tool.to_dict()
        fields.pop("name", None)
        description = fields.pop("description", "")
        record: dict[str, Any] = {"_id": tool.name, "title": tool.name, "text": description}
        if fields:
            record["metadata"] = fields
        corpus.append(_dumps(record))
    _write_lines(folder / "corpus.jsonl", corpus)
    query_lines = []
    for query in data.queries:
        meta = dict(query.metadata)
        if query.style is not None:
            meta["style"] = query.style
        if query.id in data.qrel_groups:
            meta[GROUPS_KEY] = dict(data.qrel_groups[query.id])
        entry: dict[str, Any] = {"_id": query.id, "text": query.text}
        if meta:
            entry["metadata"] = meta
        query_lines.append(_dumps(entry))
    _write_lines(folder / "queries.jsonl", query_lines)
    rows = ["\t".join(BEIR_QRELS_HEADER)]
    for query in data.queries:
        for tool_name, grade in data.qrels.get(query.id, {}).items():
            rows.append(f"{query.id}\t{tool_name}\t{grade}")
    _write_lines(folder / "qrels" / f"{split}.tsv", rows)
    return folder
