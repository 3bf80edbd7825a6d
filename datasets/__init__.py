"""Datasets written for toolsearch, shipped with the package, and the location of the public
development sets that live outside it (``$TOOLSEARCH_SHARED_DATASETS``, else
``../shared/datasets`` beside the checkout or the working directory; docs/benchmark.md)."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

__all__ = [
    "BUNDLED_DIR",
    "CHECKOUT_ROOT",
    "ENV_SHARED_DATASETS",
    "bundled_dataset",
    "bundled_datasets",
    "find_dataset",
    "named_path",
    "shared_datasets_dir",
    "shared_datasets_locations",
    "where_shared_datasets_are",
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


#: The environment variable that names the public datasets folder.
ENV_SHARED_DATASETS = "TOOLSEARCH_SHARED_DATASETS"


def _checkout_root() -> Path | None:
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


#: The root of the checkout this package runs from, when it runs from one (None in a wheel).
CHECKOUT_ROOT: Path | None = _checkout_root()
#: Where to read how to obtain the public datasets.
OBTAIN_HINT = (
    "the public sets are not shipped with toolsearch; how to obtain them: docs/benchmark.md, "
    '"Public datasets"'
)


def shared_datasets_locations() -> list[tuple[str, Path]]:
    """Where the public datasets folder is looked for, in order, each with how it was chosen:
    ``$TOOLSEARCH_SHARED_DATASETS`` alone when it is set (an explicit setting is never passed
    over), else ``shared/datasets`` beside the checkout toolsearch runs from, then beside the
    working directory (``../shared/datasets``)."""
    configured = os.environ.get(ENV_SHARED_DATASETS, "").strip()
    if configured:
        return [(f"${ENV_SHARED_DATASETS}", Path(configured).expanduser())]
    found: list[tuple[str, Path]] = []
    if CHECKOUT_ROOT is not None:
        found.append(("beside the checkout", CHECKOUT_ROOT.parent / "shared" / "datasets"))
    beside_cwd = Path.cwd().parent / "shared" / "datasets"
    if all(path != beside_cwd for _, path in found):
        found.append(("beside the working directory", beside_cwd))
    return found


def shared_datasets_dir() -> Path | None:
    """The public datasets folder: the first of :func:`shared_datasets_locations` that exists;
    None when none does."""
    for _, candidate in shared_datasets_locations():
        if candidate.is_dir():
            return candidate
    return None


def where_shared_datasets_are() -> str:
    """Where public sets (metatool, bfcl, ...) were looked for, what was found there, and how
    to obtain them: the tail of every error about a dataset name that was not found."""
    looked = "; ".join(
        f"{how}: {path} ({'found' if path.is_dir() else 'missing'})"
        for how, path in shared_datasets_locations()
    )
    unset = "" if os.environ.get(ENV_SHARED_DATASETS, "").strip() else " (not set)"
    return (
        f"public sets are looked for in ${ENV_SHARED_DATASETS}{unset}, else {looked}; {OBTAIN_HINT}"
    )


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
    if len(given.parts) == 1 and not given.suffix:  # a dataset's name, as "metatool" is
        bundled = ", ".join(p.name for p in _dataset_folders()) or "none"
        raise CatalogError(
            f"no such file or folder, and no dataset of that name (bundled: {bundled}); "
            f"{where_shared_datasets_are()}",
            path=given,
        )
    return given
