"""``benchmarks/distractors.py`` builds the large catalogue its docstring describes, and the
committed results of it and of ``benchmarks/query_adapter.py`` render complete tables."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from toolsearch.dataset import load_dataset
from toolsearch.datasets import shared_datasets_dir

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHARED = shared_datasets_dir()


def _script(name: str) -> ModuleType:
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        f"{name}_under_test", ROOT / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


needs_public_sets = pytest.mark.skipif(
    SHARED is None or not all((SHARED / n / "tools.jsonl").is_file() for n in ("bfcl", "metatool")),
    reason="the public datasets are not here",
)


@needs_public_sets
def test_distractors_are_foreign_unique_and_exactly_as_many_as_asked() -> None:
    distractors = _script("distractors")
    own = list(load_dataset(ROOT / "datasets" / "mcp-workbench").tools)
    extra = distractors.distractors(own, 3000)
    assert len(extra) == 3000 - len(own)
    names = [tool.name for tool in own + extra]
    assert len(set(names)) == len(names)
    services = {tool.server for tool in own if tool.server}
    assert not any(distractors._same_service(tool.server, services) for tool in extra)
    assert distractors._same_service("stripe-remote", {"stripe"})
    assert not distractors._same_service("stripes", {"stripe"})


def test_committed_results_render_every_row() -> None:
    adapter = json.loads((RESULTS / "query_adapter.json").read_text(encoding="utf-8"))
    table = _script("query_adapter").markdown(adapter).splitlines()
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(adapter["results"]) * 2 * 3  # datasets x backends x adapters
    large = json.loads((RESULTS / "distractors.json").read_text(encoding="utf-8"))
    table = _script("distractors").markdown(large)
    assert table.count("| default (hybrid) |") == 2
    assert "target ≤ 0.05" in table
