"""The benchmark runner end to end on a fixture dataset: metrics through the real ToolSearch
path, artefacts (JSON schema, TREC files), significance, the report and the CLI."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toolsearch.backend import BaseBackend, Hit
from toolsearch.bench.artefacts import load_results, result_to_json, write_json, write_trec
from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import (
    FALSE_POSITIVE_RATE,
    Metric,
    default_metrics,
    mean,
    parse_metrics,
    per_query_scores,
)
from toolsearch.bench.report import TextTable, recall_curve, write_report
from toolsearch.bench.runner import (
    BackendSpec,
    deferred_catalog,
    installed_backends,
    resolve_dataset,
    run_benchmark,
    sample_queries,
)
from toolsearch.bench.scaling import measure_scaling, parse_sizes
from toolsearch.bench.significance import compare_backends
from toolsearch.cli import main
from toolsearch.dataset import Query, load_dataset
from toolsearch.errors import BackendError, MissingExtraError, UnknownBackendError
from toolsearch.query import ParsedQuery
from toolsearch.tool import Tool, is_deferred

TOOLS = [
    {"name": "mcp__mail__send_email", "description": "Send an email message to recipients."},
    {"name": "mcp__mail__search_inbox", "description": "Search the inbox for messages."},
    {"name": "mcp__chat__post_message", "description": "Post a message to a chat channel."},
    {"name": "mcp__calendar__create_event", "description": "Create a calendar event."},
    {"name": "mcp__files__read_file", "description": "Read a file from the drive."},
    {
        "name": "Notebook",
        "description": "Edit a notebook cell.",
        "always_load": True,
    },
]
QUERIES = [
    {"id": "k1", "text": "send email", "style": "keywords"},
    {"id": "k2", "text": "calendar event", "style": "keywords"},
    {"id": "r1", "text": "email the team and put it on the calendar", "style": "request"},
    {"id": "x1", "text": "mcp__files__read_file", "style": "request"},
    {"id": "n1", "text": "weather on mars", "style": "negative"},
    {"id": "n2", "text": "tell me a joke", "style": "negative"},
]
QRELS = [
    ("k1", "mcp__mail__send_email", 1),
    ("k2", "mcp__calendar__create_event", 1),
    ("r1", "mcp__mail__send_email", 1),
    ("r1", "mcp__calendar__create_event", 1),
    ("x1", "mcp__files__read_file", 1),
]

# What the scripted ranker returns for each query text (the engine's fast paths answer x1).
SCRIPT: Mapping[str, list[tuple[str, float]]] = {
    "send email": [("mcp__mail__search_inbox", 3.0), ("mcp__mail__send_email", 3.0)],
    "calendar event": [("mcp__calendar__create_event", 5.0)],
    "email the team and put it on the calendar": [
        ("mcp__mail__send_email", 4.0),
        ("mcp__chat__post_message", 2.0),
        ("mcp__files__read_file", 1.5),
        ("mcp__calendar__create_event", 1.0),
    ],
    "weather on mars": [("mcp__files__read_file", 0.2)],
    "tell me a joke": [("mcp__chat__post_message", 0.9)],
}


class Scripted(BaseBackend):
    """Returns the scripted ranking for a query text, restricted to indexed tools."""

    name: ClassVar[str] = "scripted"

    def __init__(self, abstain_below: float | None = None) -> None:
        super().__init__()
        self.abstain_below = abstain_below
        self.indexed: list[str] = []

    def _build(self, tools: list[Tool]) -> None:
        self.indexed = [t.name for t in tools]

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        hits = [Hit(n, s) for n, s in SCRIPT.get(query.raw, []) if n in self.indexed]
        return hits[:k]

    def params(self) -> dict[str, object]:
        return {"script": "fixture", "abstain_below": self.abstain_below}


class Reversed(Scripted):
    """The scripted ranking, worst first (a clearly different second system)."""

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        hits = super().search(query, 100)[::-1]
        return [Hit(h.name, float(len(hits) - i)) for i, h in enumerate(hits)][:k]


def write_fixture(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TOOLS))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    rows = ["query-id\ttool-name\tscore", *[f"{q}\t{t}\t{g}" for q, t, g in QRELS]]
    (folder / "qrels.tsv").write_text("\n".join(rows) + "\n")
    return folder


@pytest.fixture
def fixture_dir(tmp_path: Path) -> Path:
    return write_fixture(tmp_path / "fixture")


METRICS = [*default_metrics([1, 3, 5]), Metric(FALSE_POSITIVE_RATE)]


def _bench(fixture_dir: Path, *specs: BackendSpec, **kwargs: Any) -> Any:
    return run_benchmark([fixture_dir], list(specs), METRICS, **kwargs)


def test_metrics_through_the_full_toolsearch_path(fixture_dir: Path) -> None:
    result = _bench(fixture_dir, BackendSpec("scripted", Scripted, options={"note": "given"}))
    entry = result.datasets["fixture"]
    run = entry.backends["scripted"]
    assert entry.n_queries == 6 and entry.n_tools == 6
    assert [o.query_id for o in run.outcomes] == ["k1", "k2", "r1", "x1", "n1", "n2"]
    # x1 is a tool's exact name: answered by the engine's fast path, not the ranker
    assert run.outcomes[3].matches[0].source == "exact"
    m = run.metrics
    # recall@1: k1 0 (search_inbox first), k2 1, r1 1/2, x1 1  -> 2.5 / 4
    assert m["recall@1"] == pytest.approx(2.5 / 4)
    # recall@3: k1 1, k2 1, r1 1/2 (create_event is 4th), x1 1
    assert m["recall@3"] == pytest.approx(3.5 / 4)
    assert m["complete@3"] == pytest.approx(3 / 4)
    assert m["complete@5"] == pytest.approx(1.0)
    assert m["hit@1"] == pytest.approx(3 / 4)
    assert m["mrr@10"] == pytest.approx((0.5 + 1 + 1 + 1) / 4)
    # both negatives return a tool and there is no threshold
    assert m[FALSE_POSITIVE_RATE] == 1.0
    assert run.by_style["keywords"]["recall@1"] == pytest.approx(0.5)
    assert run.by_style["request"]["recall@1"] == pytest.approx(0.75)
    assert run.by_style["negative"] == {FALSE_POSITIVE_RATE: 1.0}
    assert set(run.latency_ms) == {"p50", "p95", "p99"}
    assert run.tokens["with_search"] < run.tokens["all_tools"] or run.tokens["all_tools"] < 500
    assert run.params["script"] == "fixture" and run.params["note"] == "given"


def test_abstention_threshold_lowers_false_positives(fixture_dir: Path) -> None:
    result = _bench(fixture_dir, BackendSpec("scripted", lambda: Scripted(abstain_below=0.5)))
    run = result.datasets["fixture"].backends["scripted"]
    assert run.abstain_below == 0.5
    assert run.metrics[FALSE_POSITIVE_RATE] == 0.5  # 0.2 abstained, 0.9 not


def test_every_tool_is_deferred() -> None:
    tools = [Tool("Read", "r", always_load=True), Tool("Edit", "e"), Tool("mcp__a__b", "x")]
    assert all(is_deferred(t) for t in deferred_catalog(tools))


def test_limit_is_a_deterministic_sample(fixture_dir: Path) -> None:
    queries = [Query(f"q{i}", "text") for i in range(50)]
    sample = sample_queries(queries, 10)
    assert len(sample) == 10
    # the same ids whatever the file order, each time kept in file order
    assert sample_queries(list(reversed(queries)), 10) == sample[::-1]
    assert sample == [q for q in queries if q in sample]
    assert sample_queries(queries, 100) == queries
    result = _bench(fixture_dir, BackendSpec("scripted", Scripted), limit=3)
    entry = result.datasets["fixture"]
    assert entry.n_queries == 3 and len(entry.backends["scripted"].outcomes) == 3


def test_datasets_by_name(
    fixture_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolsearch.datasets import BUNDLED_DIR, bundled_datasets

    for folder in bundled_datasets():
        assert resolve_dataset(Path(folder).name) == Path(BUNDLED_DIR) / Path(folder).name
    monkeypatch.setenv("TOOLSEARCH_SHARED_DATASETS", str(tmp_path))
    assert resolve_dataset("fixture") == tmp_path / "fixture"
    assert resolve_dataset(str(fixture_dir)) == fixture_dir
    with pytest.raises(BenchError, match=r"not a known name \(.*fixture"):
        resolve_dataset("fixtur")


def test_a_failing_backend_names_the_query(fixture_dir: Path) -> None:
    class Broken(Scripted):
        def search(self, query: ParsedQuery, k: int) -> list[Hit]:
            if query.raw == "calendar event":
                raise RuntimeError("boom")
            return super().search(query, k)

    with pytest.raises(BackendError, match="failed on query 'k2' of fixture: RuntimeError: boom"):
        _bench(fixture_dir, BackendSpec("broken", Broken))


def test_bad_benchmark_inputs(fixture_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UnknownBackendError, match="unknown backend 'bm52'; available:"):
        BackendSpec.registered("bm52")
    with pytest.raises(BenchError, match="dataset 'no-such-set' not found"):
        resolve_dataset("no-such-set")
    catalogue_only = tmp_path / "catalogue"
    catalogue_only.mkdir()
    (catalogue_only / "tools.jsonl").write_text(json.dumps(TOOLS[0]) + "\n")
    with pytest.raises(BenchError, match="has no queries: it is a catalogue only"):
        run_benchmark([catalogue_only], [BackendSpec("scripted", Scripted)], METRICS)
    with pytest.raises(BenchError, match="listed twice"):
        _bench(fixture_dir, BackendSpec("a", Scripted), BackendSpec("a", Scripted))
    with pytest.raises(BenchError, match="two datasets are named 'fixture'"):
        run_benchmark([fixture_dir, fixture_dir], [BackendSpec("s", Scripted)], METRICS)


def test_missing_extra_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolsearch.registry import BackendInfo

    info = BackendInfo("ghost", "x:Y", "ghost", ("ghost_module",), False, False, "")
    monkeypatch.setattr("toolsearch.bench.runner.backend_info", lambda name: info)
    monkeypatch.setattr("toolsearch.bench.runner.available_backends", lambda: ["ghost"])
    ready, skipped = installed_backends()
    assert ready == [] and "pip install 'toolsearch[ghost]'" in skipped["ghost"]
    monkeypatch.setattr(
        "toolsearch.bench.runner.load_backend",
        lambda name, **kw: (_ for _ in ()).throw(MissingExtraError(name, "ghost", ["m"])),
    )
    with pytest.raises(MissingExtraError, match=r"pip install 'toolsearch\[ghost\]'"):
        BackendSpec.registered("ghost")


def test_a_default_run_skips_a_backend_whose_server_is_not_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolsearch.registry import BackendInfo

    info = BackendInfo("pg", "x:Y", None, (), True, True, "", server_env="TS_TEST_SERVER_URL")
    monkeypatch.setattr("toolsearch.bench.runner.backend_info", lambda name: info)
    monkeypatch.setattr("toolsearch.bench.runner.available_backends", lambda: ["pg"])
    monkeypatch.delenv("TS_TEST_SERVER_URL", raising=False)
    ready, skipped = installed_backends()
    assert ready == [] and "needs a server: set $TS_TEST_SERVER_URL" in skipped["pg"]
    monkeypatch.setenv("TS_TEST_SERVER_URL", "postgresql:///x")
    assert installed_backends() == (["pg"], {})


def test_keyword_backend_from_the_registry(fixture_dir: Path) -> None:
    result = _bench(fixture_dir, BackendSpec.registered("keyword"))
    run = result.datasets["fixture"].backends["keyword"]
    assert len(run.outcomes) == 6
    assert run.outcomes[0].names[0] == "mcp__mail__send_email"
    assert run.metrics["hit@1"] > 0


def test_json_schema_exactly(fixture_dir: Path, tmp_path: Path) -> None:
    result = _bench(fixture_dir, BackendSpec("scripted", Scripted), significance_test=None)
    path = write_json(result, tmp_path / "out" / "results.json")
    data = json.loads(path.read_text())
    assert set(data) == {"toolsearch_version", "split", "datasets"}
    assert data["split"] == "all"
    entry = data["datasets"]["fixture"]
    assert set(entry) == {
        "n_queries",
        "n_positives",
        "n_negatives",
        "n_tools",
        "sha256",
        "judgements_sha256",
        "tools",
        "split",
        "style_counts",
        "significance",
        "backends",
    }
    assert entry["split"] == "all" and entry["significance"] is None
    assert (entry["n_positives"], entry["n_negatives"]) == (4, 2)
    assert entry["style_counts"]["negative"] == {"queries": 2, "positives": 0, "negatives": 2}
    assert entry["style_counts"]["request"] == {"queries": 2, "positives": 2, "negatives": 0}
    assert entry["sha256"] == load_dataset(fixture_dir).sha256()
    assert entry["judgements_sha256"] == load_dataset(fixture_dir).judgements_sha256()
    assert set(entry["tools"]) == {t["name"] for t in TOOLS}
    run = entry["backends"]["scripted"]
    assert set(run) == {
        "params",
        "metrics",
        "ci95",
        "by_style",
        "latency_ms",
        "index_seconds",
        "peak_mb",
        "tokens",
    }
    assert set(run["latency_ms"]) == {"p50", "p95", "p99"}
    assert set(run["tokens"]) == {"all_tools", "with_search"}
    assert isinstance(run["index_seconds"], float) and isinstance(run["peak_mb"], float)
    assert run["metrics"]["recall@1"] == pytest.approx(2.5 / 4)
    low, high = run["ci95"]["recall@1"]
    assert low <= run["metrics"]["recall@1"] <= high and set(run["ci95"]) == set(run["metrics"])
    assert load_results(path) == data


def test_trec_run_files_reproduce_the_metrics(fixture_dir: Path, tmp_path: Path) -> None:
    result = _bench(fixture_dir, BackendSpec("scripted", Scripted), significance_test=None)
    (trec,) = write_trec(result, tmp_path / "runs")
    assert trec.name == "fixture.scripted.trec"
    lines = trec.read_text().splitlines()
    # the scripted scores tie (3.0, 3.0): the score column still follows the rank
    assert lines[0] == "k1 Q0 mcp__mail__search_inbox 1 100 scripted"
    assert lines[1] == "k1 Q0 mcp__mail__send_email 2 99 scripted"
    assert all(len(line.split()) == 6 for line in lines)
    # Re-sorting by score (what trec_eval and ranx do) gives back the rank column's order.
    by_query: dict[str, list[tuple[float, int, str]]] = {}
    for line in lines:
        qid, _, tool, rank, score, tag = line.split()
        assert tag == "scripted"
        by_query.setdefault(qid, []).append((float(score), int(rank), tool))
    ranked = {}
    for qid, rows in by_query.items():
        rows.sort(key=lambda row: -row[0])
        assert [row[1] for row in rows] == list(range(1, len(rows) + 1))
        ranked[qid] = [row[2] for row in rows]
    entry = result.datasets["fixture"]
    assert ranked == {q: names for q, names in entry.backends["scripted"].ranked().items() if names}
    scores = per_query_scores(entry.qrels, {q: ranked.get(q, []) for q in entry.qrels}, METRICS)
    assert mean(scores["recall@1"].values()) == entry.backends["scripted"].metrics["recall@1"]


def test_significance_between_two_backends(fixture_dir: Path) -> None:
    result = _bench(
        fixture_dir, BackendSpec("scripted", Scripted), BackendSpec("reversed", Reversed)
    )
    sig = result.datasets["fixture"].significance
    assert sig is not None
    assert sig.n_queries == 4 and sig.test == "student"
    assert "paired Student's t-test" in sig.describe() and "n = 4 queries" in sig.describe()
    assert "one pair per metric, so no multiple-comparison correction applies" in sig.describe()
    assert sig.metrics == ("recall@5", "mrr@10", "ndcg@10")  # the default selection
    pair = next(p for p in sig.pairs if p.metric == "mrr@10")
    assert (pair.a, pair.b) == ("scripted", "reversed")
    assert pair.mean_a == pytest.approx(0.875) and pair.mean_b == pytest.approx(1.0)
    assert pair.delta == pytest.approx(0.125)
    assert 0 < pair.p_value < 1
    # recall@5 is 1.0 for both: identical per-query values, p = 1
    same = next(p for p in sig.pairs if p.metric == "recall@5")
    assert same.p_value == 1.0 and not same.significant


def test_identical_backends_are_not_significant(fixture_dir: Path) -> None:
    entry = _bench(fixture_dir, BackendSpec("a", Scripted), BackendSpec("b", Scripted))
    sig = entry.datasets["fixture"].significance
    assert sig is not None
    assert all(p.p_value == 1.0 and not p.significant for p in sig.pairs)
    qrels = entry.datasets["fixture"].qrels
    ranked = {n: r.ranked() for n, r in entry.datasets["fixture"].backends.items()}
    tested = parse_metrics("recall@1,hit@3")
    fisher = compare_backends(qrels, ranked, tested, test="fisher")
    assert fisher.test_name.startswith("two-sided Fisher's randomization test")
    assert fisher.n_queries == 4 and fisher.metrics == ("recall@1", "hit@3")
    with pytest.raises(BenchError, match="unknown significance test 'z'"):
        compare_backends(qrels, ranked, tested, test="z")
    with pytest.raises(BenchError, match="cannot test complete@5 for significance"):
        compare_backends(qrels, ranked, parse_metrics("recall@5,complete@5"))
    with pytest.raises(BenchError, match="at least two backends"):
        compare_backends(qrels, {"a": ranked["a"]}, tested)


def test_report_writes_markdown_and_plots(fixture_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    specs = [BackendSpec("scripted", Scripted), BackendSpec("reversed", Reversed)]
    result = run_benchmark([fixture_dir], specs, METRICS)
    entry = result.datasets["fixture"]
    curve = recall_curve(entry, "scripted", max_k=5)
    assert curve[0] == pytest.approx(2.5 / 4) and curve[-1] == pytest.approx(1.0)
    scaling = measure_scaling(
        load_dataset(fixture_dir).tools,
        entry.queries,
        specs,
        base_name="fixture",
        sizes=(10, 40),
        n_queries=3,
    )
    assert [p.size for p in scaling.points["scripted"]] == [10, 40]
    report = write_report(result, tmp_path / "report", scaling=scaling, command="toolsearch bench")
    text = report.read_text()
    assert "## fixture" in text and "| scripted |" in text
    assert "paired significance tests" in text and "n = 4 queries" in text
    assert "![recall@k on fixture](recall_fixture.png)" in text
    for name in ("recall_fixture.png", "latency_scale.png"):
        assert (tmp_path / "report" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "report" / "results.json").read_text()) == result_to_json(result)


def test_scaling_budget_skips_with_a_reason(fixture_dir: Path) -> None:
    class Slow(Scripted):
        def _build(self, tools: list[Tool]) -> None:
            import time

            time.sleep(0.05)
            super()._build(tools)

    scaling = measure_scaling(
        load_dataset(fixture_dir).tools,
        load_dataset(fixture_dir).queries,
        [BackendSpec("slow", Slow)],
        sizes=(10, 100_000, 200_000),
        n_queries=2,
        budget_seconds=1.0,
    )
    assert [p.size for p in scaling.points["slow"]] == [10]
    assert "100,000 tools: projected" in scaling.skipped["slow"][0]
    assert "skipped after a smaller size" in scaling.skipped["slow"][1]
    assert parse_sizes("10k, 1000") == (1000, 10_000)
    with pytest.raises(BenchError, match="not an integer"):
        parse_sizes("lots")


def test_text_table_transposes_for_narrow_terminals() -> None:
    table = TextTable("t", ["backend", "m1", "m2"], [["a", "1", "2"], ["b", "3", "4"]])
    flipped = table.transposed()
    assert flipped.headers == ["", "a", "b"]
    assert flipped.rows == [["m1", "1", "3"], ["m2", "2", "4"]]
    assert "| a | 1 | 2 |" in table.markdown()


# --------------------------------------------------------------------------- CLI


def test_cli_bench_writes_artefacts_and_gates(
    fixture_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "base.json"
    args = ["bench", "--dataset", str(fixture_dir), "--backend", "keyword", "--quiet"]
    assert main([*args, "--k", "1,3", "--json-out", str(out), "--run-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "fixture: retrieval quality" in printed and "recall@3" in printed
    assert (tmp_path / "fixture.keyword.trec").is_file()
    # the same run against its own baseline passes
    assert main([*args, "--k", "1,3", "--baseline", str(out), "--max-drop", "0"]) == 0
    assert "gate passed" in capsys.readouterr().out
    # a baseline better than reality fails and names the metric, dataset and backend
    data = json.loads(out.read_text())
    data["datasets"]["fixture"]["backends"]["keyword"]["metrics"]["recall@1"] += 0.2
    out.write_text(json.dumps(data))
    assert main([*args, "--k", "1,3", "--baseline", str(out), "--max-drop", "0.01"]) == 1
    assert "regression: fixture/keyword: recall@1" in capsys.readouterr().out


def test_cli_bench_option_reaches_the_hybrids_member_of_that_name(
    fixture_dir: Path, tmp_path: Path
) -> None:
    """``--option bm25.k1=…`` sets the hybrid's bm25 member too, as ``[backends.bm25]`` does
    (docs/configuration.md); it used to reach the bm25 backend alone, silently."""
    out = tmp_path / "out.json"
    only_bm25 = '--option=hybrid.members={"bm25": 1.0}'
    for backends in ("hybrid,bm25", "hybrid"):
        args = ["bench", "--dataset", str(fixture_dir), "--quiet", "--backend", backends]
        assert main([*args, only_bm25, "--option", "bm25.k1=0.5", "--json-out", str(out)]) == 0
        ran = next(iter(json.loads(out.read_text())["datasets"].values()))["backends"]
        assert ran["hybrid"]["params"]["member_params"]["bm25"]["k1"] == 0.5
        assert "bm25" not in ran or ran["bm25"]["params"]["k1"] == 0.5


def test_cli_bench_errors(
    fixture_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["bench", "--dataset", str(fixture_dir), "--quiet"]
    assert main([*base, "--metrics", "recal@5"]) == 2
    assert "unknown metric 'recal@5'" in capsys.readouterr().err
    assert main([*base, "--backend", "bm52"]) == 2
    assert "unknown backend 'bm52'" in capsys.readouterr().err
    assert main([*base, "--backend", "keyword", "--option", "keyword"]) == 2
    assert "expected BACKEND.KEY=VALUE" in capsys.readouterr().err
    assert main([*base, "--backend", "keyword", "--option", "bm25.k1=1.2"]) == 2
    assert "--option names backend(s) bm25 that are not being run" in capsys.readouterr().err
    assert main([*base, "--backend", "hybrid", "--option", "fts5.k=1"]) == 2
    assert "not being run (hybrid) or members of a hybrid" in capsys.readouterr().err
    assert main([*base, "--backend", "keyword", "--option", "keyword.nope=1"]) == 2
    assert "rejected options ['nope']" in capsys.readouterr().err
    assert main([*base, "--max-drop", "0.1"]) == 2
    assert "--max-drop needs --baseline" in capsys.readouterr().err
    assert main([*base, "--style-max-drop", "0.1"]) == 2
    assert "--style-max-drop needs --baseline" in capsys.readouterr().err
    assert main(["bench", "--dataset", str(tmp_path / "missing"), "--backend", "keyword"]) == 2
    assert "not found" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"datasets": {"fixture": {"backends": {"keyword": {"metrics": {"x@1": 1}}}}}}')
    assert main([*base, "--backend", "keyword", "--baseline", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "unknown metric 'x@1'" in err
    broken = tmp_path / "broken.json"
    broken.write_text('{"datasets": \n [}')
    assert main([*base, "--backend", "keyword", "--baseline", str(broken)]) == 2
    assert f"{broken}, line 2: invalid JSON" in capsys.readouterr().err


def test_cli_bench_lists_uninstalled_backends_as_skipped(
    fixture_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "toolsearch.bench.runner.installed_backends",
        lambda: (["keyword"], {"ghost": "not installed (missing g): pip install 'toolsearch[g]'"}),
    )
    assert main(["bench", "--dataset", str(fixture_dir), "--quiet", "--k", "1"]) == 0
    assert "skipped backend ghost: not installed (missing g): pip install 'toolsearch[g]'" in (
        capsys.readouterr().out
    )


def test_cli_bench_report(fixture_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    report = tmp_path / "report"
    args = ["bench", "--dataset", str(fixture_dir), "--backend", "keyword", "--quiet"]
    assert main([*args, "--report", str(report), "--scale-sizes", "20,50"]) == 0
    assert (report / "report.md").is_file() and (report / "latency_scale.png").is_file()


def test_holm_and_bonferroni_by_hand() -> None:
    from toolsearch.bench.significance import adjust_p_values

    p = [0.01, 0.04, 0.03]
    # Holm: sorted 0.01, 0.03, 0.04 times 3, 2, 1 → 0.03, 0.06, 0.04 → monotone 0.03, 0.06, 0.06
    assert adjust_p_values(p, "holm") == pytest.approx([0.03, 0.06, 0.06])
    assert adjust_p_values(p, "bonferroni") == pytest.approx([0.03, 0.12, 0.09])
    assert adjust_p_values(p, "none") == p
    assert adjust_p_values([0.5, 0.6], "holm") == pytest.approx([1.0, 1.0])
    with pytest.raises(BenchError, match="unknown correction 'sidak'"):
        adjust_p_values(p, "sidak")


def test_split_keeps_one_half_of_the_queries(fixture_dir: Path) -> None:
    from toolsearch.splits import split_of

    halves = {}
    for split in ("dev", "test"):
        result = _bench(fixture_dir, BackendSpec("scripted", Scripted), split=split)
        entry = result.datasets["fixture"]
        assert result.split == split and entry.split == split
        ids = [q.id for q in entry.queries]
        assert ids and all(split_of(qid) == split for qid in ids)
        halves[split] = set(ids)
    assert halves["dev"].isdisjoint(halves["test"])
    assert halves["dev"] | halves["test"] == {q["id"] for q in QUERIES}
    with pytest.raises(BenchError, match="unknown split 'train'; choose from dev, test, all"):
        _bench(fixture_dir, BackendSpec("scripted", Scripted), split="train")


def test_groups_reach_the_harness_metrics(tmp_path: Path) -> None:
    # r1 asks for email *or* calendar: either satisfies it, so recall@1 = complete@1 = 1.
    folder = write_fixture(tmp_path / "grouped")
    rows = ["query-id\ttool-name\tscore\tgroup"]
    rows += [f"{q}\t{t}\t{g}\t{'any' if q == 'r1' else t}" for q, t, g in QRELS]
    (folder / "qrels.tsv").write_text("\n".join(rows) + "\n")
    result = run_benchmark([folder], [BackendSpec("scripted", Scripted)], METRICS)
    entry = result.datasets["grouped"]
    per_query = entry.backends["scripted"].per_query
    assert per_query["recall@1"]["r1"] == 1.0 and per_query["complete@1"]["r1"] == 1.0
    assert entry.groups["r1"] == (("mcp__mail__send_email", "mcp__calendar__create_event"),)
    plain = _bench(write_fixture(tmp_path / "plain"), BackendSpec("scripted", Scripted))
    assert plain.datasets["plain"].backends["scripted"].per_query["recall@1"]["r1"] == 0.5


def test_holm_correction_with_three_backends(fixture_dir: Path) -> None:
    result = _bench(
        fixture_dir,
        BackendSpec("a", Scripted),
        BackendSpec("b", Reversed),
        BackendSpec("c", Scripted),
    )
    sig = result.datasets["fixture"].significance
    assert sig is not None and sig.correction == "holm" and sig.family_size == 3
    assert "Holm-Bonferroni correction over the 3 pairs of each metric" in sig.describe()
    assert all(p.p_adjusted >= p.p_value for p in sig.pairs)
    none = (
        _bench(
            fixture_dir, BackendSpec("a", Scripted), BackendSpec("b", Reversed), correction="none"
        )
        .datasets["fixture"]
        .significance
    )
    assert none is not None and "no multiple-comparison correction" in none.describe()


def test_cli_bench_prints_progress_lines_when_not_a_terminal(
    fixture_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", "--dataset", str(fixture_dir), "--backend", "keyword,bm25", "--k", "1"]
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    starts = [line for line in err if "start: fixture: keyword queries (6)" in line]
    dones = [line for line in err if "done: fixture: bm25 queries: 6/6 in" in line]
    assert starts and dones and all(line.startswith("[") for line in err if line)
    assert any("start: fixture: indexing 6 tools with bm25" in line for line in err)
    assert main([*args, "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_cli_bench_checks_outputs_before_running(
    fixture_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def never(*_: Any, **__: Any) -> Any:
        raise AssertionError("the run started before the outputs were checked")

    monkeypatch.setattr("toolsearch.bench.runner.run_benchmark", never)
    blocker = tmp_path / "file"
    blocker.write_text("")
    base = ["bench", "--dataset", str(fixture_dir), "--backend", "keyword", "--quiet"]
    assert main([*base, "--report", str(blocker / "report")]) == 2
    err = capsys.readouterr().err
    assert "--report: cannot write here" in err and "checked before running" in err
    assert main([*base, "--json-out", str(tmp_path)]) == 2
    assert "--json-out: is a folder" in capsys.readouterr().err
    assert main([*base, "--run-dir", str(blocker)]) == 2
    assert "--run-dir: cannot write here" in capsys.readouterr().err


def test_cli_bench_says_where_public_sets_are_looked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolsearch.datasets

    monkeypatch.delenv("TOOLSEARCH_SHARED_DATASETS", raising=False)
    monkeypatch.setattr(toolsearch.datasets, "CHECKOUT_ROOT", None)
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--dataset", "metatool", "--backend", "keyword", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "dataset 'metatool' not found" in err
    assert "$TOOLSEARCH_SHARED_DATASETS (not set)" in err
    assert f"{tmp_path.parent / 'shared' / 'datasets'} (missing)" in err
    assert "how to obtain them: docs/benchmark.md" in err


def test_cli_bench_split_is_recorded(fixture_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "dev.json"
    args = ["bench", "--dataset", str(fixture_dir), "--backend", "keyword", "--quiet"]
    assert main([*args, "--split", "dev", "--json-out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["split"] == "dev" and data["datasets"]["fixture"]["split"] == "dev"
    assert data["datasets"]["fixture"]["n_queries"] == 4  # k1, r1, x1, n2
    # a baseline of the dev half does not gate a run of all queries
    assert main([*args, "--baseline", str(out)]) == 1


def test_scaling_marks_over_budget_and_cached_points(fixture_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from toolsearch.bench.report import plot_scaling
    from toolsearch.bench.scaling import uses_persistent_cache

    class SlowCached(Scripted):
        def _build(self, tools: list[Tool]) -> None:
            import time

            time.sleep(1.2)
            super()._build(tools)

        def params(self) -> dict[str, object]:
            return {"member_params": {"embedding": {"cache": "/tmp/vectors.sqlite"}}}

    dataset = load_dataset(fixture_dir)
    scaling = measure_scaling(
        dataset.tools,
        dataset.queries,
        [BackendSpec("slow", SlowCached), BackendSpec("quick", Scripted)],
        sizes=(10, 11, 12),
        n_queries=2,
        budget_seconds=1.0,  # 100x what "quick" takes on ten tools: holds on a busy machine
    )
    (point,) = scaling.points["slow"]  # measured, took longer than the budget: ends the curve
    assert point.over_budget and point.cached and point.seconds > 1.0
    assert scaling.skipped["slow"] == [
        f"11 tools: skipped, 10 tools took {point.seconds:.0f} s > budget",
        "12 tools: skipped after a smaller size was over budget",
    ]
    quick = scaling.points["quick"]
    assert [p.size for p in quick] == [10, 11, 12]
    assert not any(p.over_budget or p.cached for p in quick)
    assert uses_persistent_cache({"cache_dir": "x"}) and not uses_persistent_cache({"cache": None})
    assert plot_scaling(scaling, tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_the_bench_package_exports_its_public_surface_lazily() -> None:
    import subprocess
    import sys

    import toolsearch.bench as bench

    for name in bench.__all__:
        assert getattr(bench, name) is not None
    assert bench.run_benchmark is run_benchmark
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = bench.nope  # type: ignore[attr-defined]
    code = "import sys, toolsearch.bench; print('ranx' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_a_missing_bench_extra_names_the_harness_not_a_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    from toolsearch.bench._ranx import import_ranx

    real_import = builtins.__import__

    def no_ranx(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ranx":
            raise ImportError("No module named 'ranx'", name="ranx")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ranx)
    with pytest.raises(MissingExtraError) as info:
        import_ranx()
    assert str(info.value) == (
        "the benchmark harness needs ranx; install it with: pip install 'toolsearch[bench]'"
    )


def test_the_gate_judges_a_change_of_tool_texts_and_refuses_changed_judgements(
    fixture_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The gate exists to guard description changes, yet any change to tools.jsonl failed it
    as "not compared" (the dataset's hash differs). With the same queries and judgements the
    metrics are compared, the changed tools named and the deltas listed; only changed
    queries or judgements are refused."""
    args = ["bench", "--dataset", str(fixture_dir), "--backend", "keyword", "--quiet"]
    baseline = tmp_path / "baseline.json"
    assert main([*args, "--json-out", str(baseline)]) == 0
    capsys.readouterr()
    tools = [dict(t) for t in TOOLS]
    for tool in tools:  # a worse description of the event tool, and one tool more
        if tool["name"] == "mcp__calendar__create_event":
            tool["description"] = "Does things."
    tools.append({"name": "mcp__notes__add_note", "description": "Add a note."})
    (fixture_dir / "tools.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tools))
    status = main([*args, "--baseline", str(baseline), "--max-drop", "0.01"])
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "not compared" not in out
    assert (
        "tools changed: fixture: 1 changed (mcp__calendar__create_event); "
        "1 added (mcp__notes__add_note)" in out
    )
    assert "delta: fixture/keyword: recall@5 " in out
    assert status == (1 if "regression:" in out else 0)
    queries = (fixture_dir / "queries.jsonl").read_text().replace("send email", "send mail")
    (fixture_dir / "queries.jsonl").write_text(queries)
    assert main([*args, "--baseline", str(baseline), "--max-drop", "0.01"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "not compared: dataset 'fixture': queries or judgements changed" in out
