"""The default's action bonus beyond the ablation's datasets: which tools it reaches, and what it
does on catalogues the model never saw.

    python -m lab.action_agreement      # writes lab/results/action_agreement.json

``lab/ablation.py`` chooses the bonus's weight on its dev sets. Two questions are left:

* **Scope** (dev splits): the bonus for every tool whose name agrees with the request, or only
  for tools with a server (the default: the bonus is there to tell a server's tools apart).
  Scored on twelve dev sets: mcp-workbench, MetaTool and BFCL with the fold model that never
  saw each, mcp-workbench inside 10,000 tools, and the eight other public datasets of
  ``lab.broad_model.SOURCES`` with the shipped model, which never trained on them.
* **Effect** (test splits): the default against itself without the bonus on mcp-workbench
  (with the shipped model, and with the fold model that never saw it) and on those eight
  datasets — catalogues the shipped model never saw, as a user's are — with hit@1 among the
  queries whose one gold tool has same-server siblings (``lab.broad_lodo.sibling_queries``).

Every variant replays the cached member rankings of the default's three members through
:class:`toolsearch.fusion.Fuser` (``lab/ablation.py``); ranx paired t-tests against the
default without the bonus, p < 0.05.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lab.ablation import (
    LARGE,
    LEXICAL_SHARES,
    OBJECTIVE,
    Data,
    Variant,
    load_data,
    load_large,
    members_for,
    rank,
    replay_script,
    sample_data,
    scores,
    shipped_variant,
    significance,
)
from lab.broad_lodo import sibling_queries
from lab.broad_model import SOURCES
from lab.member_runs import DATASETS, load_sample
from toolsearch.backend import Hit
from toolsearch.fusion import Fuser, NameWords

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "action_agreement.json"
LIMIT = 1000
#: The public datasets the ablation does not choose on (the shipped model never trained on them).
OTHERS = tuple(name for name in SOURCES if name not in DATASETS)
METRICS = ("ndcg@10", "recall@5", "hit@1")
NONE, EVERY, DEFAULT = "no action bonus", "every tool", "tools with a server (default)"
#: mcp-workbench's test split scored with the fold model that never saw mcp-workbench.
UNSEEN_MCP = "mcp-workbench, unseen"


@dataclass(frozen=True)
class EveryToolFuser(Fuser):
    """The default's fusion with the action bonus for every tool, with a server or not."""

    def _action(self, found: NameWords | None, wanted: frozenset[str]) -> float:
        return self.action_bonus if found is not None and found.actions & wanted else 0.0


def variants() -> dict[str, Variant]:
    """The default without the bonus, with it for every tool, and as it ships."""
    default = shipped_variant()
    fields = {name: getattr(default.fuser, name) for name in Fuser.__dataclass_fields__}
    return {
        NONE: replace(default, name=NONE, fuser=replace(default.fuser, action_bonus=0.0)),
        EVERY: replace(default, name=EVERY, fuser=EveryToolFuser(**fields)),
        DEFAULT: replace(default, name=DEFAULT),
    }


def public_data(name: str, split: str, cache: Path) -> Data:
    """``name``'s ``split`` with the default's members as they ship (shipped model)."""
    members = members_for(name, split, LIMIT, fold=False)
    kept = {m: spec for m, spec in members.items() if m == "embedding" or m in LEXICAL_SHARES}
    return sample_data(load_sample(name, split, LIMIT), kept, LIMIT, cache)


def dev_sets(cache: Path) -> dict[str, Data]:
    """The twelve dev sets of the scope question (see the module docstring)."""
    sets = {name: load_data(name, "dev", LIMIT, cache) for name in DATASETS}
    sets[LARGE] = load_large("dev", LIMIT, cache)
    return sets | {name: public_data(name, "dev", cache) for name in OTHERS}


def test_sets(cache: Path) -> dict[str, Data]:
    """mcp-workbench's test split with the shipped model and with the fold model that never saw
    it (as a new MCP catalogue), and the eight public test splits."""
    sets = {
        "mcp-workbench": load_data("mcp-workbench", "test", LIMIT, cache),
        UNSEEN_MCP: load_data("mcp-workbench", "test", LIMIT, cache, fold=True),
    }
    return sets | {name: public_data(name, "test", cache) for name in OTHERS}


def siblings_hit(data: Data, ranked: Mapping[str, list[Hit]]) -> dict[str, Any]:
    """hit@1 among the queries whose one gold tool has siblings: other tools of its server or
    API (``lab.broad_lodo.sibling_queries``)."""
    ids = sibling_queries(data.sample)
    if not ids:
        return {"queries": 0}
    hits = sum(bool(ranked[q]) and ranked[q][0].name in data.sample.qrels[q] for q in ids)
    return {"queries": len(ids), "hit@1": round(hits / len(ids), 4)}


def compared(data: Data, chosen: Mapping[str, Variant]) -> dict[str, Any]:
    """Scores of each variant, paired tests against :data:`NONE`, sibling hit@1."""
    runs = {name: rank(data, variant) for name, variant in chosen.items()}
    return {
        "queries": len(data.sample.qrels),
        "scores": {name: scores(data, run)["all"] for name, run in runs.items()},
        "versus_none": significance(data, runs, NONE),
        "siblings": {name: siblings_hit(data, run) for name, run in runs.items()},
    }


def measure(cache: Path) -> dict[str, Any]:
    chosen = variants()
    dev = {name: compared(data, chosen) for name, data in dev_sets(cache).items()}
    means = {
        name: round(sum(d["scores"][name][OBJECTIVE] for d in dev.values()) / len(dev), 4)
        for name in chosen
    }
    tested = {NONE: chosen[NONE], DEFAULT: chosen[DEFAULT]}
    test = {name: compared(data, tested) for name, data in test_sets(cache).items()}
    bonus = chosen[DEFAULT].fuser.action_bonus
    return {"action_bonus": bonus, "limit": LIMIT, "dev": dev, "dev_means": means, "test": test}


def _cell(result: Mapping[str, Any], name: str, metric: str) -> str:
    value = result["scores"][name][metric]
    test = result["versus_none"].get(name, {}).get(metric)
    return f"{value:.3f}{'*' if test and test['significant'] else ''}"


def markdown(data: Mapping[str, Any]) -> str:
    """The scope table (dev) and the effect table (test)."""
    lines = [
        f"| dataset (dev) | queries | {OBJECTIVE} {NONE} | {EVERY} | {DEFAULT} |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, result in data["dev"].items():
        cells = " | ".join(_cell(result, v, OBJECTIVE) for v in (NONE, EVERY, DEFAULT))
        lines.append(f"| {name} | {result['queries']} | {cells} |")
    means = data["dev_means"]
    lines.append(f"| mean | | {means[NONE]:.4f} | {means[EVERY]:.4f} | {means[DEFAULT]:.4f} |")
    lines += [
        "",
        "| dataset (test) | queries | ndcg@10 without / with | recall@5 | hit@1 "
        "| sibling queries | sibling hit@1 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, result in data["test"].items():
        cells = " | ".join(
            f"{_cell(result, NONE, m)} / {_cell(result, DEFAULT, m)}" for m in METRICS
        )
        sib = result["siblings"]
        pair = (
            f"{sib[NONE]['hit@1']:.3f} / {sib[DEFAULT]['hit@1']:.3f}"
            if sib[DEFAULT]["queries"]
            else "-"
        )
        lines.append(
            f"| {name} | {result['queries']} | {cells} | {sib[DEFAULT]['queries']} | {pair} |"
        )
    lines += [
        "",
        f"The default hybrid as it ships (its action bonus {data['action_bonus']}) replayed over "
        "cached member rankings, without abstaining. Dev: mcp-workbench, MetaTool and BFCL "
        "scored with the fold model that never saw each, the others with the shipped model, "
        "which never trained on them. Test: the shipped model, except on "
        f"`{UNSEEN_MCP}` (the fold model that never saw mcp-workbench). `*`: differs from the "
        "default without the bonus (ranx paired t-test, p < 0.05). Sibling queries: one gold "
        "tool whose server or API has other tools.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return replay_script(argv, __doc__ or "", OUT, measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
