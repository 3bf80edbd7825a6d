"""Every code example of the README and the user guides in docs/ runs as written, or is listed
here with why it is not.

Shell blocks run with bash from the repository root (``pip install`` lines are left out: the
test runs in the environment the README's own install made); console blocks run their ``$``
lines and, where the page shows JSON output, compare it with what the command printed; Python
blocks run in a fresh interpreter; TOML blocks load as a toolsearch config and JSON blocks as an
MCP config or a client's. A block that names a placeholder of the reader's own (``my-eval``,
``/path/to/mcp.json``) cannot run as written and is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolsearch.config import check_settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The pages whose examples run: the README and the user guides.
PAGES = (
    "README.md",
    "docs/getting-started.md",
    "docs/backends.md",
    "docs/configuration.md",
    "docs/agent.md",
    "docs/gateway.md",
    "docs/evaluate.md",
    "docs/training.md",
)
#: Placeholders for the reader's own files: a block naming one is not run.
PLACEHOLDERS = ("my-eval", "my-model", "my-catalogue", "my-adapter", "/path/to/")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
TIMEOUT = 240


@dataclass(frozen=True)
class Block:
    """One fenced code block of the README."""

    page: str
    language: str
    text: str
    line: int

    @property
    def first(self) -> str:
        return self.text.splitlines()[0]


def page_blocks(page: str) -> list[Block]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return [
        Block(page, m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
        for m in FENCE.finditer(text)
    ]


def readme_blocks() -> list[Block]:
    return page_blocks("README.md")


#: Blocks not run here, by their first line: why, and what runs them instead.
SKIPPED = {
    "pip install torch==2.13.0 && pip install -e '.[all]' && toolsearch bench": (
        "installs packages and benchmarks every backend (minutes); .ci/run's regression gate "
        "runs the same benchmark"
    ),
    "pip install torch==2.13.0 && pip install -e '.[all,dev]' && ruff check . && ruff format "
    "--check . && mypy && pytest": "the test command itself; .ci/run runs it (checked below)",
    "toolsearch serve --config tests/mcp_servers/example_mcp.json --deny "
    "mcp__workspace__aws_delete_bucket": (
        "serves until stopped; tests/test_mcp_gateway.py and tests/test_mcp_hub.py run the "
        "gateway and hub on this config"
    ),
    "# a Unix domain socket, mode 0600: only you (and root) can connect": (
        "serves until stopped; tests/test_mcp_http_local_users.py serves on a Unix socket and "
        "on loopback with a token"
    ),
    "toolsearch serve --example-config > mcp.json": (
        "serves until stopped; tests/test_gateway_example_config.py serves the printed config "
        "from an empty folder"
    ),
    "pip install 'toolsearch[postgres,postgres-server,embedding,mcp]'": (
        "starts PostgreSQL and serves until stopped; tests/test_postgres.py runs the backend on "
        "a throwaway server"
    ),
    "pip install torch==2.13.0 && pip install -e '.[all]'\n": "installs packages only",
    "# LangChain / LangGraph: a middleware for create_agent": (
        "fragments for five frameworks (each needs a model and the reader's tools); the "
        "complete examples of docs/integrations/ run in tests/integrations/"
    ),
    '[project.entry-points."toolsearch.backends"]': (
        "a third-party package's pyproject.toml, not a toolsearch config"
    ),
}

#: Blocks that run only with ``-m slow``: why.
SLOW = {
    "pip install torch==2.13.0 && pip install -e '.[all]'\n# rank the 495": (
        "the default backend encodes the 495 bundled tools once (tens of seconds on two cores)"
    ),
    'toolsearch search "slack send message" --catalog starter --backend keyword': (
        "the default backend encodes the 495 bundled tools once (tens of seconds on two cores)"
    ),
    "from toolsearch.mcp import BlockingMcpHub, load_mcp_config": (
        "starts the three MCP test servers (seconds each)"
    ),
}


def _key(block: Block) -> str:
    """How :data:`SKIPPED` and :data:`SLOW` name a block: the longest of their keys the block
    starts with (the README's quickstart starts as the bare install block does), else its
    first line."""
    keys = [k for k in (*SKIPPED, *SLOW) if block.text.startswith(k)]
    return max(keys, key=len) if keys else block.first


def _cases() -> list[object]:
    cases: list[object] = []
    for page in PAGES:
        for block in page_blocks(page):
            marks = [pytest.mark.slow] if _key(block) in SLOW else []
            name = f"{page}:{block.line}-{block.language or 'text'}"
            cases.append(pytest.param(block, id=name, marks=marks))
    return cases


def _env() -> dict[str, str]:
    """This interpreter's ``toolsearch`` and ``python`` first on PATH; no backend forced."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSEARCH_BACKEND")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHON"] = sys.executable
    return env


def _run(argv: list[str]) -> str:
    done = subprocess.run(
        argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def _shell(block: Block) -> None:
    lines = [line for line in block.text.splitlines() if not line.startswith("pip install")]
    _run(["bash", "-euo", "pipefail", "-c", "\n".join(lines)])


def _console(block: Block) -> None:
    """Each ``$`` command runs; JSON shown under a command is what it prints, as printed (the
    same layout, not only the same data)."""
    for chunk in re.split(r"^\$ ", block.text, flags=re.M)[1:]:
        command, _, shown = chunk.partition("\n")
        out = _run(["bash", "-euo", "pipefail", "-c", command])
        if shown.strip().startswith("{"):
            assert json.loads(out) == json.loads(shown), command
            assert out.strip() == shown.strip(), f"{command}: the page shows another layout"


def _python(block: Block) -> str:
    return _run([sys.executable, "-c", block.text])


def _toml(block: Block, tmp_path: Path) -> None:
    (tmp_path / "toolsearch.toml").write_text(block.text, encoding="utf-8")
    settings = load_settings(tmp_path, env={})
    check_settings(settings)
    assert settings.backend == tomllib.loads(block.text).get("backend")


def _json(block: Block) -> None:
    """An MCP config (``mcpServers``: Claude Desktop, Claude Code, Cursor, the gateway's) or
    VS Code's (``servers``)."""
    from toolsearch.mcp.config import parse_mcp_config

    data = json.loads(block.text)
    if "mcpServers" in data:
        servers = parse_mcp_config(data, environ={}).servers
        assert [s.name for s in servers] == list(data["mcpServers"])
        return
    entry = data["servers"]["toolsearch"]
    assert entry["type"] == "stdio" and entry["command"] == "toolsearch"
    assert entry["args"][:2] == ["serve", "--config"]


def _workflow(block: Block) -> None:
    """A GitHub Actions job: it parses, and its last step is the gate with the page's flags."""
    yaml = pytest.importorskip("yaml")
    (job,) = yaml.safe_load(block.text)["jobs"].values()
    gate = " ".join(job["steps"][-1]["run"].split())
    assert gate.startswith("toolsearch bench ") and "--baseline" in gate and "--max-drop" in gate


@pytest.mark.parametrize("block", _cases())
def test_example_runs(block: Block, tmp_path: Path) -> None:
    if _key(block) in SKIPPED:
        pytest.skip(SKIPPED[_key(block)])
    if not block.language:
        pytest.skip("plain text (a file layout), not code")
    placeholder = next((p for p in PLACEHOLDERS if p in block.text), None)
    if placeholder is not None and block.language not in {"json", "yaml"}:
        pytest.skip(f"names {placeholder!r}, a placeholder for the reader's own")
    if block.language == "bash":
        _shell(block)
    elif block.language == "console":
        _console(block)
    elif block.language == "python":
        out = _python(block)
        if "AgentLoop" in block.text:
            assert out.splitlines()[-1] == "end_turn Posted in #deploys."
    elif block.language == "toml":
        _toml(block, tmp_path)
    elif block.language == "json":
        _json(block)
    elif block.language == "yaml":
        _workflow(block)
    else:
        pytest.fail(f"{block.page}:{block.line}: no rule for a {block.language!r} block")


def test_every_listed_block_is_on_a_page() -> None:
    keys = {_key(block) for page in PAGES for block in page_blocks(page)}
    assert set(SKIPPED) | set(SLOW) <= keys


def test_ci_runs_the_readme_test_command_exactly() -> None:
    (command,) = [b.first for b in readme_blocks() if b.first.endswith("&& mypy && pytest")]
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
