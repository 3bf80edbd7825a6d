"""mcp-workbench with the server names of a real MCP registry: is Okta found when its server is
called ``okta-mcp-server``?

    python -m lab.server_names --out lab/results/server_names.json

Real registries name many servers by their packaging as well as their service: in the Docker
MCP registry's catalogue (``../shared/datasets/mcp-docker-catalog``) 16 of 28 server names carry
``mcp``, ``server`` or ``remote`` (``<service>-mcp-server``, ``<service>-mcp``,
``<service>-remote``), and the reference servers of the protocol are published as
``mcp-server-<service>``. mcp-workbench names each server by its
service alone. Here every mcp-workbench server is renamed to one of those four forms in turn
(servers in sorted order), its tools' ``mcp__`` names with it, and the same queries are
searched three ways by the default backend (replayed over cached member rankings, as
``ablation.py`` does):

- **original names**: the bundled catalogue;
- **registry names**: the renamed catalogue, read as the default reads it (the packaging words
  of :data:`toolsearch.tokenize.GENERIC_SERVER_WORDS` are no server words, nor embedded name
  words);
- **registry names, packaging words kept**: the same with that set empty, as toolsearch read
  server names before (the server bonus then needs "mcp" and "server" in the request, the name
  match and the lexical members count them, the embedding reads "okta mcp server list users").

Dev split with the fold model that never saw mcp-workbench (``tuned_models.py``); test split
with the shipped model and with that fold model (a catalogue the model never saw, as a user's).
Paired t-tests (ranx, p < 0.05): registry names against packaging words kept, and against the
original names.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

from lab import ablation
from lab.member_runs import MemberSpec, Sample, load_sample
from lab.tuned_models import LIMIT
from toolsearch.backend import Hit
from toolsearch.tool import MCP_PREFIX

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "server_names.json"
#: Server names as registries write them, given to mcp-workbench's servers in turn.
FORMS = ("{}-mcp-server", "{}-mcp", "{}-remote", "mcp-server-{}")
ORIGINAL = "original names"
REGISTRY = "registry names"
KEPT = "registry names, packaging words kept"
#: (split, model): dev with the fold model; test with the shipped and the fold model.
RUNS = (("dev", "fold"), ("test", "shipped"), ("test", "fold"))
GROUPS = ("all", "keywords", "request", "hard", "task", "multi-tool")
#: A ranking per query id.
Run = dict[str, list[Hit]]


def registry_names(servers: Sequence[str]) -> dict[str, str]:
    """Each server's registry-style name: the :data:`FORMS` in turn over the sorted servers."""
    return {s: FORMS[i % len(FORMS)].format(s) for i, s in enumerate(sorted(set(servers)))}


def rename(tool: str, new: Mapping[str, str]) -> str:
    """``mcp__<server>__<tool>`` with its server renamed by ``new`` (other names unchanged)."""
    server, sep, rest = tool.removeprefix(MCP_PREFIX).partition("__")
    if not tool.startswith(MCP_PREFIX) or not sep:
        return tool
    return f"{MCP_PREFIX}{new.get(server, server)}__{rest}"


def renamed(sample: Sample) -> tuple[Sample, dict[str, str]]:
    """``sample`` with every server renamed by :func:`registry_names` (tools, gold tools and
    their groups), and the renaming."""
    dataset = sample.dataset
    new = registry_names([t.server for t in dataset.tools if t.server])
    tools = [
        replace(
            t, name=rename(t.name, new), server=new.get(t.server, t.server) if t.server else None
        )
        for t in dataset.tools
    ]
    qrels = {q: {rename(n, new): g for n, g in gold.items()} for q, gold in dataset.qrels.items()}
    groups = {
        q: {rename(n, new): g for n, g in labels.items()}
        for q, labels in dataset.qrel_groups.items()
    }
    registry = replace(
        dataset,
        name="mcp-workbench-registry",
        tools=tools,
        qrels=qrels,
        qrel_groups=groups,
        path=None,
    )
    return Sample(registry, sample.split, sample.queries), new


@contextmanager
def packaging_words_kept() -> Iterator[None]:
    """Read server names with no packaging words dropped (the rule switched off)."""
    with mock.patch("toolsearch.tokenize.GENERIC_SERVER_WORDS", frozenset()):
        yield


def members(split: str, model: str, tag: str = "") -> dict[str, MemberSpec]:
    """The default's members (embedding: the shipped or the fold model); ``tag`` keeps the
    cached rankings of the packaging-words-kept reading apart (same options, other texts)."""
    found = ablation.members_for("mcp-workbench", split, LIMIT, fold=model == "fold")
    used = {m: s for m, s in found.items() if m == "embedding" or m in ablation.LEXICAL_SHARES}
    return {m: replace(s, label=s.label + tag) for m, s in used.items()}


def replay(
    split: str, model: str, cache: Path
) -> tuple[ablation.Data, dict[str, Any], dict[str, Run]]:
    """The renamed sample's data, and each reading's scores and default rankings (the original
    names' rankings renamed, so every reading is scored against the same gold names)."""
    variant = ablation.shipped_variant()
    base = load_sample("mcp-workbench", split, LIMIT)
    registry, new = renamed(base)
    data = {
        ORIGINAL: ablation.sample_data(base, members(split, model), LIMIT, cache),
        REGISTRY: ablation.sample_data(registry, members(split, model), LIMIT, cache),
    }
    with packaging_words_kept():
        kept = members(split, model, ".packaging-kept")
        data[KEPT] = ablation.sample_data(registry, kept, LIMIT, cache)
    runs = {reading: ablation.rank(d, variant) for reading, d in data.items()}
    scores = {reading: ablation.scores(data[reading], run) for reading, run in runs.items()}
    runs[ORIGINAL] = {
        q: [Hit(rename(h.name, new), h.score) for h in hits] for q, hits in runs[ORIGINAL].items()
    }
    return data[REGISTRY], scores, runs


def measure(cache: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split, model in RUNS:
        data, scores, runs = replay(split, model, cache)
        out[f"{split}, {model} model"] = {
            "scores": scores,
            "against_kept": ablation.significance(data, runs, KEPT)[REGISTRY],
            "against_original": ablation.significance(data, runs, ORIGINAL)[REGISTRY],
        }
        summary = ", ".join(f"{r} {s['all']['ndcg@10']:.4f}" for r, s in scores.items())
        ablation.log(f"{split} ({model} model) ndcg@10: {summary}")
    return out


def markdown(data: Mapping[str, Any]) -> str:
    """Rows: run x reading; columns: ndcg@10 over all queries and recall@5 per group."""
    lines = ablation.score_columns(("split, model", "server names"), GROUPS)
    for run, result in data["results"].items():
        for reading, got in result["scores"].items():
            marks = {}
            if reading == REGISTRY:
                marks = {
                    m: ablation.significance_mark(result["against_kept"], m)
                    + ("†" if ablation.significance_mark(result["against_original"], m) else "")
                    for m in ("ndcg@10", "recall@5")
                }
            cells = ablation.score_cells(got, GROUPS, marks)
            lines.append(f"| {run} | {reading} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "`*`: registry names differ from the same names with the packaging words kept; `†`: "
        "from the original names (ranx paired t-test, p < 0.05, on all labelled queries, "
        f"ndcg@10 and recall@5). mcp-workbench, {data['queries']} queries a split; server "
        "forms " + ", ".join(f"`{f.format('<service>')}`" for f in FORMS) + " in turn.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return ablation.replay_script(
        argv,
        __doc__,
        OUT,
        lambda cache: {
            "queries": LIMIT,
            "forms": list(FORMS),
            "results": measure(cache),
        },
        markdown,
    )


if __name__ == "__main__":
    raise SystemExit(main())
