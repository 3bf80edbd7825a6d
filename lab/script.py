"""The command line every lab table script shares: one option, measure, write JSON, print.

Each script takes ``--out`` (where its JSON goes) and one option of its own (``--limit``,
``--cache`` or ``--fold``); the measurement is written to ``--out`` and its table printed, which
is what ``benchmarks.regenerate`` runs and then renders from the JSON.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def table_script(
    argv: Sequence[str] | None,
    doc: str,
    out: Path,
    option: tuple[str, Mapping[str, Any]],
    measure: Callable[[Any], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """Parse ``--out`` and ``option`` (a flag and its ``add_argument`` settings), write
    ``measure(value of the option)`` as JSON to ``--out``, then print ``render`` of it."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=out)
    flag, settings = option
    parser.add_argument(flag, **settings)
    args = parser.parse_args(list(argv) if argv is not None else None)
    data = measure(getattr(args, flag.lstrip("-").replace("-", "_")))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(render(data))
    return 0
