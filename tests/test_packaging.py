"""Packaging metadata, what ships in the wheel, and the repository's own references."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import toolsearch

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SOURCES = [
    p
    for folder in ("toolsearch", "backends", "benchmarks", "lab", "tests", "datasets")
    for p in (ROOT / folder).rglob("*.py")
]


def test_license_is_an_spdx_string_with_its_file() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert all((ROOT / f).is_file() for f in project["license-files"])


def test_the_version_is_written_once() -> None:
    assert "version" in PYPROJECT["project"]["dynamic"] and "version" not in PYPROJECT["project"]
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "toolsearch.__version__"
    assert version("toolsearch") == toolsearch.__version__


def test_every_importable_dataset_folder_is_a_listed_package() -> None:
    packages = PYPROJECT["tool"]["setuptools"]["packages"]
    for folder in (ROOT / "datasets").iterdir():
        if folder.is_dir() and folder.name.isidentifier() and folder.name != "__pycache__":
            assert f"toolsearch.datasets.{folder.name}" in packages, folder.name


def test_test_only_code_is_not_in_the_package() -> None:
    assert not (ROOT / "backends" / "_keyword_reference.py").exists()
    assert (ROOT / "tests" / "keyword_reference.py").is_file()


def test_docstrings_cite_the_reference_behaviour_page() -> None:
    page = (ROOT / "docs" / "reference-behaviour.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## (§\d+)", page, re.M))
    cited = re.compile(r"docs/reference-behaviour\.md (§\d+)")
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\bSPEC(\.md| §)", text), f"{path} cites a file outside the repo"
        for section in cited.findall(text):
            assert section in sections, f"{path} cites missing {section}"


def test_readme_says_how_to_get_the_cpu_build_of_torch() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in setup
