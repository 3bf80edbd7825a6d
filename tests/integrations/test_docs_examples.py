"""The integration pages' examples run as printed and print what the pages say, their
install lines install what the examples need, and the test agents' figures the pages quote
are the ones the tests measure."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "integrations"
PAGES = [
    "index.md",
    "langchain.md",
    "openai-agents.md",
    "pydantic-ai.md",
    "google-adk.md",
    "crewai.md",
]
#: the extra that installs each framework, by the top-level module an example imports
FRAMEWORK_EXTRAS = {
    "langchain": "langchain",
    "langchain_core": "langchain",
    "langgraph": "langchain",
    "langgraph_bigtool": "langchain",
    "agents": "openai-agents",
    "pydantic_ai": "pydantic-ai",
    "google": "google-adk",
    "crewai": "crewai",
}
RUNNABLE = re.compile(
    r"```python\n((?:(?!```).)*)```\s*(?:It prints:\s*)?```text\n((?:(?!```).)*)```", re.S
)
INSTALL = re.compile(r"pip install '(toolsearch\[[^\]]*\])'")
#: warnings the framework raises itself (CrewAI's imports and Agent set-up, and pydantic on a
#: catalogue argument named "schema"), which -W error would turn into the example's failure
FRAMEWORK_WARNINGS = {
    "crewai.md": (
        "ignore::ImportWarning",
        "ignore::DeprecationWarning:crewai.agent.core",
        "ignore::UserWarning:pydantic.main",
    ),
}
#: frameworks that print progress of their own to stdout around the example's lines
OWN_OUTPUT = {"crewai.md"}
QUIET = {"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_TRACING_ENABLED": "false"}


def runnable_examples() -> list[tuple[str, int, str, str]]:
    """Every Python block followed by the text block it prints: (page, index, code, text)."""
    found = []
    for page in PAGES:
        text = (DOCS / page).read_text(encoding="utf-8")
        for index, match in enumerate(RUNNABLE.finditer(text)):
            found.append((page, index, match.group(1), match.group(2)))
    return found


@pytest.mark.parametrize(
    ("page", "index", "code", "printed"),
    runnable_examples(),
    ids=[f"{page}#{index}" for page, index, _, _ in runnable_examples()],
)
def test_the_example_prints_what_the_page_says(
    page: str, index: int, code: str, printed: str, tmp_path: Path
) -> None:
    for module in needed_modules(code):
        pytest.importorskip(module, reason="needs the framework's extra")
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    flags = [f"-W{rule}" for rule in FRAMEWORK_WARNINGS.get(page, ())]
    run = subprocess.run(
        [sys.executable, "-W", "error", *flags, str(script)],
        env={**os.environ, **QUIET},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    if page in OWN_OUTPUT:
        assert printed in run.stdout, f"{page}: update the printed block to\n{run.stdout}"
    else:
        assert run.stdout == printed, f"{page}: update the printed block to\n{run.stdout}"


def needed_modules(code: str) -> set[str]:
    """The top-level modules a code block imports."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.split(".")[0])
    return modules


def needed_extras(code: str) -> set[str]:
    """The toolsearch extras a code block needs: its framework's, bm25 for the bm25
    backend, mcp for the MCP hub."""
    modules = needed_modules(code)
    extras = {FRAMEWORK_EXTRAS[m] for m in modules if m in FRAMEWORK_EXTRAS}
    if re.search(r"backend=\"bm25\"", code):
        extras.add("bm25")
    if "toolsearch.mcp" in code:
        extras.add("mcp")
    return extras


def install_extras(line: str) -> set[str]:
    return {e.strip() for e in line[len("toolsearch[") : -1].split(",")}


@pytest.mark.parametrize("page", PAGES)
def test_each_install_line_installs_what_the_examples_after_it_need(page: str) -> None:
    """Each Python block is preceded by an install line (the nearest one above it) whose
    extras exist and cover what the block imports and the backend it names."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    text = (DOCS / page).read_text(encoding="utf-8")
    for block in re.finditer(r"```python\n(.*?)```", text, re.S):
        needs = needed_extras(block.group(1))
        if not needs:
            continue
        lines = INSTALL.findall(text[: block.start()])
        assert lines, f"{page}: no install line before a block that needs {sorted(needs)}"
        extras = install_extras(lines[-1])
        assert extras <= set(declared), f"{page}: {lines[-1]} names an unknown extra"
        missing = needs - extras
        assert not missing, f"{page}: {lines[-1]} lacks {sorted(missing)} for:\n{block.group(1)}"
