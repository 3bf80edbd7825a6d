"""Query adapters: the file round trip and every way a file can be wrong, training (it learns a
map the base vectors do not have, deterministically), the embedding backend applying it, and
``toolsearch train``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from toolsearch.backends.embedding import EmbeddingBackend, HashingEncoder  # noqa: E402
from toolsearch.backends.embedding_cache import normalise  # noqa: E402
from toolsearch.backends.query_adapter import (  # noqa: E402
    FORMAT,
    QueryAdapter,
    TrainingSet,
    TrainingSettings,
    load_adapter,
    train_adapter,
    train_on_datasets,
)
from toolsearch.cli import main  # noqa: E402
from toolsearch.dataset import load_dataset  # noqa: E402
from toolsearch.errors import BackendError, ConfigError  # noqa: E402
from toolsearch.query import parse_query  # noqa: E402
from toolsearch.tool import Tool  # noqa: E402

WORKBENCH = Path(__file__).resolve().parents[1] / "datasets" / "mcp-workbench"
DIM = 16


def _adapter(weights: Any = None, encoder: str = "enc") -> QueryAdapter:
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(DIM, DIM)).astype("float32") if weights is None else weights
    return QueryAdapter(matrix, encoder, {"note": "test"})


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    adapter = _adapter()
    path = adapter.save(tmp_path / "sub" / "a.npz")
    loaded = load_adapter(path, "enc", DIM)
    assert np.array_equal(loaded.weights, adapter.weights)
    assert (loaded.encoder, loaded.info, loaded.dim) == ("enc", {"note": "test"}, DIM)


def test_apply_is_identity_plus_the_map_normalised() -> None:
    weights = np.zeros((DIM, DIM), dtype="float32")
    weights[0, 1] = 1.0  # adds the first coordinate to the second
    vectors = np.eye(DIM, dtype="float32")[:2]
    mapped = _adapter(weights).apply(vectors)
    assert np.allclose(mapped[0, :2], [2**-0.5, 2**-0.5])
    assert np.allclose(mapped[1], vectors[1])
    assert np.allclose(np.linalg.norm(mapped, axis=1), 1.0)


def _write_npz(path: Path, **arrays: Any) -> Path:
    with open(path, "wb") as out:
        np.savez(out, **arrays)
    return path


def _header(**fields: Any) -> Any:
    return np.array(json.dumps({"format": FORMAT, "encoder": "enc", **fields}))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing.npz", "does not exist"),
        (lambda p: p, "does not exist"),  # a folder
        (lambda p: (p / "a.npz").write_text("not numpy") and p / "a.npz", "is not an adapter"),
        (
            lambda p: _write_npz(p / "a.npz", weights=np.zeros((DIM, DIM))),
            "is not an adapter",
        ),
        (
            lambda p: _write_npz(
                p / "a.npz", weights=np.zeros((DIM, DIM)), header=_header(format=9)
            ),
            "unknown format",
        ),
        (
            lambda p: _write_npz(p / "a.npz", weights=np.zeros((DIM, 3)), header=_header()),
            "no square matrix",
        ),
        (
            lambda p: _write_npz(
                p / "a.npz", weights=np.zeros((DIM, DIM)), header=_header(encoder="other")
            ),
            "trained on vectors of 'other'",
        ),
        (
            lambda p: _write_npz(p / "a.npz", weights=np.zeros((8, 8)), header=_header()),
            "8-dimensional",
        ),
    ],
)
def test_bad_adapter_files_are_named(tmp_path: Path, make: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_adapter(make(tmp_path), "enc", DIM)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("steps", 0),
        ("steps", 1.5),
        ("batch_size", True),
        ("learning_rate", 0),
        ("temperature", -1.0),
        ("temperature", "0.1"),
    ],
)
def test_bad_training_settings(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=field):
        TrainingSettings(**{field: value})


def _vectors(rows: int, seed: int) -> Any:
    return normalise(np.random.default_rng(seed).normal(size=(rows, DIM)).astype("float32"))


@pytest.mark.parametrize(
    ("queries", "targets", "tools", "message"),
    [
        (_vectors(0, 1), [], _vectors(4, 2), "no labelled query"),
        (_vectors(3, 1), [[0], [1]], _vectors(4, 2), "2 target lists for 3 query vectors"),
        (_vectors(2, 1), [[0], [1]], np.zeros((4, 8), dtype="float32"), "different sizes"),
        (_vectors(2, 1), [[0], []], _vectors(4, 2), "query 1 has no gold tool"),
        (_vectors(2, 1), [[0], [7]], _vectors(4, 2), "query 1 has no gold tool"),
    ],
)
def test_bad_training_sets(queries: Any, targets: Any, tools: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainingSet(queries, targets, tools)


def _rotated_task(seed: int, n: int) -> tuple[TrainingSet, TrainingSet]:
    """Queries that are a fixed rotation of their gold tool's vector plus noise: the base
    vectors rank them badly, a linear map can undo the rotation. Train and held-out halves."""
    rng = np.random.default_rng(seed)
    tools = _vectors(40, seed)
    rotation, _ = np.linalg.qr(rng.normal(size=(DIM, DIM)))
    gold = rng.integers(0, len(tools), size=2 * n)
    noisy = tools[gold] @ rotation.astype("float32") + 0.1 * rng.normal(size=(2 * n, DIM))
    queries = normalise(noisy.astype("float32"))
    targets = [[int(g)] for g in gold]
    return (
        TrainingSet(queries[:n], targets[:n], tools),
        TrainingSet(queries[n:], targets[n:], tools),
    )


def _accuracy(data: TrainingSet, adapter: QueryAdapter | None = None) -> float:
    queries = adapter.apply(data.queries) if adapter is not None else data.queries
    best = np.argmax(queries @ data.tools.T, axis=1)
    return float(np.mean([int(b) in gold for b, gold in zip(best, data.targets, strict=True)]))


def test_training_learns_what_the_base_vectors_miss() -> None:
    pytest.importorskip("torch")
    train, held_out = _rotated_task(seed=3, n=300)
    settings = TrainingSettings(steps=200, learning_rate=1e-2, temperature=0.1)
    adapter = train_adapter([train], encoder="enc", settings=settings)
    assert _accuracy(held_out) < 0.3
    assert _accuracy(held_out, adapter) > 0.9
    assert adapter.info["loss_last"] < adapter.info["loss_first"]
    again = train_adapter([train], encoder="enc", settings=settings)
    assert np.array_equal(adapter.weights, again.weights)  # same seed, same adapter


def test_training_rejects_mixed_sizes() -> None:
    small = TrainingSet(_vectors(2, 1), [[0], [1]], _vectors(4, 2))
    other = TrainingSet(np.ones((2, 8), dtype="float32"), [[0], [1]], np.ones((4, 8), "float32"))
    with pytest.raises(ConfigError, match="different sizes"):
        train_adapter([small, other], encoder="enc")
    with pytest.raises(ConfigError, match="no catalogue"):
        train_adapter([], encoder="enc")


TOOLS = [
    Tool("send_message", "Send a chat message to a channel."),
    Tool("create_event", "Create a calendar event with attendees."),
    Tool("read_file", "Read a file from disk."),
]


def _swap_adapter(backend: EmbeddingBackend) -> QueryAdapter:
    """An adapter that turns the query 'chat message' into the vector of create_event."""
    query = backend._encode_queries(["chat message"])[0]
    target = backend.encode_tools([TOOLS[1]])[0]
    # v + v·W = target for v = query: W = outer(query, target - query) / |query|^2
    weights = np.outer(query, target - query).astype("float32")
    return QueryAdapter(weights, backend.encoder.name)


def test_the_backend_applies_an_adapter(tmp_path: Path) -> None:
    plain = EmbeddingBackend(encoder=HashingEncoder(dim=64), cache_dir=None)
    plain.index(TOOLS)
    assert plain.search(parse_query("chat message"), 1)[0].name == "send_message"
    path = _swap_adapter(plain).save(tmp_path / "swap.npz")
    adapted = EmbeddingBackend(encoder=HashingEncoder(dim=64), cache_dir=None, query_adapter=path)
    adapted.index(TOOLS)
    assert adapted.search(parse_query("chat message"), 1)[0].name == "create_event"
    assert adapted.params()["query_adapter"] == str(path)
    fresh = EmbeddingBackend(encoder=HashingEncoder(dim=64), cache_dir=None, query_adapter=path)
    fresh.remember_queries(["chat message", "read a file"])  # batched: the same vectors
    batched = fresh._query_vectors["chat message"]
    assert np.allclose(batched, adapted.query_vector("chat message"), atol=1e-6)


def test_an_adapter_of_another_encoder_or_size_is_refused(tmp_path: Path) -> None:
    path = _adapter(encoder="st:some-other-model").save(tmp_path / "a.npz")
    with pytest.raises(ConfigError, match="not of this backend's encoder"):
        EmbeddingBackend(encoder=HashingEncoder(dim=64), cache_dir=None, query_adapter=path)
    with pytest.raises(ConfigError, match="query_adapter must be a path"):
        EmbeddingBackend(encoder=HashingEncoder(), cache_dir=None, query_adapter=3)  # type: ignore[arg-type]
    encoder = HashingEncoder(dim=64)
    wrong_size = _adapter(encoder=encoder.name).save(tmp_path / "b.npz")  # 16 x 16
    backend = EmbeddingBackend(encoder=encoder, cache_dir=None, query_adapter=wrong_size)
    backend.index(TOOLS)
    with pytest.raises(BackendError, match="16-dimensional"):
        backend.search(parse_query("chat message"), 1)


def test_train_on_a_dataset_lifts_its_own_queries() -> None:
    pytest.importorskip("torch")
    dataset = load_dataset(WORKBENCH)
    backend = EmbeddingBackend(encoder=HashingEncoder(dim=64), cache_dir=None)
    queries = [q for q in dataset.queries if dataset.qrels.get(q.id)][:300]
    adapter = train_on_datasets(backend, [(dataset, queries)], TrainingSettings(steps=100))
    assert adapter.info["datasets"] == ["mcp-workbench"]
    assert adapter.info["queries"] == 300
    assert adapter.info["loss_last"] < adapter.info["loss_first"]
    negatives = [q for q in dataset.queries if not dataset.qrels.get(q.id)][:5]
    with pytest.raises(ConfigError, match="no labelled query"):
        train_on_datasets(backend, [(dataset, negatives)])


def test_cli_train_writes_an_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    import toolsearch.registry

    def hashing_backend(name: str, **options: Any) -> EmbeddingBackend:
        assert name == "embedding" and "query_adapter" not in options
        return EmbeddingBackend(encoder=HashingEncoder(dim=64), cache_dir=None)

    monkeypatch.setattr(toolsearch.registry, "load_backend", hashing_backend)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "adapter.npz"
    argv = ["train", str(WORKBENCH), "--out", str(out), "--steps", "20"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f'query_adapter = "{out}"' in printed
    assert f"--option embedding.query_adapter={out}" in printed
    assert load_adapter(out, HashingEncoder(dim=64).name, 64).info["datasets"] == ["mcp-workbench"]
    assert main(argv) == 2  # exists: not overwritten without --force
    assert "pass --force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0


def test_cli_train_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["train", str(WORKBENCH), "--out", str(tmp_path / "a.npz"), "--steps", "0"])
    with pytest.raises(SystemExit):
        main(["train", str(WORKBENCH)])  # --out is required
    assert main(["train", str(tmp_path / "nowhere"), "--out", str(tmp_path / "a.npz")]) == 2
    assert not (tmp_path / "a.npz").exists()
