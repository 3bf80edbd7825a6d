"""The gateway's example config ships in the package: ``toolsearch serve --example-config``
prints a config whose servers (``python -m toolsearch.mcp.catalog_server``) run from any folder,
so the README's gateway example works from a wheel install too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolsearch.catalog import load_catalog
from toolsearch.mcp.catalog_server import EXAMPLE_SERVERS, main
from toolsearch.mcp.config import load_mcp_config
from toolsearch.mcp.hub import BlockingMcpHub

ROOT = Path(__file__).resolve().parents[1]


def printed_config(tmp_path: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "toolsearch", "serve", "--example-config"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=True,
    )  # fmt: skip
    path = tmp_path / "mcp.json"
    path.write_text(done.stdout, encoding="utf-8")
    return path


def test_the_printed_config_serves_the_catalogue_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing of the repository is reachable by a relative path
    config = load_mcp_config(printed_config(tmp_path))
    assert [s.name for s in config.servers] == list(EXAMPLE_SERVERS)
    workbench = {t.name for t in load_catalog("mcp-workbench")}
    with BlockingMcpHub(config, backend="keyword", startup_timeout=60) as hub:
        assert hub.wait_ready(timeout=60)
        assert {s: state.status for s, state in hub.servers.items()} == dict.fromkeys(
            EXAMPLE_SERVERS, "connected"
        )
        served = {t.name for t in hub.tools}
        assert served == {n for n in workbench if n.split("__")[1] in EXAMPLE_SERVERS}
        found = hub.search("+slack send message", max_results=1).names
        assert found and found[0].startswith("mcp__slack__")
        result = hub.call_tool(found[0], {"channel": "#ci", "text": "green"})
        assert "nothing was done" in result.text and '"channel": "#ci"' in result.text


def test_a_server_name_the_catalogue_lacks_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--server", "nosuch"]) == 2
    assert "no tool of server 'nosuch'" in capsys.readouterr().err


def test_serve_without_a_config_points_to_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    from toolsearch.cli import main as cli

    assert cli(["serve"]) == 2
    assert "toolsearch serve --example-config > mcp.json" in capsys.readouterr().err


def test_the_readme_gateway_example_uses_the_shipped_config() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    gateway = readme.split("## MCP gateway", 1)[1].split("\n## ", 1)[0]
    assert "toolsearch serve --example-config > mcp.json" in gateway
    assert "tests/mcp_servers" not in gateway
