"""A missing extra stops a command up front with its pip line, never a traceback or a run.

Each case runs the CLI in a fresh interpreter where the extra's modules cannot be imported
(``sys.modules[name] = None``, as for a package that is not installed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RUN_WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from toolsearch.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run_without(modules: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT, modules, *argv],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=cwd,
    )


@pytest.mark.parametrize("missing", ["anyio", "mcp"])
def test_serve_without_the_mcp_extra_names_the_pip_line(tmp_path: Path, missing: str) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}), encoding="utf-8")
    done = run_without(missing, "serve", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "pip install 'toolsearch[mcp]'" in done.stderr
    assert missing in done.stderr
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr


@pytest.mark.parametrize(
    ("missing", "extra_args"), [("ranx", []), ("matplotlib", ["--report", "report"])]
)
def test_bench_without_the_bench_extra_fails_before_running(
    tmp_path: Path, missing: str, extra_args: list[str]
) -> None:
    out = tmp_path / "results.json"
    argv = ["bench", "--dataset", "starter", "--backend", "keyword", "--json-out", str(out)]
    done = run_without(missing, *argv, *extra_args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"toolsearch bench: error: toolsearch bench needs {missing}; "
        "install it with: pip install 'toolsearch[bench]'"
    ]
    assert done.stdout == "" and not out.exists()
