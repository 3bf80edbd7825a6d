"""Values expanded from ``${VAR}`` in an MCP config never appear in what toolsearch shows: config
errors quote the file as written, and every server error — the server's own stderr included —
has them written back as ``${VAR}`` before a log, a search result or a client sees it."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from toolsearch.mcp.config import McpConfigError, parse_mcp_config
from toolsearch.mcp.hub import McpHub

SECRET = "sk-live-4f9a1c0e77d2b3a5"
ENVIRON = {"SECRET_KEY": SECRET, "OTHER": "sk-live-4f9a1c"}  # a value inside another one
PRINT_ARGUMENT = "import sys; print('starting with', sys.argv[1:], file=sys.stderr); sys.exit(3)"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_config_error_quotes_the_url_as_written() -> None:
    entry = {"url": "ftp://example.com/mcp?key=${SECRET_KEY}"}
    with pytest.raises(McpConfigError) as caught:
        parse_mcp_config({"mcpServers": {"s": entry}}, environ=ENVIRON)
    assert SECRET not in str(caught.value)
    assert "ftp://example.com/mcp?key=${SECRET_KEY}" in str(caught.value)


def test_redact_writes_each_value_back_as_its_variable() -> None:
    entry = {"command": "run", "args": ["--key", "${SECRET_KEY}", "--other=${OTHER}", "${NONE:-x}"]}
    (server,) = parse_mcp_config({"mcpServers": {"s": entry}}, environ=ENVIRON)
    assert server.args == ("--key", SECRET, "--other=sk-live-4f9a1c", "x")
    assert server.redact(f"a {SECRET} b sk-live-4f9a1c c") == "a ${SECRET_KEY} b ${OTHER} c"
    assert server.describe() == "run --key ${SECRET_KEY} --other=${OTHER} x"
    assert SECRET not in repr(server) and "${SECRET_KEY}" in repr(server)


def _failed_servers(entries: dict[str, dict[str, Any]]) -> dict[str, str]:
    config = parse_mcp_config({"mcpServers": entries}, environ=ENVIRON)

    async def run() -> dict[str, str]:
        async with McpHub(config, backend="keyword") as hub:
            with anyio.fail_after(60):
                await hub.wait_ready()
            # What search_tools puts in failed_mcp_servers for the model and every client.
            found = hub.search("anything")
            failed = dict(found.failed_servers)
            assert failed == {name: hub.servers[name].error for name in entries}
            assert all(error in found.text() for error in failed.values())
            return failed

    return anyio.run(run)


@pytest.mark.timeout(120)
def test_server_errors_and_stderr_never_show_an_expanded_value() -> None:
    failed = _failed_servers(
        {
            "stderr": {"command": sys.executable, "args": ["-c", PRINT_ARGUMENT, "${SECRET_KEY}"]},
            "cwd": {"command": sys.executable, "cwd": "/nonexistent/${SECRET_KEY}"},
            "command": {"command": "/nonexistent/${SECRET_KEY}/server"},
            "http": {"url": "http://127.0.0.1:9/mcp?key=${SECRET_KEY}"},
        }
    )
    assert set(failed) == {"stderr", "cwd", "command", "http"}
    for name, error in failed.items():
        assert SECRET not in error and "sk-live" not in error, (name, error)
    assert "starting with ['${SECRET_KEY}']" in failed["stderr"]
    assert "/nonexistent/${SECRET_KEY}" in failed["cwd"]
    assert "/nonexistent/${SECRET_KEY}/server" in failed["command"]


PASSWORD = "p@ss/w0rd+x y&z=1%"


def test_redact_finds_a_value_url_encoded() -> None:
    from urllib.parse import quote, quote_plus

    entry = {"url": "https://example.com/mcp", "headers": {"Authorization": "Basic ${PASSWORD}"}}
    (server,) = parse_mcp_config(
        {"mcpServers": {"s": entry}}, environ={**ENVIRON, "PASSWORD": PASSWORD}
    )
    encoded = [quote(PASSWORD, safe=""), quote(PASSWORD), quote_plus(PASSWORD)]
    encoded.append(quote(PASSWORD, safe="").lower())
    for form in encoded:
        assert server.redact(f"GET /mcp?password={form} failed") == (
            "GET /mcp?password=${PASSWORD} failed"
        ), form


# A server that writes its secret, then so much that the stderr window (the last 8 KiB) starts
# inside the secret, then the URL-encoded secret, then fails.
CUT_SECRET = """\
import sys, urllib.parse
secret = sys.argv[1]
url = "url ?key=" + urllib.parse.quote(sys.argv[2], safe="") + "\\n"
# the window (the last 8 KiB) holds the secret's last 10 characters and what follows
sys.stderr.write("token " + secret + "z" * (8192 - 10 - 1 - len(url)) + "\\n" + url)
sys.stderr.flush()
sys.exit(3)
"""


@pytest.mark.timeout(120)
def test_a_secret_cut_by_the_stderr_window_or_url_encoded_is_redacted() -> None:
    from urllib.parse import quote

    environ = {**ENVIRON, "PASSWORD": PASSWORD}
    args = ["-c", CUT_SECRET, "${SECRET_KEY}", "${PASSWORD}"]
    config = parse_mcp_config(
        {"mcpServers": {"cut": {"command": sys.executable, "args": args}}}, environ=environ
    )

    async def run() -> str:
        async with McpHub(config, backend="keyword") as hub:
            with anyio.fail_after(60):
                await hub.wait_ready()
            return hub.failed_servers["cut"]

    error = anyio.run(run)
    assert "zzzz" in error and "url ?key=${PASSWORD}" in error, error
    assert SECRET[-10:] not in error and SECRET[-4:] + "zzz" not in error, error
    assert quote(PASSWORD, safe="") not in error and PASSWORD not in error, error
