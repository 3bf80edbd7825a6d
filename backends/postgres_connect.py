"""Connecting the ``postgres`` backend: where the server is, pool sizes, timeouts, TLS.

The server comes from the ``url`` option, else ``$TOOLSEARCH_POSTGRES_URL``; either is any libpq
connection string (``postgresql://user:pw@host:5432/db?sslmode=verify-full`` or
``host=... dbname=...``). TLS settings (``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey``,
``sslcrl``, ``sslsni``...) pass through unchanged, in the URL or in ``connect_options``.
Passwords are never logged nor put into an error message or a benchmark report: everything
shown goes through :func:`redacted`.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolsearch.errors import ConfigError

__all__ = ["ENV_URL", "ConnectionSettings", "redacted"]

logger = logging.getLogger("toolsearch.backends.postgres")

#: The environment variable read when no ``url`` option is given.
ENV_URL = "TOOLSEARCH_POSTGRES_URL"

_SECRET_KEYS = ("password", "sslpassword")


def redacted(conninfo: str) -> str:
    """``conninfo`` with every password replaced by ``***`` (unparsable text is hidden whole)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(conninfo)
    except Exception:  # a malformed string may hold a password anywhere
        return "<unparsable connection string>"
    for key in _SECRET_KEYS:
        if params.get(key):
            params[key] = "***"
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


def _positive(name: str, value: object, *, integer: bool, allow_zero: bool = False) -> float:
    kind = "an integer" if integer else "a number"
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (integer and not float(value).is_integer())
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not allow_zero)
    ):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"postgres option {name} must be {kind} {bound}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ConnectionSettings:
    """Validated connection options (see the module docstring)."""

    conninfo: str
    min_pool: int = 1
    max_pool: int = 8
    statement_timeout: float = 30.0
    connect_timeout: float = 10.0
    connect_options: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(
        cls,
        url: str | None,
        *,
        min_pool: int,
        max_pool: int,
        statement_timeout: float,
        connect_timeout: float,
        connect_options: Mapping[str, Any] | None,
    ) -> ConnectionSettings:
        """Settings from backend options, ``url`` falling back to :data:`ENV_URL`."""
        if url is None:
            url = os.environ.get(ENV_URL, "").strip() or None
        if url is None:
            raise ConfigError(
                f"postgres needs a server: pass the url option or set {ENV_URL} "
                "(e.g. postgresql://user@localhost:5432/toolsearch)"
            )
        if not isinstance(url, str) or not url.strip():
            raise ConfigError(f"postgres option url must be a connection string, got {url!r}")
        from psycopg.conninfo import conninfo_to_dict

        try:
            conninfo_to_dict(url)
        except Exception:
            # libpq's message quotes the string, password included: it is not repeated
            raise ConfigError(
                "postgres option url is not a valid connection string (libpq cannot parse it)"
            ) from None
        lo = int(_positive("min_pool", min_pool, integer=True, allow_zero=True))
        hi = int(_positive("max_pool", max_pool, integer=True))
        if lo > hi:
            raise ConfigError(f"postgres option min_pool ({lo}) is larger than max_pool ({hi})")
        options = dict(connect_options or {})
        for key, value in options.items():
            if not isinstance(key, str) or not isinstance(value, str | int | float):
                raise ConfigError(
                    f"postgres connect_options must map libpq keywords to values, got {key!r}"
                )
        return cls(
            conninfo=url.strip(),
            min_pool=lo,
            max_pool=hi,
            statement_timeout=_positive(
                "statement_timeout", statement_timeout, integer=False, allow_zero=True
            ),
            connect_timeout=_positive("connect_timeout", connect_timeout, integer=False),
            connect_options={key: str(value) for key, value in options.items()},
        )

    @property
    def shown(self) -> str:
        """The server as it may be shown: the connection string without passwords."""
        return redacted(self.conninfo)

    def connect_kwargs(self, *, statement_timeout: float | None = None) -> dict[str, Any]:
        """Keyword arguments of :func:`psycopg.connect` (libpq keywords and ``autocommit``)."""
        timeout_ms = round(
            1000 * (self.statement_timeout if statement_timeout is None else statement_timeout)
        )
        kwargs: dict[str, Any] = {
            "connect_timeout": str(max(1, math.ceil(self.connect_timeout))),
            "application_name": "toolsearch",
            **self.connect_options,
        }
        setting = f"-c statement_timeout={timeout_ms}"
        kwargs["options"] = f"{kwargs['options']} {setting}" if "options" in kwargs else setting
        return kwargs

    def describe(self) -> dict[str, object]:
        """The settings for reports (no password)."""
        return {
            "server": self.shown,
            "min_pool": self.min_pool,
            "max_pool": self.max_pool,
            "statement_timeout": self.statement_timeout,
            "connect_timeout": self.connect_timeout,
            "connect_options": {
                k: ("***" if k in _SECRET_KEYS else v) for k, v in self.connect_options.items()
            },
        }
