"""``benchmarks.bench_keyword`` fails a run that falls short of what its docstring promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_keyword

ROOT = Path(__file__).resolve().parents[1]


def _row(speedup: float, equal: bool = True) -> dict[str, object]:
    return {"tools": 100, "speedup": speedup, "results_equal": equal}


def test_a_run_below_the_promised_speed_up_fails() -> None:
    assert bench_keyword.failures([_row(bench_keyword.MIN_SPEEDUP)]) == []
    assert bench_keyword.failures([_row(9.9)]) == ["100 tools: speed-up 9.9x < 10x"]
    assert bench_keyword.failures([_row(50.0, equal=False)]) == [
        "100 tools: results differ from the naive transcription"
    ]


@pytest.mark.parametrize("sizes", ["abc", "0", "", "10,-5"])
def test_bad_sizes_are_refused_by_name(sizes: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        bench_keyword.main(["--tools", sizes])
    assert info.value.code == 2
    assert f"expected sizes such as 1000,10000, got {sizes!r}" in capsys.readouterr().err
