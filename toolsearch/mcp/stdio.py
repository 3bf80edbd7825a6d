"""The stdio transport to an MCP server, hardened against a hostile or broken server.

It speaks the same newline-delimited JSON-RPC as the SDK's ``stdio_client`` and uses the SDK's
own spawn and shutdown (a new process group, stdin closed, then terminate and kill), but reads
the server's stdout differently (docs/security.md, "Hostile servers"):

- lines are split in linear time, and a line longer than ``max_message_bytes`` is never held
  in memory: only its first and last bytes are kept, enough to find its request id. The
  request then fails with :data:`MESSAGE_TOO_LARGE` ("the response is N bytes, over the
  limit") while the server stays connected; an oversized line without an id is fatal;
- a reply that does not parse (e.g. nested deeper than the JSON parser allows) fails its
  request with :data:`MESSAGE_UNREADABLE` at once, instead of leaving it to time out;
- a line that is not valid UTF-8 is fatal: ``on_fatal`` gets the reason and the stream ends,
  so the connection is marked failed at once instead of hanging until a timeout.

Lines that are valid UTF-8 but not JSON-RPC are passed on as errors, as the SDK does (servers
that print a banner on stdout keep working).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import IO, Any

import anyio

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MESSAGE_TOO_LARGE",
    "MESSAGE_UNREADABLE",
    "LineSplitter",
    "Oversized",
    "stdio_transport",
]

logger = logging.getLogger(__name__)

#: Largest stdout line (one JSON-RPC message) read from a server: 16 MiB.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: JSON-RPC error code of a request whose response was over the size limit.
MESSAGE_TOO_LARGE = -32099
#: JSON-RPC error code of a request whose response could not be parsed (e.g. nested too deeply).
MESSAGE_UNREADABLE = -32098
_KEPT = 4096
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line over the limit: its size and its first and last bytes."""

    size: int
    head: bytes
    tail: bytes

    def request_id(self) -> int | str | None:
        """The JSON-RPC id the line answers, if its head or tail shows one."""
        for part in (self.head, self.tail):
            match = _ID.search(part)
            if match is not None:
                raw = match.group(1)
                return (
                    int(raw) if not raw.startswith(b'"') else raw[1:-1].decode("utf-8", "replace")
                )
        return None


class LineSplitter:
    """Splits a byte stream into lines in linear time, never keeping more than ``limit`` bytes
    of one line."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._head: bytes | None = None
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """The lines ``chunk`` completes (without their newline)."""
        lines: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._add(chunk[start:])
                return lines
            self._add(chunk[start:end])
            lines.append(self._take())
            start = end + 1

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        self._size += len(piece)
        if self._head is not None:
            if len(self._head) < _KEPT:
                self._head += piece[: _KEPT - len(self._head)]
            self._tail = (self._tail + piece[-_KEPT:])[-_KEPT:]
            return
        self._parts.append(piece)
        if self._size > self.limit:
            joined = b"".join(self._parts)
            self._head, self._tail, self._parts = joined[:_KEPT], joined[-_KEPT:], []

    def _take(self) -> bytes | Oversized:
        line: bytes | Oversized
        if self._head is not None:
            line = Oversized(self._size, self._head, self._tail)
        else:
            line = b"".join(self._parts)
        self._parts, self._size, self._head, self._tail = [], 0, None, b""
        return line


def _error_reply(request_id: int | str, code: int, message: str) -> Any:
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    error = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _parse(line: bytes) -> Any:
    """One JSON-RPC message; a reply that cannot be read fails its request at once (instead
    of leaving it to time out); other unreadable lines are passed on as errors."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        request_id = Oversized(len(line), line[:_KEPT], line[-_KEPT:]).request_id()
        if request_id is None:
            logger.debug("an MCP server printed a line that is not JSON-RPC: %s", exc)
            return exc
        why = "nested too deeply" if "recursion limit" in str(exc) else "not valid JSON-RPC"
        logger.warning("an MCP server's reply to request %r is %s: %.300s", request_id, why, exc)
        return _error_reply(request_id, MESSAGE_UNREADABLE, f"the server's reply is {why}")


def _message(line: bytes | Oversized, limit: int) -> Any:
    """What one stdout line means: a message for the session, None (a blank line), or a
    ``str`` — the reason the server must be given up on."""
    if isinstance(line, Oversized):
        request_id = line.request_id()
        over = f"over the limit of {limit:,} bytes"
        if request_id is None:
            return f"the server sent a {line.size:,}-byte message without a request id, {over}"
        return _error_reply(
            request_id, MESSAGE_TOO_LARGE, f"the response is {line.size:,} bytes, {over}"
        )
    if not line.strip():
        return None
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = line[exc.start : exc.start + 1].hex()
        return f"the server wrote invalid UTF-8 on stdout (byte 0x{bad} at offset {exc.start})"
    return _parse(line)


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    *,
    env: dict[str, str] | None,
    cwd: str | None,
    errlog: IO[bytes],
    on_fatal: Callable[[str], None],
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> AsyncIterator[tuple[Any, Any]]:
    """Spawn ``command`` and yield ``(read_stream, write_stream)`` for an SDK ``Client``."""
    from mcp.client import stdio as sdk
    from mcp.shared.message import SessionMessage

    process = await sdk._create_platform_compatible_process(
        command=await sdk._get_executable_command(command),
        args=args,
        env=sdk.get_default_environment() | (env or {}),
        errlog=errlog,  # type: ignore[arg-type]  # a real file: the child writes to its fd
        cwd=cwd,
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        splitter = LineSplitter(max_message_bytes)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with read_writer:
                async for chunk in process.stdout:
                    for line in splitter.feed(chunk):
                        message = _message(line, max_message_bytes)
                        if isinstance(message, str):
                            on_fatal(message)
                            return
                        if message is not None:
                            await read_writer.send(message)

    async def write_stdin() -> None:
        assert process.stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode("utf-8"))
        await read_writer.aclose()  # the server cannot be written to: end the session too

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout)
        tasks.start_soon(write_stdin)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                await sdk._stop_server_process(process)
            tasks.cancel_scope.cancel()
