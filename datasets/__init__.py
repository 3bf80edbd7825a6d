"""Datasets written for toolsearch, shipped with the package, and the location of the public
development sets that live outside it (``../shared/datasets`` beside a checkout)."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

__all__ = ["BUNDLED_DIR", "bundled_dataset", "bundled_datasets", "shared_datasets_dir"]

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
