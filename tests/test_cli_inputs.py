"""Bad or unusual CLI input gets a clear answer: escaped tables, checked flags, named misses."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from toolsearch.cli import main

ROOT = Path(__file__).resolve().parents[1]
STARTER = str(ROOT / "datasets" / "starter")


def test_backends_table_shows_the_extra_in_install_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "pip install 'toolsearch[bm25]'" in out
    assert "pip install 'toolsearch[embedding,bm25]'" in out
    assert "``" not in out


def test_backends_json_summary_has_no_markup(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert all("``" not in b["summary"] for b in data["backends"])


@pytest.mark.parametrize("command", ["request", "demo"])
def test_unknown_mode_is_rejected_with_the_valid_values(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--catalog", STARTER, "--mode", "bogus"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid mode 'bogus'" in err and "auto:N" in err and "false" in err


@pytest.mark.parametrize("mode", ["true", "OFF", "auto", "auto:5", "auto:100"])
def test_recognised_modes_are_accepted(capsys: pytest.CaptureFixture[str], mode: str) -> None:
    assert main(["request", "--catalog", STARTER, "--mode", mode]) == 0
    assert json.loads(capsys.readouterr().out)["tool_search"]


def test_select_names_the_names_not_found(capsys: pytest.CaptureFixture[str]) -> None:
    query = "select:mcp__github__create_issue,NoSuch,NoSuch"
    argv = ["search", query, "--catalog", STARTER, "--backend", "keyword"]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in data["matches"]] == ["mcp__github__create_issue"]
    assert data["not_found"] == ["NoSuch"]
    assert main(argv) == 0
    assert "Not found: NoSuch" in capsys.readouterr().out
    assert main(["search", "select:NoSuch", "--catalog", STARTER, "--backend", "keyword"]) == 0
    out = capsys.readouterr().out
    assert "No matching deferred tools found" in out and "Not found: NoSuch" in out


def test_a_huge_query_is_not_echoed_whole(capsys: pytest.CaptureFixture[str]) -> None:
    query = "slack " * 20_000
    assert main(["search", query, "--catalog", STARTER, "--backend", "keyword"]) == 0
    out = capsys.readouterr().out
    assert "mcp__slack__send_message" in out
    assert len(out) < 5_000 and "(120,000 characters)" in " ".join(out.split())


def test_cli_modules_do_not_import_each_other_in_a_circle() -> None:
    """Shared helpers live below the commands: no command module imports another command."""
    commands = {"search", "request", "demo", "bench", "dataset", "serve", "backends"}
    for name in commands:
        tree = ast.parse((ROOT / "toolsearch" / "cli" / f"{name}.py").read_text())
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
        }
        others = {f"toolsearch.cli.{other}" for other in commands - {name}}
        assert not imported & others, f"cli/{name}.py imports {imported & others}"


def test_demo_runs_on_the_bundled_workbench_from_any_directory(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--backend", "keyword", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert Path(data["catalog"]).name == "mcp-workbench"
    assert data["pool"]["deferred"] == 495
    assert data["totals"]["saving_percent"] > 50


def test_readme_library_example_runs_from_any_directory(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Library example", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLSEARCH_BACKEND", "keyword")
    exec(compile(code, "README.md", "exec"), {})
    assert "mcp__slack__send_message 42.0 ranked" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-p", "2"], "--max-p: the p-value threshold must be between 0 and 1, got 2.0"),
        (["--max-p", "nan"], "--max-p: the p-value threshold must be between 0 and 1, got nan"),
        (["--sig-metrics", "false_positive_rate"], "cannot test false_positive_rate for"),
        (["--sig-metrics", "complete@5,recall@5"], "cannot test complete@5 for significance"),
        (["--scale-sizes", "abc"], "--scale-sizes: 'abc' is not an integer"),
        (["--scale-queries", "0"], "--scale-queries must be a positive integer, got 0"),
        (["--scale-budget", "nan"], "--scale-budget must be a positive number of seconds"),
        (["--min-style-queries", "-3"], "--min-style-queries must be a positive integer, got -3"),
        (
            ["--baseline", "b.json", "--max-drop", "2"],
            "--max-drop must be at least 0 and below 1, got 2.0",
        ),
        (
            ["--baseline", "b.json", "--style-max-drop", "nan"],
            "--style-max-drop must be at least 0 and below 1, got nan",
        ),
    ],
)
def test_bench_settings_used_after_the_run_are_checked_before_it(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    flags: list[str],
    message: str,
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the benchmark ran before its settings were checked")

    monkeypatch.setattr("toolsearch.bench.runner.run_benchmark", never)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "b.json").write_text('{"datasets": {}}')
    argv = ["bench", "--dataset", STARTER, "--backend", "keyword", "--quiet", *flags]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("command", ["request", "demo"])
@pytest.mark.parametrize("window", ["0", "-3", "big"])
def test_context_window_must_be_a_positive_whole_number(
    capsys: pytest.CaptureFixture[str], command: str, window: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--catalog", STARTER, "--mode", "auto", "--context-window", window])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--context-window: expected a whole number of at least 1, got '{window}'" in err


def test_serve_refuses_a_timeout_that_is_not_a_number(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}')
    assert main(["serve", "--config", str(config), "--call-timeout", "nan"]) == 2
    assert "--call-timeout must be positive, got nan" in capsys.readouterr().err


def test_request_output_is_strict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "history.json"
    call = {"type": "tool_use", "id": "c1", "name": "Read", "input": {"limit": float("inf")}}
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [call]}]
    history.write_text(json.dumps(messages), encoding="utf-8")  # writes Infinity
    argv = ["request", "--catalog", STARTER, "--history", str(history), "--messages"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "messages[1].content[0].input.limit is inf" in captured.err
    assert "cannot print strict JSON" in captured.err
    history.write_text(json.dumps(messages[:1]), encoding="utf-8")
    assert main(argv) == 0
    json.loads(capsys.readouterr().out, parse_constant=lambda name: pytest.fail(name))
