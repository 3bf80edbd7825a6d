"""Each framework page's example runs as printed, and prints what the page says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations"
PAGES = {
    "langchain.md": "langchain.agents",
    "openai-agents.md": "agents.testing",
    "pydantic-ai.md": "pydantic_ai",
    "google-adk.md": "google.adk",
    "crewai.md": "crewai",
}
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


def example(page: str) -> tuple[str, str]:
    """The page's first Python block and the text block after "It prints:"."""
    text = (DOCS / page).read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S)
    printed = re.search(r"It prints:\n\n```text\n(.*?)```", text, re.S)
    assert code is not None and printed is not None, page
    return code.group(1), printed.group(1)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_example_prints_what_the_page_says(page: str, tmp_path: Path) -> None:
    pytest.importorskip(PAGES[page], reason="needs the framework's extra")
    code, printed = example(page)
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
        assert printed in run.stdout
    else:
        assert run.stdout == printed
