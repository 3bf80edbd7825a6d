"""Apply mcp-workbench's labelling rules to its files, and print the counts its README shows.

``python datasets/mcp-workbench/relabel.py`` rewrites ``queries.jsonl`` and ``qrels.tsv`` in
place, rewrites the counts in this folder's README.md and in the project README, and prints
them; ``--check`` only reports what it would change and exits 1 if anything would. The rules
(see this folder's README.md):

- a ``hard`` query shares no content word (:mod:`toolsearch.textnorm`) with the server, name
  words or description of any of its gold tools; one that does is restyled ``request``;
- ``n_tools`` is never typed in queries.jsonl: it is the number of a query's groups;
- every qrels row carries a group (4th column); a row without one becomes a group of its own.

Writing or editing the queries themselves is done by hand; this script only enforces the rules
that follow mechanically from the text and labels, so they can never drift from the files.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolsearch.catalog import load_catalog, parse_jsonl
from toolsearch.dataset import read_qrels as read_qrels_table
from toolsearch.errors import CatalogError
from toolsearch.textnorm import shared_words
from toolsearch.tool import Tool

HERE = Path(__file__).resolve().parent
QRELS_HEADER = "query-id\ttool-name\tscore\tgroup"
STYLES = ("keywords", "request", "hard", "task", "negative")
COUNTS_START = "<!-- counts: written by relabel.py -->"
COUNTS_END = "<!-- /counts -->"


@dataclass(frozen=True)
class Judgement:
    """One qrels row: ``tool`` answers ``query``; rows of a query with one ``group`` are
    alternatives."""

    query: str
    tool: str
    score: int
    group: str


def read_queries(path: Path) -> list[dict[str, Any]]:
    """The query objects of a queries.jsonl file, in file order (a bad line is an error naming
    the file and line)."""
    queries: list[dict[str, Any]] = []
    for line, data in parse_jsonl(path):
        if not isinstance(data, dict):
            raise CatalogError("a query must be a JSON object", path=path, line=line)
        queries.append(data)
    return queries


def read_qrels(
    path: Path, queries: list[dict[str, Any]], tools: dict[str, Tool]
) -> list[Judgement]:
    """The rows of qrels.tsv, read and validated by the dataset loader, in file order; a row
    without a group (a 3-column file) gets a group of its own."""
    table = read_qrels_table(path, {q["id"] for q in queries}, tools.keys())
    return [
        Judgement(qid, tool, score, table.groups.get(qid, {}).get(tool, f"={tool}"))
        for qid, gold in table.grades.items()
        for tool, score in gold.items()
    ]


def gold_tools(qrels: list[Judgement]) -> dict[str, list[str]]:
    """Each labelled query's gold tool names (positive score), in file order; a score of 0
    judges a tool irrelevant, as the dataset loader reads it."""
    gold: dict[str, list[str]] = defaultdict(list)
    for row in qrels:
        if row.score > 0:
            gold[row.query].append(row.tool)
    return gold


def numbered_groups(qrels: list[Judgement]) -> list[Judgement]:
    """Rows with each query's groups renumbered 1, 2, ... in first-seen order."""
    numbers: dict[str, dict[str, int]] = defaultdict(dict)
    renumbered: list[Judgement] = []
    for row in qrels:
        seen = numbers[row.query]
        number = seen.setdefault(row.group, len(seen) + 1)
        renumbered.append(Judgement(row.query, row.tool, row.score, str(number)))
    return renumbered


def relabel(
    queries: list[dict[str, Any]], qrels: list[Judgement], tools: dict[str, Tool]
) -> list[str]:
    """Apply the rules in place on ``queries``; returns one line per change made."""
    gold = gold_tools(qrels)
    changes: list[str] = []
    for query in queries:
        if query.pop("n_tools", None) is not None:
            changes.append(f"{query['id']}: n_tools removed (derived from the groups)")
        if query.get("style") == "hard":
            gold_of = [tools[name] for name in gold.get(query["id"], [])]
            shared = shared_words(query["text"], gold_of)
            if shared:
                query["style"] = "request"
                changes.append(f"{query['id']}: hard -> request (shares {sorted(shared)})")
    return changes


def counts(queries: list[dict[str, Any]], qrels: list[Judgement]) -> dict[str, Any]:
    """The figures the README quotes, computed from the files."""
    groups: dict[str, set[str]] = defaultdict(set)
    tools_of: dict[str, set[str]] = defaultdict(set)
    for row in qrels:
        if row.score <= 0:
            continue  # judged irrelevant: not gold, no group (as the dataset loader reads it)
        groups[row.query].add(row.group)
        tools_of[row.query].add(row.tool)
    positives = [q["id"] for q in queries if q["id"] in groups]
    return {
        "queries": len(queries),
        "styles": dict(Counter(q.get("style") for q in queries)),
        "positives": len(positives),
        "multi_group": sum(len(groups[q]) >= 2 for q in positives),
        "with_alternatives": sum(len(tools_of[q]) > len(groups[q]) for q in positives),
        "qrels_rows": len(qrels),
    }


def _n(number: int) -> str:
    return f"{number:,}"


def counts_markdown(figures: dict[str, Any]) -> dict[str, str]:
    """The counts blocks of this folder's README and of the project README."""
    styles = figures["styles"]
    by_style = ", ".join(f"{_n(styles.get(style, 0))} `{style}`" for style in STYLES)
    share = 100 * figures["multi_group"] / max(figures["positives"], 1)
    negatives = styles.get("negative", 0)
    dataset_lines = (
        f"- **Queries: {_n(figures['queries'])}** ({_n(figures['positives'])} positive, "
        f"{_n(negatives)} negative): {by_style}.",
        f"- {_n(figures['multi_group'])} positive queries ({share:.1f} %) need tools from two or "
        f"more groups; {_n(figures['with_alternatives'])} have a group of two or more "
        f"alternative tools. {_n(figures['qrels_rows'])} qrels rows.",
    )
    project = (
        f"{_n(figures['queries'])} hand-written queries: {by_style}; "
        f"{share:.1f} % of positives need tools from two or more groups, "
        f"{_n(figures['with_alternatives'])} list alternative tools."
    )
    dataset = "".join(_wrapped(line, "  ") for line in dataset_lines)
    return {"README.md": dataset, "../../README.md": _wrapped(project, "  ", "  ")}


def _wrapped(text: str, indent: str, first: str = "") -> str:
    return textwrap.fill(text, 99, initial_indent=first, subsequent_indent=indent) + "\n"


def _with_block(text: str, block: str, path: Path) -> str:
    """``text`` with the lines between the counts markers replaced by ``block``."""
    start, end = text.find(COUNTS_START), text.find(COUNTS_END)
    if start < 0 or end < start:
        raise ValueError(f"{path}: no {COUNTS_START!r} ... {COUNTS_END!r} block to update")
    end_line = text.rfind("\n", 0, end) + 1  # the end marker's line keeps its indentation
    return f"{text[: start + len(COUNTS_START)]}\n{block}{text[end_line:]}"


def render(queries: list[dict[str, Any]], qrels: list[Judgement]) -> dict[str, str]:
    """The text of queries.jsonl, qrels.tsv (groups numbered) and the two READMEs' counts
    blocks for these contents, keyed by path relative to this folder."""
    lines = [json.dumps(query, ensure_ascii=False) for query in queries]
    rows = [f"{r.query}\t{r.tool}\t{r.score}\t{r.group}" for r in numbered_groups(qrels)]
    files = {
        "queries.jsonl": "\n".join(lines) + "\n",
        "qrels.tsv": "\n".join([QRELS_HEADER, *rows]) + "\n",
    }
    for name, block in counts_markdown(counts(queries, qrels)).items():
        path = HERE / name
        files[name] = _with_block(path.read_text(encoding="utf-8"), block, path)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="report changes, write nothing")
    args = parser.parse_args(argv)
    tools = {tool.name: tool for tool in load_catalog(HERE / "tools.jsonl")}
    queries = read_queries(HERE / "queries.jsonl")
    qrels = read_qrels(HERE / "qrels.tsv", queries, tools)
    changes = relabel(queries, qrels, tools)
    for filename, text in render(queries, qrels).items():
        if (HERE / filename).read_text(encoding="utf-8") != text:
            changes.append(f"{filename}: rewritten in canonical form")
            if not args.check:
                (HERE / filename).write_text(text, encoding="utf-8")
    for change in changes:
        print(change)
    print(json.dumps(counts(queries, qrels), indent=2))
    return 1 if args.check and changes else 0


if __name__ == "__main__":
    sys.exit(main())
