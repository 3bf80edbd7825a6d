"""Every path that reads a query or a tool's text is linear in its length.

Python's regular-expression engine holds the interpreter lock while it runs, so one pattern
that is quadratic on some input (``[.!?;]+\\s+`` tried at every dot of a long run of dots)
stalls every other request a shared gateway serves: 64 KB of dots took a minute. Each path here
runs on adversarial inputs of the size that can reach it — a query as large as the gateway's
4 MiB request body, which every backend must cut before any work (docs/security.md, "Query
size"), and a tool text of 256 KiB — under a bound a linear path meets many times over and a
quadratic one misses by hours. The bounds say "linear", not how fast: speed is measured by the
benchmarks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolsearch.backends.embedding import EmbeddingBackend, HashingEncoder
from toolsearch.backends.hybrid import HybridBackend
from toolsearch.backends.tool_text import name_words, tool_text
from toolsearch.engine import ToolSearch
from toolsearch.multistep import split_steps
from toolsearch.query import MAX_QUERY_CHARS, cut_query, parse_query
from toolsearch.textnorm import content_words, normalised_text
from toolsearch.tokenize import query_tokens, split_tool_name, tokenize
from toolsearch.tool import Tool

#: The gateway's largest request body: the largest query any client can send.
GATEWAY_BODY = 4 * 1024 * 1024
#: A tool text this long (a hostile server's description) is read whole by the lexical paths;
#: a quadratic path takes minutes on it.
TOOL_TEXT = 256 * 1024
#: Seconds any one path may take on the inputs above. The linear paths take well under a
#: second on a busy two-core machine; the quadratic splitter took 3 s on 16 KB, hours on 1 MB.
BOUND = 20.0


def _adversarial(size: int) -> dict[str, str]:
    """Inputs that drive backtracking, repeated matching or string growth in text code."""
    return {
        "dots": "a b c d e f g h " + "." * size,
        "dashes": "-" * size,
        "blanks": "a" + " " * size + "b",
        "blank lines": "a b c d e f g h" + "\n \n" * (size // 3),
        "camel case": "aA" * (size // 2),
        "one word": "a" * size,
        "ands": "read the file and " * (size // 18),
        "sentence ends": ". " * (size // 2),
        "list markers": "1. " * (size // 3),
        "required terms": "+ab " * (size // 4),
        "spaceless script": "天气" * (size // 2),
        "format characters": "x\u200b" * (size // 2),
    }


QUERY_INPUTS = _adversarial(GATEWAY_BODY)
TOOL_INPUTS = _adversarial(TOOL_TEXT)
TOOLS = [
    Tool("mcp__slack__send_message", "Send a message to a Slack channel"),
    Tool("mcp__github__create_issue", "Create an issue in a GitHub repository"),
    Tool("mcp__files__read_file", "Read a file from disk"),
]


def _timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def test_a_query_is_cut_at_the_cap_and_not_inside_a_word() -> None:
    assert cut_query("read a file") == "read a file"
    assert cut_query("x" * (MAX_QUERY_CHARS + 5)) == "x" * MAX_QUERY_CHARS
    words = "words " * (MAX_QUERY_CHARS // 5)  # the cap falls inside a word
    assert not words[MAX_QUERY_CHARS].isspace()
    cut = cut_query(words)
    assert MAX_QUERY_CHARS - len("words ") <= len(cut) <= MAX_QUERY_CHARS
    assert set(cut.split()) == {"words"}  # no half word at the end
    assert parse_query(words).raw == cut
    ends_between = "a " * (MAX_QUERY_CHARS // 2) + "tail"  # the cap falls after a blank
    assert cut_query(ends_between) == ends_between[:MAX_QUERY_CHARS]


TEXT_PATHS: dict[str, Callable[[str], object]] = {
    "split_steps": split_steps,
    "parse_query": parse_query,
    "query_tokens": lambda text: query_tokens(parse_query(text)),
    "tokenize": tokenize,
    "split_tool_name": split_tool_name,
    "content_words": content_words,
    "normalised_text": normalised_text,
    "name_words": name_words,
    "tool_text": lambda text: tool_text(Tool("mcp__s__t", text)),
}


@pytest.mark.parametrize("path", sorted(TEXT_PATHS))
def test_each_text_path_is_linear_on_a_long_text(path: str) -> None:
    run = TEXT_PATHS[path]
    took = {name: _timed(lambda t=text: run(t)) for name, text in TOOL_INPUTS.items()}
    slow = {name: round(t, 2) for name, t in took.items() if t > BOUND}
    assert not slow, f"{path} took over {BOUND} s on 256 KiB of: {slow}"


def test_split_steps_on_dots_regression() -> None:
    """The issue's own input: 16,000 dots took 1.4-3.3 s and 64 KB took 58 s."""
    for size in (16_000, 64 * 1024, GATEWAY_BODY):
        assert _timed(lambda s=size: split_steps("a b c d e f g h " + "." * s)) < BOUND


def _hashing_hybrid() -> HybridBackend:
    return HybridBackend(
        member_options={"embedding": {"encoder": HashingEncoder(), "cache_dir": None}},
        background=False,
    )


BACKENDS: dict[str, Callable[[], object]] = {
    "keyword": lambda: "keyword",
    "bm25": lambda: "bm25",
    "fts5": lambda: "fts5",
    "embedding": lambda: EmbeddingBackend(encoder=HashingEncoder(), cache_dir=False),
    "hybrid": _hashing_hybrid,
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_backend_cuts_a_gateway_sized_query_before_any_work(backend: str) -> None:
    engine = ToolSearch(TOOLS, backend=BACKENDS[backend]())  # type: ignore[arg-type]
    slow = {}
    for name, text in QUERY_INPUTS.items():
        took = _timed(lambda t=text: engine.search(t))
        if took > BOUND / 4:
            slow[name] = round(took, 2)
    assert not slow, f"{backend}: a 4 MiB query took over {BOUND / 4} s: {slow}"
    result = engine.search("send a message on slack " + "." * GATEWAY_BODY)
    assert len(result.query) <= MAX_QUERY_CHARS
    assert "mcp__slack__send_message" in result.names


def test_a_cut_query_ranks_as_its_first_part() -> None:
    engine = ToolSearch(TOOLS, backend="bm25")
    head = "read a file from disk "
    long_query = head + "zq " * GATEWAY_BODY
    assert engine.search(long_query).names == engine.search(cut_query(long_query)).names


def _shipped_tokenizer() -> Any:
    tokenizers = pytest.importorskip("tokenizers")
    folder = Path(__import__("toolsearch").__file__).parent / "models"
    found = sorted(folder.glob("*/tokenizer.json"))
    if not found:
        pytest.skip("no shipped model")
    tokenizer = tokenizers.Tokenizer.from_file(str(found[0]))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    return tokenizer


def test_the_encoder_tokenises_only_what_the_model_reads() -> None:
    """The tokenizer truncates after encoding the whole text; the encoder cuts first."""
    from toolsearch.backends.onnx_encoder import _tokenize

    tokenizer = _shipped_tokenizer()
    for name, text in QUERY_INPUTS.items():
        took = _timed(lambda t=text: _tokenize(tokenizer, [t]))
        assert took < BOUND / 4, f"tokenising a 4 MiB text of {name} took {took:.2f} s"
    prose = "read the quarterly report and summarise it for the team " * 20_000
    ids, _ = _tokenize(tokenizer, [prose])[0]
    assert list(ids) == tokenizer.encode(prose[:20_000]).ids  # the same first pieces
