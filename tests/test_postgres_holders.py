"""Holders of the ``postgres`` backend: what each backend instance sees of a shared namespace.

Every instance is a holder: its searches see the tools it indexed, whatever any other instance
on the same namespace writes, removes or forgets (docs/postgres.md, "Sharing one namespace").
Against the real server of tests/conftest.py; processes killed with SIGKILL are in
tests/test_postgres_replicas.py.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from toolsearch.backends.postgres import PostgresBackend  # noqa: E402
from toolsearch.backends.postgres_text import query_lexemes  # noqa: E402
from toolsearch.query import parse_query  # noqa: E402
from toolsearch.tool import Tool, pool_order  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "toolsearch"]

GATEWAY = pool_order(
    [
        Tool(
            "mcp__slack__send_message",
            "Send a message to a Slack channel.",
            {"type": "object", "properties": {"channel": {}, "text": {}}},
        ),
        Tool("mcp__slack__list_channels", "List the channels of a Slack workspace."),
        Tool("mcp__github__create_issue", "Create a new issue in a GitHub repository."),
        Tool("mcp__weather__forecast", "Get the weather forecast for a city."),
    ]
)
OTHER = pool_order(
    [
        Tool("mcp__mail__send_email", "Send an email to a recipient."),
        Tool("mcp__jira__create_ticket", "Create a ticket in Jira."),
    ]
)
QUERIES = ["send a message on slack", "create an issue", "weather in Paris", "slack channels"]


def _backend(url: str, namespace: str, **options: Any) -> PostgresBackend:
    options.setdefault("encoder", "hashing")
    return PostgresBackend(url=url, namespace=namespace, **options)


def _answers(backend: PostgresBackend) -> list[list[str]]:
    return [[h.name for h in backend.search(parse_query(q), 5)] for q in QUERIES]


@pytest.fixture
def namespace() -> str:
    return f"holders-{uuid.uuid4()}"


def test_a_cli_search_leaves_a_running_gateways_results(postgres_url: str, namespace: str) -> None:
    with _backend(postgres_url, namespace) as gateway:
        gateway.index(GATEWAY)
        before = _answers(gateway)
        env = {
            **os.environ,
            "TOOLSEARCH_POSTGRES_URL": postgres_url,
            "TOOLSEARCH_BACKEND": "postgres",
            "TOOLSEARCH_BACKEND_OPTIONS": json.dumps(
                {"namespace": namespace, "encoder": "hashing"}
            ),
        }
        done = subprocess.run(
            [*CLI, "search", "send email", "--json", "--catalog", str(ROOT / "datasets/starter")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["matches"]  # the CLI searched its own catalogue
        assert _answers(gateway) == before
        assert len(gateway) == len(GATEWAY)


def test_a_starting_holders_empty_index_leaves_the_others(
    postgres_url: str, namespace: str
) -> None:
    with _backend(postgres_url, namespace) as running:
        running.index(GATEWAY)
        before = _answers(running)
        with _backend(postgres_url, namespace) as starting:
            starting.index([])
            assert len(starting) == 0 and starting.search(parse_query("slack"), 5) == []
            assert _answers(running) == before and len(running) == len(GATEWAY)
            starting.index(GATEWAY)
            assert starting.encoded == 0  # the content was there: nothing encoded again
            assert _answers(starting) == before


def test_one_holder_losing_a_server_leaves_the_others_results(
    postgres_url: str, namespace: str
) -> None:
    slack = [t.name for t in GATEWAY if t.name.startswith("mcp__slack__")]
    with _backend(postgres_url, namespace) as a, _backend(postgres_url, namespace) as b:
        a.index(GATEWAY)
        b.index(GATEWAY)
        before = _answers(b)
        a.remove(slack)
        assert not {h.name for h in a.search(parse_query("slack message"), 5)} & set(slack)
        assert _answers(b) == before
        a.index([t for t in GATEWAY if t.name not in slack])  # a full re-list agrees
        assert _answers(b) == before and len(b) == len(GATEWAY)


def test_holders_with_different_sets_and_versions_each_see_their_own(
    postgres_url: str, namespace: str
) -> None:
    forecast = next(t for t in GATEWAY if t.name == "mcp__weather__forecast")
    newer = replace(forecast, description="Get the hourly weather forecast for any town.")
    mine = [*GATEWAY]
    theirs = pool_order([*OTHER, newer])
    with _backend(postgres_url, namespace) as a, _backend(postgres_url, namespace) as b:
        a.index(mine)
        b.index(theirs)
        assert set(a.tools) == {t.name for t in mine}
        assert set(b.tools) == {t.name for t in theirs}
        assert a.tools[forecast.name] == forecast and b.tools[forecast.name] == newer
        assert {h.name for h in b.search(parse_query("slack message"), 10)} <= set(b.tools)
        assert [h.name for h in b.search(parse_query("send an email"), 1)] == [
            "mcp__mail__send_email"
        ]
        a.upsert([replace(forecast, description="Changed again by the first holder.")])
        assert b.tools[forecast.name] == newer


def test_a_removed_tool_never_comes_back(postgres_url: str, namespace: str) -> None:
    gone = GATEWAY[0]
    with _backend(postgres_url, namespace) as a, _backend(postgres_url, namespace) as b:
        a.index(GATEWAY)
        b.index(GATEWAY)
        a.remove([gone.name])
        b.upsert([replace(gone, description="Send a message, rewritten by another holder.")])
        b.index(GATEWAY)
        a.upsert([GATEWAY[1]])  # writing again re-applies nothing removed
        assert gone.name not in a.tools
        assert gone.name not in {h.name for q in QUERIES for h in a.search(parse_query(q), 10)}


def test_close_releases_the_holders_holdings_at_once(postgres_url: str, namespace: str) -> None:
    a = _backend(postgres_url, namespace)
    a.index(GATEWAY)
    holder = a.holder
    a.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        (held,) = conn.execute(
            "SELECT count(*) FROM toolsearch.holdings WHERE namespace = %s AND holder = %s",
            (namespace, holder),
        ).fetchone()
    assert held == 0
    with _backend(postgres_url, namespace) as again:
        again.index(GATEWAY)
        assert again.encoded == 0  # released content is retained for reuse


def test_a_holder_of_a_small_part_of_a_large_namespace_finds_its_tools(
    postgres_url: str, namespace: str
) -> None:
    """Hundreds of better-matching rows held by another holder (past the rows a ranking
    fetches, and in the HNSW index) never hide a holder's own tools."""
    crowd = [
        Tool(f"mcp__crowd__send_message_{i}", f"Send a message to channel {i} now.")
        for i in range(400)
    ]
    mine = [
        Tool("mcp__mail__send_email", "Send an email message to a recipient."),
        Tool("mcp__sms__send_text", "Send a short text message to a phone."),
    ]
    options = {"hnsw_min_rows": 100, "min_similarity": None}
    with (
        _backend(postgres_url, namespace, **options) as other,
        _backend(postgres_url, namespace, **options) as holder,
    ):
        other.index(crowd)
        holder.index(mine)
        query = parse_query("send a message to channel")
        found = [h.name for h in holder.search(query, 5)]
        assert sorted(found) == sorted(t.name for t in mine)
        words = query_lexemes(query)  # the full-text ranking alone, too
        lexical = holder._retrying("search", lambda conn: holder._lexical(conn, words, 50))
        assert sorted(name for name, _, _ in lexical) == sorted(t.name for t in mine)


def test_a_backend_nobody_closed_is_released_when_collected(
    postgres_url: str, namespace: str
) -> None:
    """The heartbeat thread does not keep an abandoned instance alive (a benchmark or CLI run
    that drops its backends releases them, connections and holdings)."""
    import gc

    backend = _backend(postgres_url, namespace)
    backend.index(GATEWAY)
    holder, thread = backend.holder, backend._heartbeat
    del backend
    deadline = time.monotonic() + 30  # a generous wait, not a speed claim
    while thread is not None and thread.is_alive() and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.1)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        (held,) = conn.execute(
            "SELECT count(*) FROM toolsearch.holdings WHERE namespace = %s AND holder = %s",
            (namespace, holder),
        ).fetchone()
    assert held == 0 and thread is not None and not thread.is_alive()


def test_searches_in_several_threads_beside_one_writer(postgres_url: str, namespace: str) -> None:
    """The gateway's shape: one thread writes while several search. Every search answers,
    and only with tools this holder held at some point — never another holder's."""
    with _backend(postgres_url, namespace) as other, _backend(postgres_url, namespace) as own:
        other.index(OTHER)
        own.index(GATEWAY)
        errors: list[BaseException] = []
        seen: set[str] = set()
        stop = threading.Event()

        def search() -> None:
            while not stop.is_set():
                try:
                    for q in [*QUERIES, "send an email", "create a ticket"]:
                        seen.update(h.name for h in own.search(parse_query(q), 5))
                except BaseException as exc:  # reported below
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=search) for _ in range(4)]
        for thread in threads:
            thread.start()
        for round_ in range(15):
            own.remove([GATEWAY[round_ % len(GATEWAY)].name])
            own.upsert([GATEWAY[round_ % len(GATEWAY)]])
            own.index(GATEWAY[: 1 + round_ % len(GATEWAY)])
            other.index(OTHER[round_ % 2 :])  # another holder writes meanwhile
        own.index(GATEWAY)
        stop.set()
        for thread in threads:
            thread.join(30)
        assert not errors, errors[0]
        assert seen and seen <= {t.name for t in GATEWAY}
        assert _answers(own)[0][0] == "mcp__slack__send_message"


def test_released_content_goes_after_the_retention(postgres_url: str, namespace: str) -> None:
    with _backend(postgres_url, namespace) as keeper:
        keeper.index(GATEWAY[:1])
        with _backend(postgres_url, namespace) as leaving:
            leaving.index(GATEWAY)
        assert keeper.collect_garbage() == (0, 0)  # retained for a day by default
        with _backend(postgres_url, namespace, retention=0) as collector:
            assert collector.collect_garbage() == (0, len(GATEWAY) - 1)
        assert set(keeper.tools) == {GATEWAY[0].name}
        assert keeper.search(parse_query("send a message on slack"), 1)[0].name == GATEWAY[0].name


def test_version_1_rows_become_reusable_content(postgres_url: str, namespace: str) -> None:
    """A schema written by the previous version (one row per tool name, no holders) is
    migrated: its rows become content no one holds, kept for reuse, so the first ``index``
    after the upgrade encodes nothing."""
    from toolsearch.backends.postgres_schema import MIGRATIONS

    schema = f"v1_{uuid.uuid4().hex[:12]}"
    with _backend(postgres_url, namespace) as source:
        source.index(GATEWAY)
        expected = _answers(source)
    columns = "namespace, name, mcp, hash, text_hash, definition, document, embedding"
    with psycopg.connect(postgres_url, autocommit=True) as conn, conn.transaction():
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.meta (key text PRIMARY KEY, value text NOT NULL)")
        for statement in MIGRATIONS[0]:
            conn.execute(statement.format(s=schema))
        conn.execute(f"INSERT INTO {schema}.meta VALUES ('schema_version', '1')")
        conn.execute(
            f"INSERT INTO {schema}.catalogues (namespace, encoder, text_fields, dim, "
            "tokenizer_version, generation) SELECT namespace, encoder, text_fields, dim, "
            "tokenizer_version, 7 FROM toolsearch.catalogues WHERE namespace = %s",
            (namespace,),
        )
        conn.execute(
            f"INSERT INTO {schema}.tools ({columns}) SELECT DISTINCT ON (name) {columns} "
            "FROM toolsearch.tools WHERE namespace = %s",
            (namespace,),
        )
    with _backend(postgres_url, namespace, schema=schema) as upgraded:
        assert len(upgraded) == 0  # nobody holds the old rows
        upgraded.index(GATEWAY)
        assert (upgraded.encoded, upgraded.written) == (0, 0)
        assert _answers(upgraded) == expected


# ---------------------------------------------------------------------------- the change feed


def _subscribe(backend: PostgresBackend) -> tuple[list[int], threading.Event]:
    heard: list[int] = []
    event = threading.Event()

    def note(generation: int) -> None:
        heard.append(generation)
        event.set()

    backend.on_change(note)
    return heard, event


def _heard_after_write(backend: PostgresBackend, event: threading.Event, tag: str) -> bool:
    for attempt in range(10):
        event.clear()
        backend.upsert([Tool(f"mcp__feed__{tag}_{attempt}", "A tool written to be heard.")])
        if event.wait(1.0):
            return True
    return False


SPOOFS = [
    '{"namespace": "NS", "generation": "oops"}',
    '{"namespace": "NS", "generation": 999999999}',
    '{"namespace": "NS", "generation": [1]}',
    '{"namespace": "NS", "generation": 1e400}',
    '{"namespace": "NS"}',
    '{"namespace": ["NS"], "generation": 1}',
    "[" * 3000 + "]" * 3000,
    "not json at all",
    "",
    '"NS"',
]


def test_spoofed_notifications_neither_kill_nor_fool_the_listener(
    postgres_url: str, namespace: str
) -> None:
    with _backend(postgres_url, namespace) as backend:
        backend.index(GATEWAY)
        heard, event = _subscribe(backend)
        assert _heard_after_write(backend, event, "first")
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for spoof in SPOOFS:
                payload = spoof.replace("NS", namespace)
                conn.execute("SELECT pg_notify(%s, %s)", (backend.channel, payload))
        time.sleep(1.5)
        assert 999999999 not in heard  # a notification is a hint: the table says
        assert all(g <= backend.generation for g in heard)
        assert _heard_after_write(backend, event, "after")


def test_a_listener_that_dies_is_restarted(postgres_url: str, namespace: str) -> None:
    with _backend(postgres_url, namespace) as backend:
        backend.index(GATEWAY)
        _, event = _subscribe(backend)
        assert _heard_after_write(backend, event, "first")
        thread = backend._listener
        assert thread is not None and thread.ident is not None
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(RuntimeError)
        )
        time.sleep(1.5)
        assert _heard_after_write(backend, event, "after")
