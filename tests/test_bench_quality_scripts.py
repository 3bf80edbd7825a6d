"""The experiments of ``lab/``: ``lab.distractors`` builds the large catalogue its docstring
describes, ``lab.server_names`` renames servers as it says, and the committed results of them
and of the other experiments render complete tables."""

from __future__ import annotations

import json
import subprocess
from importlib import import_module
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from toolsearch.backend import Hit
from toolsearch.dataset import load_dataset
from toolsearch.datasets import shared_datasets_dir

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "lab" / "results"
SHARED = shared_datasets_dir()


def _script(name: str) -> ModuleType:
    """``lab.<name>``, or ``benchmarks.<name>`` for a speed benchmark."""
    return import_module(f"{'benchmarks' if name.startswith('bench_') else 'lab'}.{name}")


needs_public_sets = pytest.mark.skipif(
    SHARED is None or not all((SHARED / n / "tools.jsonl").is_file() for n in ("bfcl", "metatool")),
    reason="the public datasets are not here",
)


@needs_public_sets
def test_distractors_are_foreign_unique_and_exactly_as_many_as_asked() -> None:
    distractors = _script("distractors")
    own = list(load_dataset(ROOT / "datasets" / "mcp-workbench").tools)
    extra = distractors.distractors(own, 3000)
    assert len(extra) == 3000 - len(own)
    names = [tool.name for tool in own + extra]
    assert len(set(names)) == len(names)
    services = {tool.server for tool in own if tool.server}
    assert not any(distractors._same_service(tool.server, services) for tool in extra)
    assert distractors._same_service("stripe-remote", {"stripe"})
    assert not distractors._same_service("stripes", {"stripe"})


def test_registry_names_rename_servers_tools_and_gold_alike() -> None:
    names = _script("server_names")
    new = names.registry_names(["slack", "github", "aws", "zoom", "github"])
    assert new == {
        "aws": "aws-mcp-server",
        "github": "github-mcp",
        "slack": "slack-remote",
        "zoom": "mcp-server-zoom",
    }
    assert names.rename("mcp__slack__send_message", new) == "mcp__slack-remote__send_message"
    assert names.rename("get_weather", new) == "get_weather"
    sample = SimpleNamespace(
        dataset=load_dataset(ROOT / "datasets" / "mcp-workbench"), split="test", queries=()
    )
    registry, renaming = names.renamed(sample)
    tools = {tool.name: tool for tool in registry.dataset.tools}
    assert len(tools) == len(sample.dataset.tools)
    for tool in registry.dataset.tools:
        assert tool.server in renaming.values()
        assert tool.name.startswith(f"mcp__{tool.server}__")
    assert all(name in tools for gold in registry.dataset.qrels.values() for name in gold)


def test_committed_results_render_every_row() -> None:
    adapter = json.loads((RESULTS / "query_adapter.json").read_text(encoding="utf-8"))
    table = _script("query_adapter").markdown(adapter).splitlines()
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(adapter["results"]) * 2 * 3  # datasets x backends x adapters
    large = json.loads((RESULTS / "distractors.json").read_text(encoding="utf-8"))
    table = _script("distractors").markdown(large)
    assert table.count("| default (hybrid) |") == 2
    assert "target ≤ 0.05" in table
    renamed = json.loads((RESULTS / "server_names.json").read_text(encoding="utf-8"))
    table = _script("server_names").markdown(renamed)
    assert table.count("| registry names |") == len(renamed["results"])


def test_action_agreement_table_has_every_dev_and_test_set() -> None:
    script = _script("action_agreement")
    data = json.loads((RESULTS / "action_agreement.json").read_text(encoding="utf-8"))
    table = script.markdown(data)
    assert len(data["dev"]) == 12
    assert list(data["test"]) == ["mcp-workbench", script.UNSEEN_MCP, *script.OTHERS]
    for name in (*data["dev"], *data["test"]):
        assert f"| {name} |" in table
    assert "| mean |" in table


def test_the_every_tool_variant_differs_only_on_tools_without_a_server() -> None:
    from toolsearch.fusion import name_words
    from toolsearch.query import parse_query
    from toolsearch.tool import Tool

    chosen = _script("action_agreement").variants()
    every, default = (
        chosen[name].fuser for name in ("every tool", "tools with a server (default)")
    )
    tools = [Tool("mcp__git__create_issue", ""), Tool("create_ticket", "")]
    names = {tool.name: name_words(tool) for tool in tools}
    hits = {member: [Hit(tool.name, 0.5) for tool in tools] for member in default.weights}
    query = parse_query("open an issue")
    served, everywhere = default.fuse(query, hits, names), every.fuse(query, hits, names)
    assert everywhere["mcp__git__create_issue"] == served["mcp__git__create_issue"]
    bonus = default.action_bonus
    assert everywhere["create_ticket"] == pytest.approx(served["create_ticket"] + bonus)


def _toy_data(queries: int = 40) -> SimpleNamespace:
    """Member hits where the gold tool is the stemmed bm25 member's top hit and the
    embedding's third: a ranker must learn to follow bm25."""
    tools = ["alpha_tool", "beta_tool", "gamma_tool", "delta_tool"]
    hits: dict[str, dict[str, list[tuple[str, float]]]] = {"embedding": {}, "bm25_stem": {}}
    hits["bm25"] = {}
    qrels = {}
    for i in range(queries):
        gold = tools[i % 4]
        rest = [t for t in tools if t != gold]
        qid = f"q{i}"
        hits["embedding"][qid] = [(rest[0], 0.6), (rest[1], 0.55), (gold, 0.5), (rest[2], 0.4)]
        hits["bm25_stem"][qid] = [(gold, 9.0), (rest[0], 2.0)]
        hits["bm25"][qid] = []
        qrels[qid] = {gold: 1}
    sample = SimpleNamespace(qrels=qrels)
    return SimpleNamespace(hits=hits, names={}, sample=sample)


def test_learned_fusion_features_and_rankers_follow_the_informative_member() -> None:
    # the learned rankers are the lab extra's (pip install -e '.[lab]'; .ci/run installs it)
    pytest.importorskip("sklearn")
    pytest.importorskip("lightgbm")
    learned = _script("learned_fusion")
    data = _toy_data()
    feats = {qid: learned.query_features(data, qid, "find it", {}) for qid in data.sample.qrels}
    candidates, x = feats["q0"]
    assert candidates == ["beta_tool", "gamma_tool", "alpha_tool", "delta_tool"]
    assert x.shape == (4, len(learned.FEATURES))
    column = learned.FEATURES.index("bm25_stem_norm")
    assert x[candidates.index("alpha_tool"), column] == 1.0
    assert x[candidates.index("delta_tool"), column] == 0.0  # not returned by bm25
    pairs, labels = learned.training_pairs([(data, feats)])
    assert len(pairs) == len(labels) == 2 * 40 * 3 and labels.mean() == 0.5
    for fit in learned.MODELS.values():
        ranked = learned.learned_rank(feats, fit([(data, feats)]))
        assert all(ranked[q][0].name == next(iter(data.sample.qrels[q])) for q in ranked)


def test_learned_fusion_table_has_the_default_and_every_model_twice() -> None:
    results = json.loads((RESULTS / "learned_fusion.json").read_text(encoding="utf-8"))
    table = _script("learned_fusion").markdown(results).splitlines()
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 1 + 2 * len(results["models"])
    assert all(len(row.split("|")) == len(rows[0].split("|")) for row in rows)


def test_member_run_key_follows_the_backends_settings() -> None:
    from toolsearch.backends.hybrid import HybridBackend

    member_runs = _script("member_runs")
    spec = member_runs.MemberSpec("hybrid", "hybrid", {})
    on, off = HybridBackend(multistep=True), HybridBackend(multistep=False)
    assert spec.key(on) != spec.key(off)  # a changed default is never served an old ranking
    assert spec.key(on) == spec.key(HybridBackend(multistep=True))


def test_fine_tune_batches_never_hold_a_tool_twice_and_keep_every_pair() -> None:
    from toolsearch.backends.fine_tuning import Pair
    from toolsearch.backends.fine_tuning import batches as make_batches

    pairs = [Pair(f"request {i}", f"text {i % 5}", f"tool{i % 5}") for i in range(40)]
    batches = make_batches(pairs, 4)
    assert sorted(p for b in batches for p in b) == sorted(pairs)
    assert all(len(b) <= 4 and len({p[2] for p in b}) == len(b) for b in batches)
    assert sum(len(b) == 4 for b in batches) == 10  # five tools fill batches of four exactly


def test_fine_tune_table_has_each_fold_left_out_once() -> None:
    fine_tune = _script("fine_tune")
    data = json.loads((RESULTS / "fine_tune.json").read_text())
    table = fine_tune.markdown(data)
    rows = [
        line for line in table.splitlines() if "| left out |" in line or "| in-domain |" in line
    ]
    assert len(rows) == 3 * len(data["folds"])
    assert sum("| left out |" in row for row in rows) == len(data["folds"])
    for fold in data["folds"]:  # the default hybrid with each fold's model, on its left-out set
        assert any(line.startswith(f"| {fold} | ") for line in table.splitlines())
    assert (
        f"| mcp-workbench `task` | {data['shipped']['mcp-workbench']['task']['queries']} |" in table
    )
    seeds = fine_tune.SEEDS
    for fold in data["folds"]:  # every fold left out at every training seed
        assert all(f"| {fold} | {seed} | " in table for seed in seeds)


def test_the_current_setting_stays_unless_beaten_by_more_than_the_margin() -> None:
    ablation = _script("ablation")
    margin = ablation.CHOICE_MARGIN
    grid = {
        (0.65, 0.2): {"a": 0.70, "b": 0.70},
        (0.65, 0.1): {"a": 0.70 + margin / 2, "b": 0.70},
        (0.7, 0.1): {"a": 0.60, "b": 0.90},
    }
    assert ablation.choose_default(grid, ["a"], (0.65, 0.2))[:2] == (0.65, 0.2)
    assert ablation.choose_default(grid, ["a"])[:2] == (0.65, 0.1)  # no current setting
    assert ablation.choose_default(grid, ["a", "b"], (0.65, 0.2))[:2] == (0.7, 0.1)


def test_a_beaten_setting_gives_way_to_the_smallest_within_the_margin_of_the_best() -> None:
    ablation = _script("ablation")
    margin = ablation.CHOICE_MARGIN
    curve = {
        0.0: {"a": 0.660, "b": 0.70},
        0.1: {"a": 0.666, "b": 0.70},
        0.2: {"a": 0.672 - margin / 2, "b": 0.70},
        0.5: {"a": 0.672, "b": 0.70},
    }
    assert ablation.choose_value(curve, ["a"], 0.0) == 0.2  # .5 is best, .2 as good
    assert ablation.choose_value(curve, ["a"], 0.5) == 0.5  # the current one stays
    assert ablation.choose_value(curve, ["b"], 0.1) == 0.1  # flat: nothing to change
    assert ablation.choose_value(curve, ["b"], 0.3) == 0.0  # not on the grid: the smallest


def _ablation_results(ablation: ModuleType, default: float, member: float) -> dict[str, object]:
    """Test scores where every group of every set scores ``default`` for the default and
    ``member`` for each member alone; the default as shipped scores ``default`` too."""
    groups = {"all": 0, "keywords": 0, "hard": 0, "task": 0}
    metrics = {"recall@5": 0.0, "hit@1": 0.0, "ndcg@10": 0.0}

    def scored(value: float) -> dict[str, dict[str, float]]:
        return {group: dict.fromkeys(metrics, value) for group in groups}

    test = {v: scored(member) for v in ablation.MEMBER_VARIANTS}
    test[ablation.DEFAULT_VARIANT] = scored(default)
    sets = (*ablation.DATASETS, ablation.LARGE)
    effect = {f"{d}/test": {"recall@5_cost": 0.015} for d in ablation.DATASETS}
    effect["mcp-workbench/test"]["false_positive_rate"] = 0.5
    return {
        "scores": {d: {"test": test} for d in ablation.DATASETS},
        "shipped": {d: scored(default - (0.04 if d == ablation.LARGE else 0)) for d in sets},
        "abstention": {"threshold": 0.2, "effect": effect},
    }


def test_the_targets_table_says_which_targets_the_default_meets() -> None:
    ablation = _script("ablation")
    rows = ablation.target_rows(_ablation_results(ablation, default=0.96, member=0.9))
    assert len(rows) == len(ablation.TARGET_FLOORS) + 4
    met = {what: ok for what, _, _, ok in rows}
    assert all(met[f"{d} {what}"] for what, d, *_ in ablation.TARGET_FLOORS)  # .96 ≥ every floor
    assert met["mcp-workbench negatives offered a tool (false-positive rate)"] is False  # .5
    assert met["recall@5 lost to abstaining (largest over the test splits)"] is True  # .015
    assert met["mcp-workbench recall@5 lost inside 10,000 tools"] is True  # .04
    gap = next(row for row in rows if row[0].startswith("largest gap below a member"))
    assert gap[1] == pytest.approx(-0.06) and gap[3] is True
    rows = ablation.target_rows(_ablation_results(ablation, default=0.8, member=0.85))
    gap = next(row for row in rows if row[0].startswith("largest gap below a member"))
    assert gap[1] == pytest.approx(0.05) and gap[3] is False
    assert not any(ok for what, _, _, ok in rows if what.endswith("`keywords` hit@1"))
    table = ablation.markdown_targets_table(_ablation_results(ablation, 0.8, 0.85))
    assert table.count("| no |") == sum(1 for *_, ok in rows if not ok)


def test_ablation_scores_read_groups_of_alternatives_as_the_harness_does() -> None:
    from toolsearch.backend import Hit
    from toolsearch.dataset import Dataset, Query

    ablation, member_runs = _script("ablation"), _script("member_runs")
    queries = (
        Query("t-1", "find the failed job and post it", style="task"),
        Query("r-1", "list the pipelines", style="request"),
    )
    dataset = Dataset(
        "toy",
        [],
        list(queries),
        {"t-1": {"list_jobs": 1, "get_job": 1, "post": 1}, "r-1": {"list_pipelines": 1}},
        qrel_groups={"t-1": {"list_jobs": "1", "get_job": "1", "post": "2"}},
    )
    sample = member_runs.Sample(dataset, "dev", queries)
    data = ablation.Data(sample, {}, {}, {})
    ranked = {"t-1": [Hit("get_job", 2.0), Hit("x", 1.0)], "r-1": [Hit("list_pipelines", 1.0)]}
    got = ablation.scores(data, ranked)
    # one of two alternatives serves the first step; the second step is missing
    assert got["task"]["recall@5"] == 0.5 and got["task"]["complete@5"] == 0.0
    assert got["multi-tool"]["recall@5"] == 0.5  # needs two tools (groups), not three
    assert got["request"] == {"recall@5": 1.0, "hit@1": 1.0, "ndcg@10": 1.0}
    assert "complete@5" not in got["all"]


@pytest.mark.skipif(
    SHARED is None or not (SHARED / "mcp-docker-catalog" / "tools.jsonl").is_file(),
    reason="the public MCP catalogues are not here",
)
def test_description_pairs_key_their_own_cached_models() -> None:
    tuned = _script("tuned_models")
    plain = tuned._key(["mcp-workbench"], 50, tuned.RECIPE)
    assert plain == tuned._key(["mcp-workbench"], 50, tuned.RECIPE, ())
    assert plain != tuned._key(["mcp-workbench"], 50, tuned.RECIPE, tuned.PUBLIC_MCP)
    made, queries = tuned.described("mcp-github-catalog")
    assert queries and all(not tool.description for tool in made.tools)


def test_the_shipped_model_is_installed_from_the_trained_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broad = _script("broad_model")
    trained = tmp_path / "cache" / "combined-key"
    trained.mkdir(parents=True)
    record = {
        "requests": {"sgd": 10},
        "licences": {"sgd": "CC BY-SA 4.0"},
        "pairs": 10,
        "per_tool": 6,
        "per_source": 700,
        "recipe": {"epochs": 2, "seed": 42},
    }
    (trained / "toolsearch-training.json").write_text(json.dumps(record), encoding="utf-8")
    (trained / "model.safetensors").write_bytes(b"weights")
    (trained / "README.md").write_text("a card written elsewhere", encoding="utf-8")
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "stale.bin").write_bytes(b"old")
    asked: list[str] = []
    monkeypatch.setattr(broad, "combined_candidate", lambda: asked.append("made") or trained)
    monkeypatch.setattr(broad, "SHIPPED_MODEL_PATH", shipped)
    assert broad.main([]) == 0
    with pytest.raises(SystemExit) as help_asked:
        broad.main(["--help"])
    assert help_asked.value.code == 0 and asked == ["made"]  # --help trains nothing
    assert (shipped / "model.safetensors").read_bytes() == b"weights"
    assert not (shipped / "stale.bin").exists()
    card = (shipped / "README.md").read_text(encoding="utf-8")
    assert card == broad.card(record) and "| sgd | 10 | CC BY-SA 4.0 |" in card


def test_the_three_dataset_model_command_installs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tuned = _script("tuned_models")
    asked: list[tuple[object, ...]] = []
    monkeypatch.setattr(tuned, "cached_model", lambda *a: asked.append(a) or tmp_path / "all-k")
    assert tuned.main([]) == 0
    assert asked == [(tuned.DATASETS, "all")]
    assert capsys.readouterr().out.strip() == str(tmp_path / "all-k")


def test_metadata_pairs_table_has_every_fold_seed_and_dataset() -> None:
    script = _script("metadata_pairs")
    results = json.loads((RESULTS / "metadata_pairs.json").read_text(encoding="utf-8"))
    table = script.markdown(results)
    for dataset in _script("member_runs").DATASETS:
        for split in ("dev", "test"):
            assert f"| fold | {dataset} | {split} | default |" in table
        for seed in script.SEEDS:
            assert f"| shipped, seed {seed} | {dataset} | test | embedding |" in table
        assert f"| {dataset} | default | " in table


def test_embedding_bench_times_a_cold_build_only_on_an_empty_cache(tmp_path: Path) -> None:
    check = _script("bench_embedding").check_cache_state
    check(tmp_path / "new", warm=False)  # absent or empty: cold
    (tmp_path / "filled").mkdir()
    (tmp_path / "filled" / "vectors.npy").write_bytes(b"x")
    with pytest.raises(SystemExit, match="is not empty, so the first build would not be cold"):
        check(tmp_path / "filled", warm=False)
    check(tmp_path / "filled", warm=True)
    with pytest.raises(SystemExit, match="holds nothing to start warm from"):
        check(tmp_path / "new", warm=True)
    with pytest.raises(SystemExit, match="--warm needs --cache-dir"):
        check(None, warm=True)
    assert (tmp_path / "filled" / "vectors.npy").read_bytes() == b"x"  # nothing removed


def _reranker_data() -> SimpleNamespace:
    """Two tools; q0 asks for ``send_message``, q1 is a negative (no gold tool)."""
    from toolsearch.dataset import Query
    from toolsearch.tool import Tool

    tools = (Tool("send_message", "Send a message."), Tool("delete_message", "Delete a message."))
    queries = (Query("q0", "send a message"), Query("q1", "leave the workspace"))
    sample = SimpleNamespace(
        queries=queries, qrels={"q0": {"send_message": 1}}, dataset=SimpleNamespace(tools=tools)
    )
    return SimpleNamespace(sample=sample, is_negative=lambda qid: qid not in sample.qrels)


def test_reranker_examples_pair_gold_tools_and_the_wrong_candidates() -> None:
    from toolsearch.backend import Hit

    reranker = _script("reranker")
    ranked = {
        "q0": [Hit("delete_message", 0.9), Hit("send_message", 0.8)],
        "q1": [Hit("delete_message", 0.5), Hit("send_message", 0.4)],
    }
    made = reranker.examples(_reranker_data(), ranked)
    labels = {(request, text.split()[0], label) for request, text, label in made}
    assert labels == {
        ("send a message", "send", 1.0),
        ("send a message", "delete", 0.0),
        ("leave the workspace", "delete", 0.0),
        ("leave the workspace", "send", 0.0),
    }
    assert len(made) == 4


def test_reranker_reorders_only_the_candidates_and_abstains_below_the_threshold() -> None:
    from toolsearch.backend import Hit

    reranker = _script("reranker")
    many = [Hit(f"t{i}", 1.0 - i / 100) for i in range(reranker.CANDIDATES + 2)]
    probs = {"q": [0.1] * (reranker.CANDIDATES - 1) + [0.9]}
    alone = reranker.reranked({"q": many}, probs, 1.0)["q"]
    assert alone[0].name == f"t{reranker.CANDIDATES - 1}"
    assert [h.name for h in alone[reranker.CANDIDATES :]] == [h.name for h in many[-2:]]
    assert reranker.reranked({"q": many}, probs, 0.0)["q"][0].name == "t0"
    assert reranker.abstained({"q": many}, probs, 3, 0.5) == {"q": []}
    assert reranker.abstained({"q": many}, probs, reranker.CANDIDATES, 0.5)["q"] == many


def test_reranker_batches_keep_every_example_once() -> None:
    reranker = _script("reranker")
    items = [(f"request {i}", "x" * (i % 7), float(i % 2)) for i in range(1000)]
    batches = reranker.bucketed(items, seed=3)
    assert sorted(e for b in batches for e in b) == sorted(items)
    assert all(len(b) <= reranker.RECIPE.batch for b in batches)
    assert batches != reranker.bucketed(items, seed=4)


def test_reranker_table_has_every_dataset_setting_and_rule() -> None:
    results = json.loads((RESULTS / "reranker.json").read_text(encoding="utf-8"))
    table = _script("reranker").markdown(results)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    datasets = len(results["default_dev_ndcg@10"])
    rules = len(results["thresholds"]) + 1  # and the default's cosine threshold
    assert len(rows) == 3 + datasets + 2 * datasets + rules  # three header rows
    assert all(f"| {name} |" in table for name in results["default_dev_ndcg@10"])


def _fold(
    before: float, after: float, significant: bool, test: float | None = None
) -> dict[str, object]:
    """A fold's default-hybrid scores at one and two passes; the test split moves as the dev
    split unless ``test`` (its two-pass score, significant) is given."""

    def scored(after: float, significant: bool) -> dict[str, object]:
        got = {
            "base": {"ndcg@10": before},
            "tuned": {"ndcg@10": after},
            "significant": {"ndcg@10": significant},
        }
        return {"hybrid": {"all": got}}

    moved = scored(after, significant) if test is None else scored(test, True)
    return {"dev": scored(after, significant), "test": moved}


def test_more_passes_need_a_higher_dev_mean_and_no_significant_dev_loss() -> None:
    decision = _script("training_passes").decision
    rises = {"a": _fold(0.70, 0.72, True), "b": _fold(0.80, 0.80, False)}
    assert decision(rises)["more_passes"] is True
    assert decision(rises)["dev_mean_ndcg@10"] == {"1": 0.75, "2": 0.76}
    # a higher mean that hides a significant loss on one dataset is refused, and named
    hidden = {"a": _fold(0.70, 0.76, True), "b": _fold(0.80, 0.78, True)}
    assert decision(hidden)["more_passes"] is False
    assert decision(hidden)["dev_significant_losses"] == ["b"]
    # a tie keeps the recipe's single pass
    assert decision({"a": _fold(0.70, 0.70, False)})["more_passes"] is False


def test_the_test_splits_must_agree_with_the_dev_choice() -> None:
    decision = _script("training_passes").decision
    assert decision({"a": _fold(0.70, 0.72, True)})["test_agrees"] is True
    lost = decision({"a": _fold(0.70, 0.72, True, test=0.69), "b": _fold(0.80, 0.80, False)})
    assert lost["more_passes"] is True
    assert (lost["test_agrees"], lost["test_significant_losses"]) == (False, ["a"])


def test_more_passes_need_the_rule_met_at_every_seed() -> None:
    script = _script("training_passes")
    rises, ties = {"a": _fold(0.70, 0.72, True)}, {"a": _fold(0.70, 0.70, False)}
    disagrees = {"a": _fold(0.70, 0.72, True, test=0.69)}
    seeds = {s: {"decision": script.decision(f)} for s, f in (("42", rises), ("43", ties))}
    assert script.across_seeds(seeds) == {"seeds_meeting": ["42"], "more_passes": False}
    seeds["43"] = {"decision": script.decision(disagrees)}
    assert script.across_seeds(seeds)["more_passes"] is False
    both = {seed: {"decision": script.decision(rises)} for seed in ("42", "43")}
    assert script.across_seeds(both)["more_passes"] is True


def test_training_passes_table_has_every_fold_split_and_ranking() -> None:
    script = _script("training_passes")
    results = json.loads((RESULTS / "training_passes.json").read_text(encoding="utf-8"))
    table = script.markdown(results)
    seeds = [str(seed) for seed in _script("tuned_models").SEEDS]
    assert list(results["seeds"]) == seeds
    for seed in seeds:
        for dataset in _script("member_runs").DATASETS:
            for split in ("dev", "test"):
                for ranking in ("hybrid", "embedding"):
                    assert f"| {seed} | {dataset} | {split} | {ranking} | " in table
        for split in ("dev", "test"):
            large = f"{split}+{script.LARGE_TOOLS}"
            assert f"| {seed} | mcp-workbench | {large} | hybrid `task` | " in table
        got = results["seeds"][seed]
        assert got["decision"] == script.decision(got["folds"])
    assert results["decision"] == script.across_seeds(results["seeds"])


@needs_public_sets
def test_broad_training_caps_each_tool_and_source_and_reads_dev_only() -> None:
    broad = _script("broad_model")
    from toolsearch.splits import split_of

    for name in ("sgd", "bfcl"):
        dataset, queries = broad.training_queries(name, 3, 120)
        assert queries and all(split_of(q.id) == "dev" for q in queries)
        assert all(q.style not in broad.UNTRAINED_STYLES for q in queries)
        seen: dict[str, int] = {}
        pairs = 0
        for query in queries:
            gold = [n for n, g in dataset.qrels[query.id].items() if g > 0]
            assert min(seen.get(n, 0) for n in gold) < 3  # kept while a gold tool had room
            for tool in gold:
                seen[tool] = seen.get(tool, 0) + 1
            pairs += len(gold)
        # stopped by the request that reached the pair cap (both sets have more to give)
        assert pairs - len(gold) < 120 <= pairs
    every = {s for sources in broad.FOLDS.values() for s in sources}
    assert every == set(broad.SOURCES)  # each source is left out in exactly one fold
    assert sum(len(s) for s in broad.FOLDS.values()) == len(broad.SOURCES)


@needs_public_sets
def test_the_combined_candidate_keeps_the_shipped_samples_whole() -> None:
    broad = _script("broad_model")
    from lab.member_runs import load_sample

    whole = broad.source_queries("bfcl", 120, full=("bfcl",))[1]
    assert [q.id for q in whole] == [q.id for q in load_sample("bfcl", "dev", 1000).queries]
    capped = broad.source_queries("bfcl", 120, full=("metatool",))[1]
    assert capped == broad.training_queries("bfcl", broad.PER_TOOL, 120)[1]
    assert len(capped) < len(whole)


def test_the_broad_model_card_names_every_source_and_licence() -> None:
    broad = _script("broad_model")
    record = {
        "requests": {"sgd": 10, "bfcl": 20},
        "licences": {"sgd": "CC BY-SA 4.0", "bfcl": "Apache-2.0"},
        "pairs": 33,
        "per_tool": 6,
        "per_source": 700,
        "recipe": {"epochs": 2, "seed": 42},
    }
    card = broad.card(record)
    assert "| sgd | 10 | CC BY-SA 4.0 |" in card and "| bfcl | 20 | Apache-2.0 |" in card
    assert "python -m lab.broad_model" in card and "33 request/tool pairs" in card
    assert "whole dev samples" not in card
    combined = broad.card({**record, "full_samples": ["bfcl"]})
    assert "except bfcl, whose whole dev samples" in combined


def test_a_soup_card_describes_both_trainings_and_every_licence() -> None:
    broad = _script("broad_model")
    wide = {
        "folder": "combined-1",
        "requests": {"sgd": 10, "bfcl": 20},
        "licences": {"sgd": "CC BY-SA 4.0", "bfcl": "Apache-2.0"},
        "pairs": 33,
        "per_tool": 6,
        "per_source": 700,
        "full_samples": ["bfcl"],
        "recipe": {"epochs": 2, "seed": 42},
    }
    narrow = {"folder": "all-2", "datasets": ["bfcl"], "pairs": 20, "recipe": wide["recipe"]}
    card = broad.card({"soup": [narrow, wide]})
    assert "model soup" in card and "all-2" in card and "combined-1" in card
    assert "20 request/tool pairs" in card and "33 request/tool pairs" in card
    assert "| sgd | 10 | CC BY-SA 4.0 |" in card and "except bfcl" in card


def test_a_soup_averages_float_weights_and_keeps_integer_buffers(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("sentence_transformers")
    broad = _script("broad_model")
    from toolsearch.backends.fine_tuning import load_trainable, save_model

    first = broad.load_trainable(broad.base_path(), broad.RECIPE)
    save_model(first, tmp_path / "a", {"pairs": 1})
    state = first.state_dict()
    tripled = {k: v * 3 if v.is_floating_point() else v for k, v in state.items()}
    first.load_state_dict(tripled)
    save_model(first, tmp_path / "b", {"pairs": 2})
    record = broad.average([tmp_path / "a", tmp_path / "b"], tmp_path / "soup")
    assert [got["pairs"] for got in record["soup"]] == [1, 2]
    merged = load_trainable(tmp_path / "soup", broad.RECIPE).state_dict()
    stored = load_trainable(tmp_path / "a", broad.RECIPE).state_dict()
    for name, tensor in stored.items():
        if tensor.is_floating_point():  # (x + 3x) / 2, within float16 storage
            assert torch.allclose(merged[name], 2 * tensor, rtol=2e-3, atol=1e-3), name
        else:
            assert torch.equal(merged[name], tensor), name


def test_sibling_queries_are_one_tool_queries_whose_server_has_other_tools() -> None:
    from toolsearch.dataset import Dataset, Query
    from toolsearch.tool import Tool

    lodo = _script("broad_lodo")
    tools = [Tool("mcp__a__get", "g"), Tool("mcp__a__put", "p"), Tool("mcp__b__only", "o")]
    queries = [Query("q1", "get it"), Query("q2", "only"), Query("q3", "both")]
    qrels = {"q1": {"mcp__a__get": 1}, "q2": {"mcp__b__only": 1}}
    qrels["q3"] = {"mcp__a__get": 1, "mcp__a__put": 1}
    sample = SimpleNamespace(dataset=Dataset("d", tools, queries, qrels), qrels=qrels)
    assert lodo.sibling_queries(sample) == ["q1"]
    runs = {"m": {"q1": ["mcp__a__put", "mcp__a__get"]}, "n": {"q1": ["mcp__a__get"]}}
    assert lodo.siblings(sample, runs) == {"queries": 1, "m": 0.0, "n": 1.0}


def test_stock_bm25_table_marks_each_comparison_apart() -> None:
    stock = _script("stock_bm25")
    data = json.loads((RESULTS / "stock_bm25.json").read_text(encoding="utf-8"))
    table = stock.markdown(data)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(data["datasets"])
    assert "†" in table and "*" in table


def test_mining_vectors_are_remembered_across_trainings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    np = pytest.importorskip("numpy")
    broad = _script("broad_model")
    monkeypatch.setattr(broad, "default_cache_dir", lambda: tmp_path)
    asked: list[list[str]] = []

    class Model:
        def encode(self, texts: list[str], **_: object) -> object:
            asked.append(list(texts))
            return np.array([[float(len(t)), 1.0] for t in texts])

    first = broad._RememberingEncoder(Model())
    got = first.encode(["ab", "abc", "ab"])
    assert got.tolist() == [[2.0, 1.0], [3.0, 1.0], [2.0, 1.0]] and asked == [["ab", "abc"]]
    first.save()
    again = broad._RememberingEncoder(Model())  # a later fold, in another process
    assert again.encode(["abc", "abcd"]).tolist() == [[3.0, 1.0], [4.0, 1.0]]
    assert asked[1:] == [["abcd"]]


def test_fold_budget_table_has_a_row_per_left_out_dataset_and_every_model() -> None:
    script = _script("fold_budget")
    data = json.loads((RESULTS / "fold_budget.json").read_text(encoding="utf-8"))
    table = script.markdown(data)
    for fold, rows in data["folds"].items():
        for name, result in rows.items():
            assert f"| {fold} | {name} |" in table
            assert set(result["means"]) == {"base", script.UNSEEN, *script.MODELS}
    assert set(data["folds"]) == set(script.FOLDS)


def test_default_model_table_has_a_row_per_split_and_marks_significance() -> None:
    script = _script("default_model")
    data = json.loads((RESULTS / "default_model.json").read_text(encoding="utf-8"))
    table = script.markdown(data)
    for name, result in data["in_domain"].items():
        assert f"| in-domain | {name} | {result['queries']} |" in table
        assert set(result["means"]) == {script.PREVIOUS, script.SHIPPED}
    for fold, rows in data["unseen"].items():
        assert set(rows) == set(_script("broad_model").FOLDS[fold])
        for name in rows:
            assert f"| unseen (fold {fold}) | {name} |" in table
    assert set(data["unseen"]) == set(_script("fold_budget").FOLDS)


def test_fold_script_measures_the_named_folds_writes_json_and_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fold_budget = _script("fold_budget")
    asked: list[tuple[str, ...]] = []

    def measure(folds: tuple[str, ...]) -> dict[str, object]:
        asked.append(folds)
        return {"folds": list(folds)}

    out = tmp_path / "deep" / "table.json"
    argv = ["--out", str(out), "--fold", "mcp", "--fold", "rest-endpoints"]
    assert fold_budget.fold_script(argv, "doc", tmp_path / "x.json", measure, str) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == {"folds": ["mcp", "rest-endpoints"]}
    assert capsys.readouterr().out.strip() == str({"folds": ["mcp", "rest-endpoints"]})
    fold_budget.fold_script(["--out", str(out)], "doc", out, measure, str)
    assert asked[-1] == fold_budget.FOLDS
    with pytest.raises(SystemExit):
        fold_budget.fold_script(["--fold", "nope"], "doc", out, measure, str)


def _target_scores(value: float, rate: float, lost: float) -> dict[str, object]:
    floors = {f.what: value for f in _script("targets").FLOORS}
    curve = {"0.2": {"recall@5_cost": 0.0, "false_positive_rate": 0.9}}
    curve |= {"0.3": {"recall@5_cost": 0.005, "false_positive_rate": 0.7}}
    curve |= {"0.4": {"recall@5_cost": 0.05, "false_positive_rate": 0.2}}
    return {
        "floors": floors,
        "threshold": 0.2,
        "false_positive_rate": rate,
        "recall_lost": lost,
        "curve": curve,
    }


def test_the_broad_targets_are_met_only_where_every_part_is() -> None:
    targets = _script("targets")
    before = _target_scores(0.5, 0.9, 0.0)
    rows = targets.quality_rows(before, _target_scores(0.99, 0.3, 0.005))
    assert len(rows) == len(targets.FLOORS) + 1 and all(row.endswith("| yes |") for row in rows)
    rows = targets.quality_rows(before, _target_scores(0.99, 0.3, 0.02))  # costs too much recall
    assert rows[-1].endswith("| no |") and rows[0].endswith("| yes |")
    assert targets.quality_rows(before, _target_scores(0.89, 0.9, 0.0))[0].endswith("| no |")
    # the lowest rate within the allowed recall@5 lost, not the lowest rate of all
    assert targets.best_within(before["curve"], targets.MAX_RECALL_LOST) == ("0.3", 0.7)


def test_a_left_out_dataset_at_or_below_a_model_fails_the_fold_target_by_name() -> None:
    targets = _script("targets")

    def result(candidate: float) -> dict[str, object]:
        means = {"base": 0.5, "previous unseen": 0.7, "candidate fold": candidate}
        return {"means": {k: {"ndcg@10": v} for k, v in means.items()}}

    untuned, previous = targets.fold_rows({"a": {"x": result(0.8)}, "b": {"y": result(0.7)}})
    assert untuned.endswith("| 2 of 2 | yes |")
    assert "| 1 of 2 (y 0.700 vs 0.700) | 2 of 2 | no |" in previous


def test_the_committed_targets_hold_the_previous_default_and_draw_every_row() -> None:
    targets = _script("targets")
    data = json.loads((RESULTS / "targets.json").read_text(encoding="utf-8"))
    try:
        previous = targets.previous_scores()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no git history to read the previous default from")
    assert data["previous"] == json.loads(json.dumps(previous))
    table = targets.markdown(data)
    for floor in targets.FLOORS:
        assert f"| {floor.what} |" in table
    assert table.count("| yes |") + table.count("| no |") == len(targets.FLOORS) + 6
    assert data["speed"]["ratio"] == pytest.approx(
        data["speed"]["shipped"]["query_p50_ms"] / data["speed"]["previous"]["query_p50_ms"],
        abs=1e-3,
    )


def test_the_server_index_scores_servers_and_lifts_their_tools() -> None:
    import numpy as np

    from toolsearch.backends.bm25 import BM25Backend
    from toolsearch.fusion import Fuser, name_table
    from toolsearch.query import parse_query
    from toolsearch.tool import Tool

    script = _script("server_index")
    tools = [
        Tool("mcp__slack__send_message", "Send a message to a channel.", server="slack"),
        Tool("mcp__slack__list_channels", "List the channels.", server="slack"),
        Tool("mcp__jira__create_issue", "Create an issue in a project.", server="jira"),
    ]
    packaged = script.server_document("slack-mcp-server", tools[:2])
    assert packaged.description.splitlines()[:2] == ["slack", "send message"]
    lexical = BM25Backend(param_descriptions=False)
    homes = ["jira", "slack"]
    lexical.index(
        [script.server_document("jira", tools[2:]), script.server_document("slack", tools[:2])]
    )
    text = "post in the channel"
    index = script.ServerIndex(
        group={t.name: t.server for t in tools},
        lexical=lexical,
        centroids=np.eye(2, dtype=np.float32),
        homes=homes,
        vectors={text: np.array([0.2, 0.9], dtype=np.float32)},
    )
    scores = index.scores(text)
    assert scores["slack"] == 1.0 and 0 <= scores["jira"] < scores["slack"]
    hits = {"m": [Hit(tools[2].name, 1.0), Hit(tools[0].name, 0.9)]}
    names = name_table(tools)
    plain = Fuser({"m": 1.0}, "convex", {"m": "max"}).fuse(parse_query(text), hits, names)
    lifted = script.ServerIndexFuser(
        {"m": 1.0}, "convex", {"m": "max"}, server_weight=0.5, index=index
    ).fuse(parse_query(text), hits, names)
    for name in plain:
        home = tools[[t.name for t in tools].index(name)].server
        assert lifted[name] == pytest.approx(plain[name] + 0.5 * scores[home])


def test_the_previous_reading_splits_brand_names_again() -> None:
    from toolsearch import fusion
    from toolsearch.backends.bm25 import BM25Backend
    from toolsearch.query import parse_query
    from toolsearch.tool import Tool

    tools = [Tool("mcp__git__git_status", "Status."), Tool("mcp__github__get_me", "Me.")]
    backend = BM25Backend()
    backend.index(tools)
    request = parse_query("GitHub")
    names = fusion.name_table(tools)
    assert "git" not in fusion.query_words(request, fusion.vocabulary(names))
    assert not backend.search(request, 2)[1:]
    with _script("server_index").camel_parts_kept():
        assert "git" in fusion.query_words(request, fusion.vocabulary(names))
        assert len(backend.search(request, 2)) == 2


def test_the_server_index_table_has_every_dataset() -> None:
    script = _script("server_index")
    data = json.loads((RESULTS / "server_index.json").read_text(encoding="utf-8"))
    for table in (script.markdown(data), script.reading_table(data)):
        for name in script.DATASETS:
            assert f"| {name} |" in table
    assert set(data["lodo"]) == set(script.DATASETS)
