"""The published tables: every table of docs/results.md and the README is the rendering of the
committed JSON it cites, and the marker machinery of ``benchmarks/regenerate.py`` rejects
malformed blocks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import regenerate as regen
from benchmarks.tables import headline_table, significance_summary, style_table

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("page", ["docs/results.md", "README.md", "docs/postgres.md"])
def test_published_tables_match_the_committed_json(page: str) -> None:
    assert regen.stale(ROOT / page) == [], (
        f"{page} tables differ from their results JSON: run `python -m benchmarks.regenerate "
        "--tables` (or regenerate the results) and commit"
    )


def test_every_registered_table_is_on_the_results_page() -> None:
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    shown = {name for name, _, _ in regen.blocks(text)}
    assert shown == set(regen.tables())
    assert regen.PAGES[:2] == (ROOT / "docs" / "results.md", ROOT / "README.md")


def test_results_go_to_their_folder_and_commands_run_here() -> None:
    for result in regen.REGISTRY:
        folder = "lab" if result.name in regen.LAB else "benchmarks"
        if result.name != "baseline":
            assert result.file == ROOT / folder / "results" / f"{result.name}.json"
        assert str(result.file.relative_to(ROOT)) in result.command
        python, flag, module, *_ = result.argv()
        assert Path(python).name.startswith("python") and flag == "-m"
        assert module.split(".")[0] in {folder, "toolsearch"}, result.command
        if module != "toolsearch":
            assert (ROOT / f"{module.replace('.', '/')}.py").is_file(), module


def test_lab_results_and_modules_are_all_registered() -> None:
    on_disk = {path.stem for path in (ROOT / "lab" / "results").glob("*.json")}
    assert on_disk == set(regen.LAB)
    for name in regen.LAB:
        assert (ROOT / "lab" / f"{name}.py").is_file(), name


def test_a_hand_edited_table_is_stale_and_rewriting_fixes_it(tmp_path: Path) -> None:
    readme = tmp_path / "results.md"
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    name, start, end = regen.blocks(text)[0]
    readme.write_text(text[:start] + "\n| hand | typed |\n" + text[end:], encoding="utf-8")
    assert regen.stale(readme) == [name]
    readme.write_text(regen.rewrite(readme.read_text(encoding="utf-8")), encoding="utf-8")
    assert regen.stale(readme) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- table:bench_keyword -->\nx\n", "never closed"),
        ("<!-- /table:bench_keyword -->\n", "without its opening one"),
        ("<!-- table:nope -->\n<!-- /table:nope -->\n", "unknown tables nope"),
        (
            "<!-- table:bench_keyword -->\n<!-- table:bench_backends -->\n",
            "opens inside 'bench_keyword'",
        ),
        (
            "<!-- table:bench_keyword -->\n<!-- /table:bench_keyword -->\n" * 2,
            "more than once: bench_keyword",
        ),
    ],
)
def test_malformed_markers_are_named(text: str, message: str) -> None:
    with pytest.raises(regen.TableError, match=message):
        regen.blocks(text)


def test_a_missing_results_file_renders_as_a_pointer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(regen, "RESULTS", tmp_path)
    assert regen.render("quality-bfcl").startswith(
        "*Not generated yet: run `python -m benchmarks.regenerate --only quality-bfcl`"
    )


RESULTS = {
    "split": "test",
    "datasets": {
        "ds": {
            "n_queries": 30,
            "n_positives": 20,
            "n_negatives": 10,
            "n_tools": 7,
            "sha256": "0123456789abcdef",
            "split": "test",
            "style_counts": {
                "hard": {"queries": 20, "positives": 20, "negatives": 0},
                "negative": {"queries": 10, "positives": 0, "negatives": 10},
            },
            "significance": {
                "test": "student",
                "test_name": "two-sided paired Student's t-test",
                "correction": "holm",
                "n_queries": 20,
                "max_p": 0.05,
                "metrics": ["recall@5"],
                "pairs": [
                    {
                        "a": "a", "b": "b", "metric": "recall@5", "mean_a": 0.5,
                        "mean_b": 0.75, "p_value": 0.01, "p_adjusted": 0.02,
                        "significant": True,
                    }
                ],
            },
            "backends": {
                "a": {
                    "metrics": {"recall@5": 0.5, "false_positive_rate": 1.0},
                    "ci95": {"recall@5": [0.3, 0.7], "false_positive_rate": [1.0, 1.0]},
                    "by_style": {
                        "hard": {"recall@5": 0.5},
                        "negative": {"false_positive_rate": 1.0},
                    },
                    "tokens": {"all_tools": 12000, "with_search": 900},
                },
                "b": {
                    "metrics": {"recall@5": 0.75, "false_positive_rate": 0.2},
                    "ci95": {"recall@5": [0.55, 0.9], "false_positive_rate": [0.0, 0.5]},
                    "by_style": {
                        "hard": {"recall@5": 0.75},
                        "negative": {"false_positive_rate": 0.2},
                    },
                    "tokens": {"all_tools": 12000, "with_search": 950},
                },
            },
        }
    },
}  # fmt: skip


def test_headline_table_by_hand() -> None:
    table = headline_table(RESULTS, "ds", order_by="recall@5")
    lines = table.splitlines()
    assert lines[0].startswith("30 queries of the test split (20 with gold tools, 10 negative)")
    assert "7 tools" in lines[0] and "sha256 0123456789ab" in lines[0]
    assert lines[2] == "| backend | R@5 | false pos. | tokens all → with search |"
    assert lines[4] == "| b | .750 [.550, .900] | .200 [.000, .500] | 12,000 → 950 |"
    assert lines[5] == "| a | .500 [.300, .700] | 1.000 [1.000, 1.000] | 12,000 → 900 |"


def test_style_and_significance_tables_by_hand() -> None:
    styles = style_table(RESULTS, "ds").splitlines()
    assert styles[0] == ("| backend | hard (recall@5, n = 20) | negative (false pos., n = 10) |")
    assert styles[2] == "| b | .750 | .200 |"
    sig = significance_summary(RESULTS, "ds").splitlines()
    assert "Holm-corrected" in sig[0] and "n = 20 queries" in sig[0]
    assert sig[4] == "| a | b | +0.250 (p 0.02)* |"
    missing = json.loads(json.dumps(RESULTS))
    missing["datasets"]["ds"]["significance"] = None
    assert significance_summary(missing, "ds").startswith("No paired tests")


def test_a_malformed_marker_is_one_line_naming_its_page_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = tmp_path / "good.md", tmp_path / "bad.md"
    good.write_text("no tables here\n", encoding="utf-8")
    bad.write_text("<!-- table:bench_keyword -->\nnever closed\n", encoding="utf-8")
    monkeypatch.setattr(regen, "PAGES", (good, bad))
    assert regen.main(["--check"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: table 'bench_keyword' is never closed" in err and "Traceback" not in err


def test_rewriting_fixes_every_page_that_shows_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pages = (tmp_path / "a.md", tmp_path / "b.md")
    for page in pages:
        page.write_text("<!-- table:bench_keyword -->\nold\n<!-- /table:bench_keyword -->\n")
    monkeypatch.setattr(regen, "PAGES", pages)
    assert regen.main(["--check"]) == 1
    assert regen.main(["--tables", "--only", "bench_keyword"]) == 0
    assert regen.main(["--check"]) == 0
    assert "a.md:bench_keyword" in capsys.readouterr().err


def test_an_unreadable_results_file_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    result = regen.Result("broken", "python -c pass", {"broken": lambda data: "x"}, path=broken)
    monkeypatch.setattr(regen, "REGISTRY", (result,))
    with pytest.raises(regen.TableError, match=r"table 'broken': cannot read .*broken\.json"):
        regen.render("broken")


def test_a_command_that_writes_no_fresh_file_counts_as_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old.json"
    old.write_text("{}", encoding="utf-8")
    stale_result = regen.Result("stale", "python -c pass", path=old)
    fresh = tmp_path / "fresh.json"
    writes = f"python -c \"open({str(fresh)!r}, 'w').write('{{}}')\""
    fresh_result = regen.Result("fresh", writes, path=fresh)
    assert regen._run([stale_result, fresh_result]) == ["stale"]
    assert "stale FAILED" in capsys.readouterr().err


def test_benchmarks_and_lab_are_packages_that_never_edit_sys_path() -> None:
    """``python -m benchmarks.X`` / ``python -m lab.X`` import each other as packages."""
    for folder in ("benchmarks", "lab"):
        assert (ROOT / folder / "__init__.py").is_file()
        for path in (ROOT / folder).rglob("*.py"):
            assert "sys.path" not in path.read_text(encoding="utf-8"), path


def test_the_shipped_package_never_imports_the_lab_or_the_benchmarks() -> None:
    shipped = [*(ROOT / "toolsearch").rglob("*.py"), *(ROOT / "backends").rglob("*.py")]
    imports = re.compile(r"^\s*(from|import)\s+(lab|benchmarks)\b", re.M)
    for path in shipped:
        assert not imports.search(path.read_text(encoding="utf-8")), path


def test_a_backend_cell_runs_from_any_folder_without_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each cell's worker runs as ``python -m benchmarks.bench_backends`` from the project
    root; run as a file, it could not import the ``benchmarks`` package."""
    from benchmarks.bench_backends import run_cell

    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)
    cell = run_cell("keyword", 1000, 1)
    assert cell["backend"] == "keyword" and cell["tools"] > 0
