"""Fine-tuning the embedding model (``toolsearch.backends.fine_tuning``, ``toolsearch train
--full``): the training pairs, bad input, and a real training run that the backend then uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolsearch.backends.fine_tuning import (
    Pair,
    Recipe,
    batches,
    description_queries,
    fine_tune,
    first_sentence,
    mine_hard_negatives,
    sibling_group,
    training_pairs,
)
from toolsearch.backends.tool_text import DEFAULT_FIELDS, tool_text
from toolsearch.cli import main
from toolsearch.dataset import Dataset, Query, load_dataset
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
    first = pairs[0]
    assert first.request == "will it rain in Oslo tomorrow"
    assert first.name == "mcp__weather__forecast"
    assert first.text == tool_text(TOOLS[0], DEFAULT_FIELDS, 128)
    assert first.negative == first.negative_name == ""  # mined only when the recipe asks


def test_description_queries_ask_for_each_tool_by_its_first_sentence() -> None:
    tools = [
        Tool("mcp__weather__forecast", "Get the weather forecast for a city.  Metric units."),
        Tool("mcp__files__ping", "Ping it."),  # too short to stand for a request
    ]
    made = description_queries("cat", tools)
    assert [q.text for q in made.queries] == ["Get the weather forecast for a city"]
    assert made.qrels == {made.queries[0].id: {"mcp__weather__forecast": 1}}
    assert all(tool.description == "" for tool in made.tools)  # the request is not in the text
    pairs = training_pairs([(made, made.queries)], DEFAULT_FIELDS, None)
    assert [p.text for p in pairs] == ["weather forecast"]
    assert first_sentence("Ends here! Then more.") == "Ends here!"


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
    assert "--epochs and --no-hard-negatives apply to --full only" in capsys.readouterr().err
    assert main(["train", data, "--out", str(tmp_path / "a.npz"), "--no-hard-negatives"]) == 2
    assert "apply to --full only" in capsys.readouterr().err
    file = tmp_path / "taken"
    file.write_text("keep me")
    assert main(["train", data, "--out", str(file), "--full", "--force"]) == 2
    assert "is a file" in capsys.readouterr().err
    assert file.read_text() == "keep me" and not out.exists()
    assert main(["train", data, "--out", str(tmp_path / "a.npz"), "--metadata", data]) == 2
    assert "--metadata applies to --full only" in capsys.readouterr().err
    assert main(["train", "--out", str(out), "--full"]) == 2
    assert "name a dataset with labelled queries" in capsys.readouterr().err
    terse = tmp_path / "terse.jsonl"
    terse.write_text(json.dumps(Tool("mcp__x__ping", "Ping it.").to_dict()) + "\n")
    assert main(["train", "--out", str(out), "--full", "--metadata", str(terse)]) == 2
    assert "no tool has a description sentence" in capsys.readouterr().err
    assert not out.exists()


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
    command = ["train", data, "--split", "all", "--full", "--out", str(out), "--metadata", data]
    assert main(command) == 0
    assert f'model = "{out}"' in capsys.readouterr().out
    record = json.loads((out / "toolsearch-training.json").read_text())
    # 8 labelled pairs and 4 from the tools' descriptions
    assert record["pairs"] == 12 and record["recipe"] == Recipe().describe()
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "np") as weights:  # stored in float16
        assert {str(weights.get_slice(k).get_dtype()) for k in weights.keys()} <= {"F16", "I64"}  # noqa: SIM118
    backend = EmbeddingBackend(model=str(out), runtime="torch", cache_dir=None)
    backend.index(TOOLS)
    hits = backend.search(parse_query("will it rain in Oslo tomorrow"), 2)
    assert hits[0].name == "mcp__weather__forecast"


class _FixedModel:
    """Encodes each text as a fixed vector, so mining can be checked without a network model."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def encode(self, texts: list[str], **_: object) -> object:
        import numpy as np

        rows = np.array([self.vectors[t] for t in texts], dtype=np.float64)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_mined_negative_is_the_best_non_gold_tool_below_the_margin(tmp_path: Path) -> None:
    dataset = load_dataset(_write_dataset(tmp_path / "d"))
    request = "will it rain in Oslo tomorrow"
    query = next(q for q in dataset.queries if q.text == request)
    texts = {t.name: tool_text(t, DEFAULT_FIELDS, 128) for t in TOOLS}
    vectors = {q.text: [0.0, 0.0, 1.0] for q in dataset.queries}
    vectors[request] = [1.0, 0.0, 0.0]
    vectors[texts["mcp__weather__forecast"]] = [1.0, 0.1, 0.0]  # gold, cosine .995
    vectors[texts["mcp__calendar__create_event"]] = [1.0, 0.2, 0.0]  # .98: within the margin
    vectors[texts["mcp__mail__send_email"]] = [1.0, 0.6, 0.0]  # .86: the hard negative
    vectors[texts["mcp__files__read_file"]] = [0.05, 1.0, 0.0]  # .05
    model, labelled = _FixedModel(vectors), [(dataset, [query])]
    pairs = mine_hard_negatives(model, labelled, DEFAULT_FIELDS, 128)
    assert [(p.name, p.negative_name) for p in pairs] == [
        ("mcp__weather__forecast", "mcp__mail__send_email")
    ]
    assert pairs[0].negative == texts["mcp__mail__send_email"]
    strict = mine_hard_negatives(model, labelled, DEFAULT_FIELDS, 128, 0.5)
    assert strict[0].negative_name == "mcp__files__read_file"
    none = mine_hard_negatives(model, labelled, DEFAULT_FIELDS, 128, 0.01)
    assert none[0].negative_name == "" and none[0].text == pairs[0].text
    for bad in (0.0, 1.5, -1.0):
        with pytest.raises(ConfigError, match="negative_margin must be in"):
            mine_hard_negatives(model, labelled, DEFAULT_FIELDS, 128, bad)


def test_a_batch_never_holds_a_tool_twice_as_gold_or_negative() -> None:
    pairs = [
        Pair("a", "A", "tool_a", "B", "tool_b"),
        Pair("b", "B", "tool_b", "C", "tool_c"),  # its gold is the first pair's negative
        Pair("c", "C2", "tool_d", "A", "tool_a"),  # its negative is the first pair's gold
        Pair("d", "E", "tool_e"),
    ]
    grouped = batches(pairs, 32)
    assert [[p.request for p in batch] for batch in grouped] == [["a", "d"], ["b", "c"]]


def test_plain_recipe_keeps_its_record_and_mining_is_recorded() -> None:
    assert "hard_negatives" not in Recipe(hard_negatives=False).describe()
    mined = Recipe().describe()
    assert mined["hard_negatives"] is True and mined["negative_margin"] == 0.95


def test_sibling_negatives_come_from_the_gold_tools_own_server() -> None:
    # "post a status update" must be told from its server's other verb, not from another server
    tools = [
        Tool("mcp__proj__create_status", "Create a project status update."),
        Tool("mcp__proj__get_status", "Get the project status."),
        Tool("mcp__chat__post_message", "Post a message to a channel."),
        Tool("hf.bert-base", "A BERT model."),
    ]
    request = "post a project status update"
    dataset = Dataset("d", tools, [Query("q", request)], {"q": {"mcp__proj__create_status": 1}})
    texts = {t.name: tool_text(t, DEFAULT_FIELDS, 128) for t in tools}
    vectors = {request: [1.0, 0.0, 0.0], texts["mcp__proj__create_status"]: [1.0, 0.1, 0.0]}
    vectors[texts["mcp__chat__post_message"]] = [1.0, 0.5, 0.0]  # the closest wrong tool
    vectors[texts["mcp__proj__get_status"]] = [1.0, 0.9, 0.0]  # further, but a sibling
    vectors[texts["hf.bert-base"]] = [0.0, 0.0, 1.0]
    model, labelled = _FixedModel(vectors), [(dataset, dataset.queries)]
    anywhere = mine_hard_negatives(model, labelled, DEFAULT_FIELDS, 128)
    assert anywhere[0].negative_name == "mcp__chat__post_message"
    own = mine_hard_negatives(model, labelled, DEFAULT_FIELDS, 128, siblings=sibling_group)
    assert own[0].negative_name == "mcp__proj__get_status"
    # a tool without siblings falls back to the best wrong tool anywhere
    alone = Dataset("d", tools, [Query("q", request)], {"q": {"mcp__chat__post_message": 1}})
    vectors[texts["mcp__chat__post_message"]] = [1.0, 0.05, 0.0]
    fallback = mine_hard_negatives(
        model, [(alone, alone.queries)], DEFAULT_FIELDS, 128, siblings=sibling_group
    )
    assert fallback[0].negative_name == "mcp__proj__get_status"  # create_status: in the margin
    assert [sibling_group(t) for t in tools] == ["proj", "proj", "chat", "hf"]
    assert Recipe(sibling_negatives=True).describe()["sibling_negatives"] is True
    assert "sibling_negatives" not in Recipe().describe()  # older records keep their keys


def test_hard_negatives_are_extra_columns_of_the_loss() -> None:
    torch = pytest.importorskip("torch")
    from toolsearch.backends.fine_tuning import _batch_loss

    table = {"q1": [1.0, 0.0], "q2": [0.0, 1.0], "A": [1.0, 0.2], "B": [0.1, 1.0], "N": [1.0, 0.0]}

    class Model:
        def preprocess(self, texts: list[str]) -> list[str]:
            return texts

        def __call__(self, texts: list[str]) -> dict[str, object]:
            return {"sentence_embedding": torch.tensor([table[t] for t in texts])}

    batch = [Pair("q1", "A", "a", "N", "n"), Pair("q2", "B", "b")]
    functional = torch.nn.functional
    q = functional.normalize(torch.tensor([table["q1"], table["q2"]]), dim=-1)
    t = functional.normalize(torch.tensor([table["A"], table["B"], table["N"]]), dim=-1)
    expected = functional.cross_entropy(20.0 * q @ t.T, torch.arange(2))
    assert torch.allclose(_batch_loss(torch, Model(), batch, 20.0), expected)
