"""Empty input is an error naming the file, never a silent success."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolsearch.catalog import load_catalog
from toolsearch.cli import main
from toolsearch.dataset import load_dataset
from toolsearch.errors import CatalogError


@pytest.mark.parametrize(
    ("name", "text"), [("my.jsonl", ""), ("my.jsonl", "\n \n"), ("my.json", "[]")]
)
@pytest.mark.parametrize("command", [["search", "send email"], ["request"], ["demo"]])
def test_a_command_refuses_an_empty_catalogue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, command: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert main([*command, "--catalog", str(path)]) == 2
    captured = capsys.readouterr()
    assert f"{path}: the catalogue has no tools" in captured.err
    assert "No matching deferred tools found" not in captured.out


def test_an_empty_dataset_folder_names_its_tools_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tools.jsonl").write_text("", encoding="utf-8")
    assert main(["search", "x", "--catalog", str(tmp_path)]) == 2
    assert f"{tmp_path / 'tools.jsonl'}: the catalogue has no tools" in capsys.readouterr().err


def test_dataset_validate_refuses_a_folder_with_an_empty_tools_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tools.jsonl").write_text("", encoding="utf-8")
    assert main(["dataset", "validate", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "valid" not in captured.out
    assert f"{tmp_path / 'tools.jsonl'}: the catalogue has no tools" in captured.err
    with pytest.raises(CatalogError, match="has no tools"):
        load_dataset(tmp_path)


def test_the_library_still_reads_an_empty_catalogue_as_no_tools(tmp_path: Path) -> None:
    path = tmp_path / "none.jsonl"
    path.write_text("", encoding="utf-8")
    assert load_catalog(path) == []
