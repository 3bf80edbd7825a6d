"""``toolsearch index`` and vector files: a catalogue stored once, held by a long lease, with
vectors encoded elsewhere and imported; interrupted runs resume (issue 56).

Against the real server of tests/conftest.py; nothing mocks the database.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

pytest.importorskip("psycopg")
pytest.importorskip("pgvector")

import numpy as np
import psycopg

from toolsearch.backends import postgres as postgres_module
from toolsearch.backends.postgres import PostgresBackend
from toolsearch.cli import main
from toolsearch.errors import ConfigError
from toolsearch.tool import Tool

TOOLS = [
    Tool(f"mcp__svc{i % 5}__op_{i:03d}", f"Operation {i} on the record of kind {i % 11}.")
    for i in range(120)
]


@pytest.fixture
def catalogue(tmp_path: Path) -> Path:
    path = tmp_path / "tools.jsonl"
    path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in TOOLS), encoding="utf-8")
    return path


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["index", *argv]) == 0
    record: dict[str, object] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return record


def test_vectors_encoded_elsewhere_are_imported_and_replicas_encode_nothing(
    postgres_url: str,
    catalogue: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLSEARCH_POSTGRES_URL", postgres_url)
    namespace = f"index-{uuid.uuid4()}"
    exported = _cli(
        capsys,
        *("--catalog", str(catalogue), "--option", "encoder=hashing"),
        *("--export-vectors", str(tmp_path / "v.npz")),
    )
    assert exported["vectors"] == len(TOOLS)
    stored = _cli(
        capsys,
        *("--catalog", str(catalogue), "--option", "encoder=hashing"),
        *("--vectors", str(tmp_path / "v.npz"), "--namespace", namespace),
    )
    assert (stored["written"], stored["encoded"], stored["imported"]) == (len(TOOLS), 0, len(TOOLS))
    # the command exited without releasing: its holder keeps the catalogue for --keep days
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        (days,) = conn.execute(
            "SELECT extract(epoch FROM expires_at - now()) / 86400 FROM toolsearch.holders "
            "WHERE namespace = %s AND holder = 'toolsearch-index'",
            (namespace,),
        ).fetchone() or (None,)
    assert days is not None and 29 < float(days) <= 30
    # a replica listing the same tools finds every one stored, with the vector it would encode
    with PostgresBackend(url=postgres_url, namespace=namespace, encoder="hashing") as replica:
        replica.index(TOOLS)
        assert (replica.written, replica.encoded) == (0, 0)
        (found,) = replica._retrying(
            "test",
            lambda conn: conn.execute(
                "SELECT embedding FROM toolsearch.tools WHERE namespace = %s AND name = %s",
                (namespace, TOOLS[7].name),
            ).fetchone(),
        )
        want = replica._vectors.tools([replica._vectors.text(TOOLS[7])])[0]
        assert np.allclose(found.to_numpy(), want, atol=1e-6)


def test_an_interrupted_index_resumes_where_it_stopped(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_module, "WRITE_CHUNK", 50)
    namespace = f"index-{uuid.uuid4()}"

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt  # after the first chunk committed

    first = PostgresBackend(url=postgres_url, namespace=namespace, encoder="hashing", holder="ix")
    with pytest.raises(KeyboardInterrupt):
        first.index(TOOLS, progress=interrupt)
    assert first.encoded == 50
    first.detach()
    seen: list[tuple[int, int]] = []
    with PostgresBackend(
        url=postgres_url, namespace=namespace, encoder="hashing", holder="ix"
    ) as second:
        second.index(TOOLS, progress=lambda done, total: seen.append((done, total)))
        assert second.encoded == len(TOOLS) - 50  # the stored chunk is not encoded again
        assert len(second) == len(TOOLS)
    assert seen == [(50, 120), (100, 120), (120, 120)]


def test_a_bad_vector_file_is_refused_naming_it(postgres_url: str, tmp_path: Path) -> None:
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a vector file")
    with pytest.raises(ConfigError, match=r"junk\.npz"):
        PostgresBackend(url=postgres_url, encoder="hashing", vectors=str(junk))
    other = tmp_path / "other.npz"
    np.savez(
        other,
        text_hashes=np.zeros((1, 16), dtype=np.uint8),
        vectors=np.zeros((1, 8), dtype=np.float32),
        encoder=np.array("some-other-model"),
        fields=np.array("name,description"),
    )
    with pytest.raises(ConfigError, match="some-other-model"):
        PostgresBackend(url=postgres_url, encoder="hashing", vectors=str(other))
