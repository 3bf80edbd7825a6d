"""Datasets written for toolsearch, shipped with the package, and the location of the public
development sets that live outside it (``../shared/datasets`` beside a checkout)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["BUNDLED_DIR", "bundled_datasets", "shared_datasets_dir"]

BUNDLED_DIR = Path(__file__).resolve().parent


def bundled_datasets() -> list[Path]:
    """Folders of the bundled datasets that carry queries and qrels, sorted by name."""
    return sorted(
        p
        for p in BUNDLED_DIR.iterdir()
        if (p / "tools.jsonl").is_file() and (p / "qrels.tsv").is_file()
    )


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
