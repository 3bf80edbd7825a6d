"""How the ONNX export computes attention, measured: the shipped model exported with
transformers' "sdpa" attention (PyTorch's fused kernel, the library's default) and with
"eager" attention (plain matrix products and a softmax, ``onnx_encoder.ATTENTION``), each in
float32 and int8, timed in one process, taking turns, so both see the same machine.

    python -m benchmarks.bench_export --out benchmarks/results/bench_export.json

Per export: the median time to encode one 100-word task description alone and one of its
steps alone (a batch of one on one thread, ``OnnxEncoder.encode_alone``, as the default's
multi-step search encodes them), the time to encode 1,000 tool texts of the 10k benchmark
catalogue in the backend's batches, and how far its vectors of those texts are from the sdpa
export's of the same precision (largest cosine distance). Needs torch (the export).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_backends import catalogue, latencies, task_queries
from toolsearch.backends import onnx_encoder
from toolsearch.backends.embedding import DEFAULT_FIELDS
from toolsearch.backends.embedding_cache import normalise
from toolsearch.backends.encoders import SHIPPED_MODEL_PATH, TUNED_MODEL
from toolsearch.backends.onnx_encoder import OnnxEncoder, export_onnx, export_path, read_layout
from toolsearch.backends.tool_text import tool_text
from toolsearch.multistep import split_steps

ATTENTIONS = ("sdpa", "eager")
PRECISIONS = ("int8", "fp32")
TOOL_TEXTS = 1000


def make_encoder(folder: Path, attention: str, precision: str) -> OnnxEncoder:
    """The shipped model exported with ``attention`` into ``folder``, loaded and ready."""
    layout = read_layout(SHIPPED_MODEL_PATH)
    if isinstance(layout, str):
        raise SystemExit(f"the shipped model cannot run with ONNX: {layout}")
    target = export_path(folder, SHIPPED_MODEL_PATH, precision)
    tokenizer = onnx_encoder._tokenizer(layout)
    export_onnx(SHIPPED_MODEL_PATH, target, precision, tokenizer, layout.pooling, attention)
    encoder = OnnxEncoder(TUNED_MODEL, SHIPPED_MODEL_PATH, folder, precision=precision)
    encoder.prepare()
    return encoder


def measure(rounds: int = 3) -> dict[str, Any]:
    """Every export's timings, each round visiting the exports in a rotated order."""
    tasks = task_queries()
    steps = [step for task in tasks for step in split_steps(task)]
    tools = catalogue(10000)[:: 10000 // TOOL_TEXTS]
    texts = [tool_text(tool, DEFAULT_FIELDS, 128) for tool in tools]
    variants = [(a, p) for p in PRECISIONS for a in ATTENTIONS]
    timings: dict[tuple[str, str], dict[str, list[float]]] = {
        v: {"task": [], "step": [], "bulk": []} for v in variants
    }
    with tempfile.TemporaryDirectory(prefix="bench-export-") as scratch:
        encoders = {(a, p): make_encoder(Path(scratch) / a, a, p) for a, p in variants}
        vectors = {v: normalise(encoders[v].encode(texts)) for v in variants}
        for turn in range(rounds):
            for v in variants[turn % len(variants) :] + variants[: turn % len(variants)]:
                encoder = encoders[v]
                timings[v]["task"] += latencies(encoder.encode_alone, tasks, 1)
                timings[v]["step"] += latencies(encoder.encode_alone, steps, 1)
                start = time.perf_counter()
                encoder.encode(texts)
                timings[v]["bulk"].append(time.perf_counter() - start)
    rows = []
    for attention, precision in variants:
        t = timings[(attention, precision)]
        reference = vectors[("sdpa", precision)]
        distance = 1 - (vectors[(attention, precision)] * reference).sum(axis=1)
        rows.append(
            {
                "attention": attention,
                "precision": precision,
                "task_p50_ms": round(statistics.median(t["task"]) * 1000, 2),
                "step_p50_ms": round(statistics.median(t["step"]) * 1000, 2),
                "tools_1000_s": round(statistics.median(t["bulk"]), 2),
                "max_cosine_distance_to_sdpa": float(f"{float(distance.max()):.2e}"),
            }
        )
    return {
        "model": TUNED_MODEL,
        "tasks": len(tasks),
        "steps": len(steps),
        "tool_texts": len(texts),
        "rounds": rounds,
        "default_attention": onnx_encoder.ATTENTION,
        "results": rows,
    }


def markdown(result: dict[str, Any]) -> str:
    """The table of docs/results.md of the two exports."""
    lines = [
        "| attention | weights | 100-word task p50 ms | step p50 ms | 1,000 tool texts s "
        "| largest cosine distance to sdpa |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in result["results"]:
        default = " (default)" if row["attention"] == result["default_attention"] else ""
        distance = row["max_cosine_distance_to_sdpa"]
        shown = "(reference)" if row["attention"] == "sdpa" else f"{distance:.1e}"
        lines.append(
            f"| {row['attention']}{default} | {row['precision']} | {row['task_p50_ms']:.2f} | "
            f"{row['step_p50_ms']:.2f} | {row['tools_1000_s']:.2f} | {shown} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = measure(args.rounds)
    text = json.dumps(result, indent=2)
    print(markdown(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
