"""Fixed dev/test splits: every query of every dataset belongs to one half, decided by its id.

Anything that tunes or trains reads ``dev`` only; published tables score ``test``. The rule is a
hash of the query id, so it needs no file, gives the same split on every machine, and a query
keeps its half when others are added or removed (see ``docs/benchmark.md``).
"""

from __future__ import annotations

import hashlib
from typing import Literal

__all__ = ["SPLITS", "Split", "split_of"]

Split = Literal["dev", "test"]
#: The split names, and ``all`` for both halves.
SPLITS: tuple[str, ...] = ("dev", "test", "all")


def split_of(query_id: str) -> Split:
    """``"dev"`` or ``"test"`` for a query id: the parity of the first byte of its SHA-256."""
    return "dev" if hashlib.sha256(query_id.encode("utf-8")).digest()[0] % 2 == 0 else "test"
