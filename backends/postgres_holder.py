"""Holders of the ``postgres`` backend: who holds which tools of a shared namespace, for how long.

Every :class:`~toolsearch.backends.postgres.PostgresBackend` instance is a *holder*: the
``holdings`` rows under its name are exactly the tools it was given, and its searches see only
those (docs/postgres.md, "Sharing one namespace"). This module keeps what is about holders and
not about ranking or writing tools:

* the holder's name (:func:`default_holder`, :func:`check_holder`) and lease options;
* the garbage collection (:func:`collect`): holders whose lease expired lose their holdings,
  and content no holding references goes once the retention period has passed;
* releasing a holder at close (:func:`release`);
* reading a change notification (:func:`read_note`): anyone who may ``NOTIFY`` may send
  anything, so a payload is only a hint, checked here and never trusted for a value.
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import socket
from typing import TYPE_CHECKING, Any

from toolsearch.errors import ConfigError

if TYPE_CHECKING:
    import psycopg

    from .postgres_pool import RecoveringPool

__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_RETENTION",
    "MAX_NOTE",
    "check_holder",
    "check_seconds",
    "collect",
    "default_holder",
    "notify",
    "read_note",
    "release",
]

logger = logging.getLogger("toolsearch.backends.postgres")

#: Seconds a holder stays alive without renewing its lease (renewed every third of it).
DEFAULT_LEASE = 30.0
#: Seconds unreferenced content is kept, so that a restarted replica encodes nothing.
DEFAULT_RETENTION = 86_400.0
#: Longest notification payload read (the backend's own are below 600 characters).
MAX_NOTE = 1_000
_MAX_HOLDER = 200


def default_holder() -> str:
    """A name no other live instance has: host, process id and a random part."""
    return f"{socket.gethostname()[:120]}:{os.getpid()}:{secrets.token_hex(6)}"


def check_holder(name: object) -> str:
    """A holder name given as an option: printable text of 1-200 characters."""
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= _MAX_HOLDER
        or not name.isprintable()
        or name != name.strip()
    ):
        raise ConfigError(
            f"postgres option holder must be 1-{_MAX_HOLDER} printable characters without "
            f"surrounding spaces, got {name!r}"
        )
    return name


def check_seconds(name: str, value: object, minimum: float) -> float:
    """A duration option of at least ``minimum`` seconds."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < minimum
    ):
        raise ConfigError(f"postgres option {name} must be a number >= {minimum:g}, got {value!r}")
    return float(value)


def _unreferenced(schema: str) -> str:
    return f'NOT EXISTS (SELECT 1 FROM "{schema}".holdings h WHERE h.tool = t.id)'


def notify(conn: psycopg.Connection[Any], channel: str, note: dict[str, object]) -> None:
    """Send ``note`` on ``channel`` when the transaction commits."""
    conn.execute("SELECT pg_notify(%s, %s)", (channel, json.dumps(note)))


def collect(
    conn: psycopg.Connection[Any], schema: str, namespace: str, retention: float, channel: str
) -> tuple[int, int]:
    """Delete the holders of ``namespace`` whose lease expired (their holdings go with them),
    then the content no holding has referenced for ``retention`` seconds; returns how many
    holders and content rows went. The caller holds the namespace's lock.

    A lease counts only while the server ran: a holder is collected once it has had a whole
    lease of server uptime to renew and did not, so after a database restart every holder
    gets its chance first."""
    gone = conn.execute(
        f'DELETE FROM "{schema}".holders WHERE namespace = %s AND expires_at < now() '
        "AND pg_postmaster_start_time() + lease * interval '1 second' < now() RETURNING holder",
        (namespace,),
    ).fetchall()
    if gone:
        logger.warning(
            "postgres: namespace %r: released the holdings of %d holder(s) whose lease expired: %s",
            namespace,
            len(gone),
            ", ".join(sorted(h for (h,) in gone))[:500],
        )
        notify(conn, channel, {"namespace": namespace, "collected": len(gone)})
    tools = f'"{schema}".tools t'
    conn.execute(
        f"UPDATE {tools} SET released_at = NULL WHERE namespace = %s "
        f"AND released_at IS NOT NULL AND NOT {_unreferenced(schema)}",
        (namespace,),
    )
    conn.execute(
        f"UPDATE {tools} SET released_at = now() WHERE namespace = %s "
        f"AND released_at IS NULL AND {_unreferenced(schema)}",
        (namespace,),
    )
    deleted = conn.execute(
        f"DELETE FROM {tools} WHERE namespace = %s "
        f"AND released_at <= now() - %s * interval '1 second' AND {_unreferenced(schema)}",
        (namespace, retention),
    )
    return len(gone), max(deleted.rowcount, 0)


def release(pool: RecoveringPool, schema: str, namespace: str, holder: str, channel: str) -> None:
    """Drop ``holder``'s holdings at once (at close); when the server cannot be reached the
    lease runs out instead."""
    import psycopg
    from psycopg_pool import PoolTimeout

    try:
        with pool.connection(timeout=1.0) as conn, conn.transaction():
            conn.execute(
                f'DELETE FROM "{schema}".holders WHERE namespace = %s AND holder = %s',
                (namespace, holder),
            )
            notify(conn, channel, {"namespace": namespace, "holder": holder})
    except (psycopg.Error, PoolTimeout) as exc:
        logger.warning(
            "postgres: could not release holder %r (%s); its lease will expire",
            holder,
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
        )


def read_note(payload: object, namespace: str, holder: str) -> bool:
    """Whether a notification may concern ``holder``'s view of ``namespace``: a JSON object of
    this namespace whose ``holder``, if any, is this one. Anything else — too long, not JSON,
    nested past the parser's limits, of another shape — is ignored; nothing in a payload is
    taken for a value (the listener re-reads the table)."""
    if not isinstance(payload, str) or len(payload) > MAX_NOTE:
        return False
    try:
        note = json.loads(payload)
    except (ValueError, RecursionError):
        return False
    if not isinstance(note, dict) or note.get("namespace") != namespace:
        return False
    sender = note.get("holder")
    return sender is None or sender == holder
