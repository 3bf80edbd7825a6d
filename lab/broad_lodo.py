"""Leave-one-out evidence for the broadly trained model, and how well it tells siblings apart.

    python -m lab.broad_lodo --out lab/results/broad_lodo.json

For each group of :data:`broad_model.FOLDS`, a model trained without that group's sources
(:func:`broad_model.fold_model`: smaller budget, one pass) and its soup
(:func:`broad_model.fold_soup`) are scored on the **test** split of each source they never saw,
against the untuned all-MiniLM-L6-v2 (``base``) and the shipped model (``previous``, trained on
the dev requests of mcp-workbench, metatool and bfcl; read from the git history at
:data:`PREVIOUS_COMMIT`, so the table stays reproducible once it is replaced) — for those three,
against its recipe trained without the dataset instead (``previous unseen``). ranx paired
t-tests, p < 0.05, no correction. The candidates trained on every source (``broad`` at one
budget for all, ``combined`` with the shipped model's own three samples unchanged, and their
``soup`` with the three-dataset model) are scored on every test split too: in-domain for all
(their dev halves were trained on). Rankings are cached on disk by model and sample
(``$TOOLSEARCH_CACHE_DIR/lodo_runs``).

**Siblings**: among a test split's queries whose gold tool has siblings (other tools of its
server or API, :func:`toolsearch.backends.fine_tuning.sibling_group`), hit@1 of each model.
Rankings are the ``embedding`` backend's (cosine over the embedded tool text, float32).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path
from typing import Any

from lab import tuned_models
from lab.broad_model import (
    FOLD_PER_SOURCE,
    FOLDS,
    PER_SOURCE,
    SOURCES,
    broad_candidate,
    combined_candidate,
    fold_model,
    fold_soup,
    soup_candidate,
)
from lab.fine_tune import ranked
from lab.member_runs import DATASETS, DEPTH, Sample, load_sample
from lab.tuned_models import RECIPE, base_path
from toolsearch.backends.embedding import default_cache_dir
from toolsearch.backends.encoders import model_fingerprint
from toolsearch.backends.fine_tuning import load_trainable, sibling_group
from toolsearch.bench.metrics import parse_metrics, per_query_scores
from toolsearch.bench.significance import compare_backends

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "broad_lodo.json"
METRICS = ("ndcg@10", "recall@5", "hit@1")
LIMIT = 1000
#: The last commit whose shipped model was trained on three datasets only.
PREVIOUS_COMMIT = "f453b4f1d8ac15581d9d91fbeb29f5cfe18d6fa1"
MODEL_DIR = "toolsearch/models/toolsearch-minilm-l6"

#: Models trained on every source: at the same budget for each, with the shipped model's
#: three samples unchanged (``broad_model.combined_candidate``), and the soup of that one with
#: the three-dataset model (``broad_model.soup_candidate``).
CANDIDATES = ("broad", "combined", "soup")
#: What each fold's left-out datasets are scored with, besides base and previous.
FOLD_MODELS = ("fold", "fold soup")
#: What a fold is compared with: the shipped model, or its recipe without the left-out dataset.
UNSEEN = "previous unseen"

Runs = dict[str, dict[str, list[str]]]


def previous_model() -> Path:
    """The model shipped at :data:`PREVIOUS_COMMIT`, extracted from git into the cache."""
    folder = Path(default_cache_dir()) / "fine_tuned" / f"previous-{PREVIOUS_COMMIT[:12]}"
    if not (folder / "model.safetensors").is_file():
        archive = subprocess.run(
            ["git", "archive", "--format=tar", PREVIOUS_COMMIT, MODEL_DIR],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    target = folder / Path(member.name).relative_to(MODEL_DIR)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    target.write_bytes(extracted.read())
    return folder


def model_runs(path: Path, samples: dict[str, Sample]) -> dict[str, dict[str, list[str]]]:
    """The ranking of the model at ``path`` for each sample, cached on disk by the model's
    fingerprint and the sample's key (encoding every test catalogue takes minutes)."""
    folder = Path(default_cache_dir()) / "lodo_runs"
    folder.mkdir(parents=True, exist_ok=True)
    model, out, fingerprint = None, {}, model_fingerprint(path)
    for name, sample in samples.items():
        file = folder / f"{fingerprint}-{name}-{sample.key(LIMIT)}.json"
        if not file.is_file():
            model = model or load_trainable(path, RECIPE)
            file.write_text(json.dumps(ranked(model, sample)), encoding="utf-8")
        out[name] = json.loads(file.read_text(encoding="utf-8"))
    return out


def scored(sample: Sample, runs: Runs, against: str) -> dict[str, Any]:
    """Means of every run, and the paired tests of ``against`` with each other run."""
    metrics = parse_metrics(METRICS)
    qrels = sample.qrels
    means = {}
    for name, run in runs.items():
        per_query = per_query_scores(qrels, run, metrics, groups=sample.groups)
        means[name] = {m: round(sum(per_query[m].values()) / len(qrels), 4) for m in METRICS}
    tests = compare_backends(
        qrels, runs, metrics, depth=DEPTH, groups=sample.groups, correction="none"
    )
    versus: dict[str, dict[str, Any]] = {}
    for t in tests.pairs:
        if against in (t.a, t.b):
            other = t.b if t.a == against else t.a
            versus.setdefault(other, {})[t.metric] = {
                "p": round(t.p_value, 6),
                "significant": t.significant,
            }
    return {"means": means, "versus": versus, "queries": len(qrels)}


def sibling_queries(sample: Sample) -> list[str]:
    """Ids of ``sample``'s one-tool queries whose gold tool has a sibling in the catalogue."""
    size: dict[str, int] = {}
    group_of = {}
    for tool in sample.dataset.tools:
        group_of[tool.name] = group = sibling_group(tool)
        if group:
            size[group] = size.get(group, 0) + 1
    out = []
    for qid, gold in sample.qrels.items():
        names = [n for n, g in gold.items() if g > 0]
        group = group_of.get(names[0]) if len(names) == 1 else None
        if group and size[group] > 1:
            out.append(qid)
    return out


def siblings(sample: Sample, runs: Runs) -> dict[str, Any]:
    """hit@1 of each run among :func:`sibling_queries`."""
    ids = sibling_queries(sample)
    if not ids:
        return {"queries": 0}
    out: dict[str, Any] = {"queries": len(ids)}
    for name, run in runs.items():
        hits = sum(run[q][0] in sample.qrels[q] for q in ids if run[q])
        out[name] = round(hits / len(ids), 4)
    return out


def measure(limit: int = LIMIT) -> dict[str, Any]:
    """Every fold's left-out scores, the broad models' in-domain scores, and siblings."""
    models = {
        "base": base_path(),
        "previous": previous_model(),
        "broad": broad_candidate(),
        "combined": combined_candidate(),
        "soup": soup_candidate(),
    }
    test = {name: load_sample(name, "test", limit) for name in SOURCES}
    by_model = {m: model_runs(path, test) for m, path in models.items()}
    runs = {name: {m: by_model[m][name] for m in models} for name in test}
    folds: dict[str, Any] = {}
    for fold, left_out in FOLDS.items():
        path = fold_model(fold)
        unseen = {name: test[name] for name in left_out}
        for label, folder in zip(FOLD_MODELS, (path, fold_soup(fold)), strict=True):
            for name, run in model_runs(folder, unseen).items():
                runs[name][label] = run
        for name in left_out:
            runs[name][UNSEEN] = _unseen_previous(name, test[name], runs[name]["previous"])
        training = json.loads((path / "toolsearch-training.json").read_text(encoding="utf-8"))
        folds[fold] = {
            "left_out": list(left_out),
            "training": {k: training[k] for k in ("pairs", "steps", "seconds", "requests")},
            "test": {
                name: {
                    label: scored(
                        test[name], {m: runs[name][m] for m in ("base", UNSEEN, label)}, label
                    )
                    for label in FOLD_MODELS
                }
                for name in left_out
            },
        }
    in_domain = {
        name: {
            candidate: scored(
                test[name],
                {m: runs[name][m] for m in ("base", "previous", candidate)},
                candidate,
            )
            for candidate in CANDIDATES
        }
        for name in test
    }
    return {
        "benchmark": "broad_lodo",
        "limit": limit,
        "fold_per_source": FOLD_PER_SOURCE,
        "previous_commit": PREVIOUS_COMMIT,
        "folds": folds,
        "in_domain": in_domain,
        "siblings": {name: siblings(test[name], runs[name]) for name in test},
    }


def _unseen_previous(
    name: str, sample: Sample, previous: dict[str, list[str]]
) -> dict[str, list[str]]:
    """The shipped model's ranking of ``sample`` if it never saw ``name``, else the ranking of
    its recipe trained without ``name`` (``tuned_models.fold_model``): a fold is compared with
    a model that never saw the dataset either."""
    if name not in DATASETS:
        return previous
    return model_runs(tuned_models.fold_model(name), {name: sample})[name]


#: The marks after a fold's value: it differs from base (†) or from previous unseen (*).
FOLD_MARKS = (("base", "†"), (UNSEEN, "*"))
#: The mark after a candidate's value: it differs from previous.
CANDIDATE_MARKS = (("previous", "*"),)


def _cell(
    result: dict[str, Any], metric: str, labels: tuple[str, ...], marks: tuple[tuple[str, str], ...]
) -> str:
    """base / the reference / each of ``labels``, each label's value followed by its
    ``marks`` (the runs it differs from, paired t-test); the reference is the last mark's."""
    first = result[labels[0]]["means"]
    values = [f"{first[n][metric]:.3f}" for n in ("base", marks[-1][0])]
    for label in labels:
        got = result[label]
        signs = "".join(m for other, m in marks if got["versus"][other][metric]["significant"])
        values.append(f"{got['means'][label][metric]:.3f}{signs}")
    return " / ".join(values)


def markdown(data: dict[str, Any]) -> str:
    """The leave-one-out table and the in-domain table."""
    lines = [
        "| fold left out | dataset (test) | queries | ndcg@10 base / previous unseen / fold "
        "/ fold soup "
        "| recall@5 | hit@1 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for fold, got in data["folds"].items():
        for name, result in got["test"].items():
            cells = " | ".join(_cell(result, m, FOLD_MODELS, FOLD_MARKS) for m in METRICS)
            queries = result[FOLD_MODELS[0]]["queries"]
            lines.append(f"| {fold} | {name} | {queries} | {cells} |")
    lines += [
        "",
        "The `embedding` backend's ranking (float32 cosine), at most "
        f"{data['limit']} test queries a dataset; no model in a row saw its dataset. `base`: "
        "all-MiniLM-L6-v2 untuned; `previous unseen`: the shipped model (dev requests of "
        "mcp-workbench, metatool, bfcl), and for those three its recipe trained without the "
        "dataset (`lab.tuned_models`); `fold`: "
        "trained by `lab.broad_model`'s recipe without the fold's datasets, at the fold budget "
        f"(at most {data['fold_per_source']} pairs a dataset, one pass); `fold soup`: the "
        "uniform average of `fold` and the three-dataset model trained without the fold's "
        "bundled dataset (the shipped model where the fold has none). After a value, `†`: it "
        "differs from base, `*`: from previous unseen (paired t-test, p < 0.05).",
        "",
        "| dataset (test) | queries | ndcg@10 base / previous / broad / combined / soup "
        "| recall@5 | hit@1 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, result in data["in_domain"].items():
        cells = " | ".join(_cell(result, m, CANDIDATES, CANDIDATE_MARKS) for m in METRICS)
        lines.append(f"| {name} | {result['broad']['queries']} | {cells} |")
    lines += [
        "",
        "`broad`: the model trained on the dev requests of every dataset, at most "
        f"{PER_SOURCE} pairs each; `combined`: the shipped model's own training requests unchanged "
        "plus the other eight datasets at that budget; `soup`: the uniform average of the "
        "weights of `combined` and the three-dataset model (in-domain here, for all three). "
        "After each candidate's value, `*`: it differs from previous (paired t-test, p < 0.05).",
    ]
    return "\n".join(lines)


def sibling_markdown(data: dict[str, Any]) -> str:
    """hit@1 among queries whose one gold tool has same-server siblings."""
    lines = [
        "| dataset (test) | queries with siblings | hit@1 base | previous | broad | combined "
        "| soup | previous unseen | fold | fold soup |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, got in data["siblings"].items():
        if got["queries"]:
            columns = ("base", "previous", *CANDIDATES, UNSEEN, *FOLD_MODELS)
            values = " | ".join(f"{got[m]:.3f}" if m in got else "-" for m in columns)
            lines.append(f"| {name} | {got['queries']} | {values} |")
    lines += [
        "",
        "Queries with one gold tool whose server or API (the `server` field, else the part of "
        "a dotted name before the dot) has other tools in the catalogue; `previous unseen`, "
        "`fold` and `fold soup`: models that never saw the dataset.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--limit", type=int, default=LIMIT)
    args = parser.parse_args(argv)
    data = measure(args.limit)
    args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(markdown(data))
    print()
    print(sibling_markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
