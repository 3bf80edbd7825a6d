"""``toolsearch backends``: what is registered, what is installed, how to install the rest.

The table leaves the pip lines out: they follow it one to a line, never wrapped or cut at any
terminal width, so each can be copied whole.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape
from rich.table import Table

from toolsearch.cli._output import console, print_json
from toolsearch.config import default_backend_name
from toolsearch.errors import BackendError
from toolsearch.registry import available_backends, backend_info

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "backends", help="list registered search backends and how to install them"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    default = default_backend_name()
    infos = []
    broken: dict[str, str] = {}
    for name in available_backends():
        try:
            infos.append(backend_info(name))
        except BackendError as exc:
            broken[name] = str(exc)
    if args.json:
        print_json(
            {
                "default": default,
                "backends": [
                    {
                        "name": i.name,
                        "installed": i.installed,
                        "extra": i.extra,
                        "install": i.install_command,
                        "missing": list(i.missing),
                        "incremental": i.incremental,
                        "persistent": i.persistent,
                        "summary": i.summary,
                    }
                    for i in infos
                ],
                "broken": broken,
            }
        )
        return 0
    table = Table(title="toolsearch backends")
    for column in ("backend", "installed", "about"):
        table.add_column(column)
    for info in infos:
        name = f"{info.name} (default)" if info.name == default else info.name
        installed = "yes" if info.installed else f"no (missing {', '.join(info.missing)})"
        table.add_row(*map(escape, (name, installed, info.summary)))
    for name, reason in broken.items():
        table.add_row(escape(name), "no (fails to import)", escape(reason))
    console().print(table)
    _print_install_lines(infos)
    return 0


def _print_install_lines(infos: list[Any]) -> None:
    """Each backend's pip line, whole on its own line (plain print: nothing wraps or cuts it)."""
    lines = [(i.name, i.install_command) for i in infos if i.install_command]
    if not lines:
        return
    width = max(len(name) for name, _ in lines)
    print("\ninstall with (built in: " + ", ".join(i.name for i in infos if not i.extra) + "):")
    for name, command in lines:
        print(f"  {name:<{width}}  {command}")
