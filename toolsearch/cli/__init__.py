"""The ``toolsearch`` command: a thin shell over the library.

Each subcommand lives in its own module with ``register(subparsers)``; the modules named in
:data:`COMMANDS` are imported lazily enough that a missing optional extra only affects the
command that needs it. The configuration is checked once, the same way, before any command
runs (:func:`toolsearch.config.check_settings`). One-time slow work the library announces (an
embedding model's ONNX export, encoding a catalogue: the ``toolsearch.notice`` logger) is
printed on stderr as it starts. Library errors become one-line messages and exit status 2;
Ctrl-C becomes one line and exit status 130 (128 + SIGINT), as shells expect.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from toolsearch.backends.embedding_cache import NOTICE_LOGGER
from toolsearch.errors import ToolSearchError

__all__ = ["COMMANDS", "build_parser", "main", "show_notices"]

#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = (
    "search",
    "request",
    "demo",
    "bench",
    "train",
    "dataset",
    "serve",
    "index",
    "backends",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    from toolsearch import __version__

    parser = argparse.ArgumentParser(
        prog="toolsearch",
        description="Dynamic tool loading for agent loops: search deferred tools, "
        "inspect requests, benchmark backends.",
    )
    parser.add_argument("--version", action="version", version=f"toolsearch {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"toolsearch.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"toolsearch.cli.{name}":
                raise
            continue  # a subcommand whose module is not written yet
        module.register(subparsers)
    return parser


#: The exit status after Ctrl-C.
INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``toolsearch`` script; returns the exit status."""
    try:
        return _run(argv)
    except KeyboardInterrupt:
        # whatever was interrupted already lost nothing: a command writes its outputs whole
        print("toolsearch: interrupted", file=sys.stderr)
        return INTERRUPTED


class _StderrNotices(logging.Handler):
    """Writes each notice as one ``toolsearch: ...`` line to the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"toolsearch: {record.getMessage()}", file=sys.stderr, flush=True)


def show_notices() -> None:
    """Print the library's notices of one-time slow work on stderr (once per process)."""
    logger = logging.getLogger(NOTICE_LOGGER)
    if not any(isinstance(h, _StderrNotices) for h in logger.handlers):
        logger.addHandler(_StderrNotices())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _run(argv: Sequence[str] | None) -> int:
    from toolsearch.config import check_settings, load_settings

    show_notices()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        check_settings(load_settings())
        status: int = args.func(args)
    except ToolSearchError as exc:
        print(f"toolsearch {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    return status


if __name__ == "__main__":
    sys.exit(main())
