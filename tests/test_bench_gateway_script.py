"""``benchmarks/bench_gateway.py`` runs as its docstring says and its table judges each target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_gateway


def _phase(p50: float, p95: float, p99: float, **statuses: int) -> dict[str, Any]:
    answered = sum(v for k, v in statuses.items() if k in bench_gateway.ANSWERED)
    return {
        "answered": answered,
        "per_s": answered / 10,
        "statuses": statuses,
        "p50_ms": p50,
        "p95_ms": p95,
        "p99_ms": p99,
        "select_missing": 0,
    }


def _results(slow: bool) -> dict[str, Any]:
    """A results file whose figures meet every target, or (``slow``) miss three of them."""
    gateway = _phase(50, 90, 400 if slow else 120, ok=300)
    return {
        "config": {"replicas": 3, "clients": 16, "tools": 1000, "static_tools": 5000},
        "load": {
            "gateway": gateway,
            "library": _phase(10, 20, 30, ok=400),
            "throughput_ratio": 0.5 if slow else 0.75,
            "call_quiet": _phase(10, 20, 25, ok=50),
            "call_loaded": _phase(12, 30, 35, ok=50),
        },
        "outage": {
            "failed_searches": 4,
            "readable_errors": 3 if slow else 4,
            "protocol_errors": 0,
            "wrong_answers": 0,
            "recovered_within_s": 1.2,
            "answers_unlike_rebuild": 0,
            "answers_unlike_before": 0,
            "servers_failed_after": {},
        },
        "replicas": {"lost_answers": 0, "errors": 0},
        "churn": {
            "quiet": _phase(5, 10, 12, ok=100),
            "churn": _phase(6, 12, 14, ok=100),
            "p95_ratio": 1.2,
        },
    }


def test_the_table_has_a_row_per_target_and_marks_the_missed_ones() -> None:
    good = bench_gateway.markdown(_results(slow=False))
    rows = [line for line in good.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(bench_gateway.TARGETS)
    assert "**fail**" not in good
    bad = bench_gateway.markdown(_results(slow=True)).splitlines()
    failed = [line.split(" | ")[1] for line in bad if line.endswith("| **fail** |")]
    assert failed == [
        "gateway throughput / library's, same searches",
        "gateway search p99 / p50",
        "PostgreSQL outage: failed searches that are a readable error result",
    ]


def test_a_part_left_out_has_no_rows() -> None:
    results = _results(slow=False)
    del results["churn"], results["outage"]
    table = bench_gateway.markdown(results)
    assert "| churn |" not in table
    assert "| outage |" not in table
    assert "| replicas |" in table


@pytest.mark.parametrize(
    "argv", [["--replicas", "0"], ["--clients", "65"], ["--duration", "301"], ["--outage", "0"]]
)
def test_unbounded_runs_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        bench_gateway.main(argv)
    assert info.value.code == 2
    assert "bounded runs only" in capsys.readouterr().err


def test_a_tiny_churn_run_writes_its_results_and_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "gateway.json"
    argv = ["--only", "churn", "--clients", "1", "--duration", "1", "--static-tools", "20"]
    assert bench_gateway.main([*argv, "--churn-tools", "5", "--out", str(out)]) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    for phase in ("quiet", "churn"):
        assert results["churn"][phase]["answered"] > 0
    assert results["churn"]["churn_server"]["announced"] > 0
    assert "| churn | static servers reported pending |" in capsys.readouterr().out


@pytest.mark.slow
def test_a_tiny_fleet_run_measures_load_and_replicas(postgres_url: str, tmp_path: Path) -> None:
    out = tmp_path / "gateway.json"
    argv = ["--url", postgres_url, "--only", "load", "replicas", "--replicas", "2"]
    argv += ["--clients", "1", "--duration", "2", "--tools", "20", "--out", str(out)]
    assert bench_gateway.main(argv) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["replicas_agree"]
    assert results["load"]["library"]["answered"] > 0
    assert results["load"]["gateway"]["answered"] > 0
    assert [e["event"] for e in results["replicas"]["events"]][-1].startswith("kill the first")
