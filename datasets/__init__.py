"""Datasets written for toolsearch, shipped with the package, and the location of the public
development sets that live outside it (``../shared/datasets`` beside a checkout)."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

__all__ = [
    "BUNDLED_DIR",
    "bundled_dataset",
    "bundled_datasets",
    "find_dataset",
    "named_path",
    "shared_datasets_dir",
]

#: The folder the bundled datasets are installed in (the package's own directory).
BUNDLED_DIR = Path(str(files(__name__)))


def bundled_dataset(name: str) -> Path:
    """The folder of the bundled dataset ``name`` (``"starter"``, ``"mcp-workbench"``), from
    wherever the package is installed; a clear error lists the names when there is none."""
    from toolsearch.errors import CatalogError

    folders = {p.name: p for p in _dataset_folders()}
    if name not in folders:
        raise CatalogError(f"no bundled dataset {name!r}; bundled: {', '.join(folders) or 'none'}")
    return folders[name]


def _dataset_folders() -> list[Path]:
    return sorted(p for p in BUNDLED_DIR.iterdir() if (p / "tools.jsonl").is_file())


def bundled_datasets() -> list[Path]:
    """Folders of the bundled datasets that carry queries and qrels, sorted by name."""
    return [p for p in _dataset_folders() if (p / "qrels.tsv").is_file()]


def shared_datasets_dir() -> Path | None:
    """The public datasets folder: ``$TOOLSEARCH_SHARED_DATASETS``, else ``../shared/datasets``
    from the working directory; None when neither exists."""
    configured = os.environ.get("TOOLSEARCH_SHARED_DATASETS")
    candidates = [Path(configured)] if configured else []
    candidates.append(Path.cwd().parent / "shared" / "datasets")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def find_dataset(name: str) -> Path | None:
    """The folder a dataset name stands for: a bundled dataset (``"starter"``), else a public
    set in :func:`shared_datasets_dir` (``"metatool"``); None for anything else, including any
    text with a path separator."""
    if not name or "/" in name or os.sep in name or name in {".", ".."}:
        return None
    bundled = BUNDLED_DIR / name
    if (bundled / "tools.jsonl").is_file():
        return bundled
    shared = shared_datasets_dir()
    if shared is not None and (shared / name / "tools.jsonl").is_file():
        return shared / name
    return None


def named_path(path: str | Path) -> Path:
    """Where a catalogue or dataset argument points: the path itself when it exists (a path
    always wins), else the dataset of that name (:func:`find_dataset`), else the path as given
    (so the caller's error names it). A missing path ending in a dataset's name (a README's
    ``datasets/starter`` run outside a checkout) is an error that gives the name to use."""
    from toolsearch.errors import CatalogError

    given = Path(path).expanduser()
    if given.exists():
        return given
    found = find_dataset(str(path))
    if found is not None:
        return found
    if len(given.parts) > 1 and find_dataset(given.name) is not None:
        raise CatalogError(
            f"no such file or folder; the dataset {given.name!r} is installed with toolsearch: "
            f"give its name, {given.name!r}, instead of a path",
            path=given,
        )
    return given
