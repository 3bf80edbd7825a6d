"""``toolsearch index``: store a large catalogue in PostgreSQL once, so replicas never encode.

A gateway replica of the ``postgres`` backend encodes every tool content the namespace does not
hold yet, on its start path and under the namespace's lock. For a catalogue of hundreds of
thousands of tools that is hours of a first deployment; this command does it ahead of time:

    toolsearch index --catalog tools.jsonl                        # encode here and store
    toolsearch index --catalog tools.jsonl --export-vectors v.npz # encode only (no database)
    toolsearch index --catalog tools.jsonl --vectors v.npz        # store vectors from elsewhere

The catalogue is held by a holder of its own (``--holder``, default ``toolsearch-index``) with a
lease of ``--keep`` days, so its content is never collected while the lease runs; replicas
listing the same tools find them stored, and every tool whose embedded text is stored takes its
vector. Writes commit in chunks of 1,000 tools: an interrupted run resumes where it stopped
(stored chunks are neither encoded nor written again). Progress goes to stderr. Running it
again renews the lease and replaces what the holder holds. docs/postgres.md, "Bulk indexing".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from toolsearch.catalog import load_catalog
from toolsearch.cli._scope import CATALOG_HELP
from toolsearch.errors import ConfigError

__all__ = ["DEFAULT_HOLDER", "DEFAULT_KEEP_DAYS", "register"]

#: The holder name the command holds a catalogue under unless ``--holder`` says otherwise.
DEFAULT_HOLDER = "toolsearch-index"
#: Days a stored catalogue is held after the run (its lease).
DEFAULT_KEEP_DAYS = 30.0


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "index",
        help="store a catalogue in the postgres backend once (encoding off replicas' start)",
        description="Encode and store a catalogue in the postgres backend's namespace, held "
        "for --keep days, so gateway replicas find every tool stored and encode nothing; or "
        "only encode it to a file (--export-vectors) to import elsewhere (--vectors). The "
        "server and options come from $TOOLSEARCH_POSTGRES_URL and the configuration, as for "
        "every postgres backend.",
    )
    parser.add_argument("--catalog", required=True, help=CATALOG_HELP)
    parser.add_argument("--namespace", help="the namespace (default: the configured one)")
    parser.add_argument(
        "--holder", default=DEFAULT_HOLDER, help=f"holder name (default {DEFAULT_HOLDER})"
    )
    parser.add_argument(
        "--keep",
        type=float,
        default=DEFAULT_KEEP_DAYS,
        metavar="DAYS",
        help=f"days the catalogue stays held after the run (default {DEFAULT_KEEP_DAYS:g})",
    )
    parser.add_argument("--vectors", metavar="FILE", help="import vectors from this file")
    parser.add_argument(
        "--export-vectors",
        metavar="FILE",
        help="only encode the catalogue and write its vectors to FILE (.npz); no database",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a postgres backend option (VALUE read as JSON, else as text); repeatable",
    )
    parser.set_defaults(func=run)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in args.option:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE, e.g. hnsw_m=16")
        try:
            options[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            options[key.strip()] = raw
    if args.namespace is not None:
        options["namespace"] = args.namespace
    return options


class _Progress:
    """One line on stderr per committed chunk: done, rate, time left."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        elapsed = time.monotonic() - self.started
        left = elapsed / done * (total - done) if done else 0.0
        print(
            f"toolsearch index: {done:,} of {total:,} tools ({100 * done / max(total, 1):.0f} %), "
            f"{elapsed:.0f} s, about {left:.0f} s left",
            file=sys.stderr,
            flush=True,
        )


def run(args: argparse.Namespace) -> int:
    if args.keep <= 0:
        raise ConfigError(f"--keep must be a positive number of days, got {args.keep:g}")
    tools = load_catalog(args.catalog)
    options = _options(args)
    if args.export_vectors:
        return _export(tools, options, args.export_vectors)
    from toolsearch.config import resolve_backend

    options |= {"holder": args.holder, "lease": args.keep * 86400.0}
    if args.vectors:
        options["vectors"] = args.vectors
    backend: Any = resolve_backend("postgres", options=options)
    started = time.monotonic()
    try:
        backend.index(tools, progress=_Progress())
    except BaseException:
        backend.detach()  # what was committed stays held: a rerun resumes from there
        raise
    backend.detach()
    print(
        json.dumps(
            {
                "namespace": backend.namespace,
                "holder": backend.holder,
                "tools": len({tool.name for tool in tools}),
                "written": backend.written,
                "encoded": backend.encoded,
                "imported": backend.imported,
                "seconds": round(time.monotonic() - started, 1),
                "held_days": args.keep,
            }
        )
    )
    return 0


def _export(tools: Any, options: dict[str, Any], path: str) -> int:
    from toolsearch.backends.postgres import encoder_options
    from toolsearch.backends.postgres_vectors import Vectors, export_vectors
    from toolsearch.config import load_settings

    merged = load_settings().build_options("postgres", options)
    started = time.monotonic()
    count = export_vectors(tools, Vectors(encoder_options(merged)), path)
    seconds = round(time.monotonic() - started, 1)
    print(json.dumps({"vectors": count, "file": path, "seconds": seconds}))
    return 0
