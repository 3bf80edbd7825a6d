"""``toolsearch`` is the one entry; ``toolsearch.agent``, ``.mcp`` and ``.bench`` each offer a
small public surface whose names are imported only when used."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

SUBPACKAGES = ("toolsearch.agent", "toolsearch.mcp", "toolsearch.bench")


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_every_public_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__, f"{package} exports nothing"
    for name in module.__all__:
        assert getattr(module, name) is not None
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        module.nope  # noqa: B018


def test_importing_the_subpackages_loads_no_submodule_or_extra() -> None:
    code = (
        "import sys, toolsearch, toolsearch.agent, toolsearch.mcp, toolsearch.bench\n"
        "heavy = [m for m in sys.modules if m.startswith(('toolsearch.agent.', "
        "'toolsearch.mcp.', 'toolsearch.bench.')) or m in ('mcp', 'ranx', 'matplotlib')]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_common_names_come_from_the_subpackages() -> None:
    from toolsearch.agent import AgentLoop, ScriptedClient, assemble_request
    from toolsearch.agent.loop import AgentLoop as LoopClass
    from toolsearch.bench import run_benchmark
    from toolsearch.bench.runner import run_benchmark as runner_function

    assert AgentLoop is LoopClass and run_benchmark is runner_function
    assert callable(assemble_request) and isinstance(ScriptedClient, type)
