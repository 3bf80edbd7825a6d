"""Packaging metadata, what ships in the wheel, and the repository's own references."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

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


def test_every_importable_package_folder_is_listed() -> None:
    """setuptools warns of (and may one day drop) a folder Python can import that the
    ``packages`` list leaves out, as it did with ``toolsearch.models``."""
    packages = set(PYPROJECT["tool"]["setuptools"]["packages"])
    dirs = PYPROJECT["tool"]["setuptools"]["package-dir"]
    for package, folder in dirs.items():
        for sub in (ROOT / folder).rglob("*"):
            parts = sub.relative_to(ROOT / folder).parts
            if (
                not sub.is_dir()
                or "__pycache__" in parts
                or not all(p.isidentifier() for p in parts)
            ):
                continue
            if any(sub.rglob("*.*")):
                assert ".".join((package, *parts)) in packages, sub


@pytest.mark.slow
def test_the_wheel_builds_without_warnings_and_carries_the_model(tmp_path: Path) -> None:
    """A wheel built from the tracked files: no setuptools warning about packages, and the
    bundled model's files inside (about 30 s; pip fetches the build backend)."""
    source = tmp_path / "src"
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, tracked):
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path / "out"),
         str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    log = built.stdout + built.stderr
    assert "is absent from the `packages` configuration" not in log
    assert "importable package" not in log
    [wheel] = (tmp_path / "out").glob("toolsearch-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    model = "toolsearch/models/toolsearch-minilm-l6/"
    for file in ("model.safetensors", "tokenizer.json", "1_Pooling/config.json", "README.md"):
        assert model + file in names
