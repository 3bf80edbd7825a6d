"""Fine-tuning the embedding model (``toolsearch.backends.fine_tuning``, ``toolsearch train
--full``): the training pairs, bad input, and a real training run that the backend then uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolsearch.backends.fine_tuning import Recipe, fine_tune, training_pairs
from toolsearch.backends.tool_text import DEFAULT_FIELDS, tool_text
from toolsearch.cli import main
from toolsearch.dataset import load_dataset
from toolsearch.errors import ConfigError
from toolsearch.tool import Tool

TOOLS = [
    Tool("mcp__weather__forecast", "Get the weather forecast for a city."),
    Tool("mcp__mail__send_email", "Send an email to a recipient."),
    Tool("mcp__calendar__create_event", "Create an event in the calendar."),
    Tool("mcp__files__read_file", "Read a file from the local disk."),
]
REQUESTS = {
    "mcp__weather__forecast": ["will it rain in Oslo tomorrow", "how hot is Lisbon this week"],
    "mcp__mail__send_email": ["write to Ana about the invoice", "drop Bo a note that I'm late"],
    "mcp__calendar__create_event": ["book Friday 3pm for the review", "put lunch with Chen on"],
    "mcp__files__read_file": ["show me what notes.txt says", "open the config and print it"],
}


def _write_dataset(folder: Path) -> Path:
    folder.mkdir()
    (folder / "tools.jsonl").write_text("".join(json.dumps(t.to_dict()) + "\n" for t in TOOLS))
    queries, qrels = [], ["query-id\ttool-name\tscore"]
    for tool, texts in REQUESTS.items():
        for text in texts:
            qid = f"q{len(queries)}"
            queries.append(json.dumps({"id": qid, "text": text}) + "\n")
            qrels.append(f"{qid}\t{tool}\t1")
    queries.append(json.dumps({"id": "neg", "text": "order a pizza"}) + "\n")
    (folder / "queries.jsonl").write_text("".join(queries))
    (folder / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    return folder


def test_a_pair_per_graded_gold_tool_with_the_embedded_text(tmp_path: Path) -> None:
    dataset = load_dataset(_write_dataset(tmp_path / "d"))
    pairs = training_pairs([(dataset, dataset.queries)], DEFAULT_FIELDS, 128)
    assert len(pairs) == 8  # the negative query has no gold tool
    request, text, name = pairs[0]
    assert (request, name) == ("will it rain in Oslo tomorrow", "mcp__weather__forecast")
    assert text == tool_text(TOOLS[0], DEFAULT_FIELDS, 128)


def test_no_labelled_query_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="needs labelled queries"):
        fine_tune(object(), [])


def test_cli_full_rejects_mixed_and_impossible_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(_write_dataset(tmp_path / "d"))
    out = tmp_path / "model"
    assert main(["train", data, "--out", str(out), "--full", "--steps", "5"]) == 2
    assert "--steps sets adapter training" in capsys.readouterr().err
    assert main(["train", data, "--out", str(tmp_path / "a.npz"), "--epochs", "2"]) == 2
    assert "--epochs applies to --full only" in capsys.readouterr().err
    file = tmp_path / "taken"
    file.write_text("keep me")
    assert main(["train", data, "--out", str(file), "--full", "--force"]) == 2
    assert "is a file" in capsys.readouterr().err
    assert file.read_text() == "keep me" and not out.exists()


@pytest.mark.slow  # trains the shipped MiniLM for a few steps with PyTorch
def test_cli_full_trains_a_model_the_backend_can_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("sentence_transformers")
    from toolsearch.backends.embedding import EmbeddingBackend
    from toolsearch.query import parse_query

    monkeypatch.chdir(tmp_path)
    data = str(_write_dataset(tmp_path / "d"))
    out = tmp_path / "model"
    assert main(["train", data, "--split", "all", "--full", "--out", str(out)]) == 0
    assert f'model = "{out}"' in capsys.readouterr().out
    record = json.loads((out / "toolsearch-training.json").read_text())
    assert record["pairs"] == 8 and record["recipe"] == Recipe().describe()
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "np") as weights:  # stored in float16
        assert {str(weights.get_slice(k).get_dtype()) for k in weights.keys()} <= {"F16", "I64"}  # noqa: SIM118
    backend = EmbeddingBackend(model=str(out), runtime="torch", cache_dir=None)
    backend.index(TOOLS)
    hits = backend.search(parse_query("will it rain in Oslo tomorrow"), 2)
    assert hits[0].name == "mcp__weather__forecast"
