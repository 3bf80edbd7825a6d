"""The public datasets are found by setting or beside the checkout, from any working directory;
a name found nowhere says where it was looked for and how to obtain the sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import toolsearch.datasets
from toolsearch.catalog import load_catalog
from toolsearch.cli import main
from toolsearch.datasets import find_dataset, shared_datasets_dir

ROOT = Path(__file__).resolve().parents[1]


def make_public_set(folder: Path, name: str = "fixture-set") -> Path:
    dataset = folder / name
    dataset.mkdir(parents=True)
    tool = {"name": "send_invoice", "description": "Send an invoice."}
    (dataset / "tools.jsonl").write_text(json.dumps(tool) + "\n", encoding="utf-8")
    return dataset


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with no ``../shared/datasets`` and no setting."""
    cwd = tmp_path / "far" / "away"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("TOOLSEARCH_SHARED_DATASETS", raising=False)
    return cwd


def test_sets_beside_the_checkout_are_found_from_any_directory(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clone = tmp_path / "work" / "toolsearch"
    shared = tmp_path / "work" / "shared" / "datasets"
    dataset = make_public_set(shared)
    monkeypatch.setattr(toolsearch.datasets, "CHECKOUT_ROOT", clone)
    assert shared_datasets_dir() == shared
    assert find_dataset("fixture-set") == dataset
    assert [t.name for t in load_catalog("fixture-set")] == ["send_invoice"]


def test_the_setting_is_the_only_place_looked_when_set(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_public_set(tmp_path / "shared" / "datasets")
    monkeypatch.setattr(toolsearch.datasets, "CHECKOUT_ROOT", tmp_path / "clone")
    monkeypatch.setenv("TOOLSEARCH_SHARED_DATASETS", str(tmp_path / "nowhere"))
    assert shared_datasets_dir() is None
    assert find_dataset("fixture-set") is None
    monkeypatch.setenv("TOOLSEARCH_SHARED_DATASETS", str(tmp_path / "shared" / "datasets"))
    assert find_dataset("fixture-set") == tmp_path / "shared" / "datasets" / "fixture-set"


def test_an_unknown_name_lists_where_it_looked_and_how_to_get_the_sets(
    tmp_path: Path,
    elsewhere: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(toolsearch.datasets, "CHECKOUT_ROOT", tmp_path / "clone")
    assert main(["search", "send", "--catalog", "metatool"]) == 2
    err = capsys.readouterr().err
    assert "no dataset of that name (bundled: mcp-workbench, starter)" in err
    assert "$TOOLSEARCH_SHARED_DATASETS (not set)" in err
    assert f"beside the checkout: {tmp_path / 'shared' / 'datasets'} (missing)" in err
    assert f"beside the working directory: {elsewhere.parent / 'shared' / 'datasets'}" in err
    assert 'how to obtain them: docs/benchmark.md, "Public datasets"' in err


def test_the_docs_say_how_to_obtain_the_public_sets() -> None:
    text = (ROOT / "docs" / "benchmark.md").read_text(encoding="utf-8")
    section = text.split("## Public datasets", 1)[1].split("\n## ", 1)[0]
    for name in ("metatool", "bfcl", "HowieHwong/MetaTool", "TOOLSEARCH_SHARED_DATASETS"):
        assert name in section
