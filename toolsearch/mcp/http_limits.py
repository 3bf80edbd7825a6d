"""A size cap on what a streamable HTTP MCP server sends, like the stdio transport's.

The SDK already bounds one server-sent event (``max_sse_event_size``, given the hub's
``max_message_bytes``); a plain JSON response it reads whole. :class:`CappedTransport` wraps
the HTTP client's transport so a JSON body stops being read once it passes the limit, and
:func:`too_large_detail` recognises either failure in the error the SDK hands the caller, so a
call fails with "too large" rather than "disconnected" (docs/security.md, "Hostile servers").
The cap counts body bytes as received; the client asks for ``Accept-Encoding: identity``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx2

__all__ = ["CappedTransport", "ResponseTooLarge", "too_large_detail"]

_TOO_LARGE = "the response is over the limit of"
_SSE_TOO_LARGE = re.compile(r"Server-sent event exceeded the (\d+) byte limit")


class ResponseTooLarge(httpx2.StreamError):
    """A JSON response body passed the limit (a ``StreamError``: the SDK turns it into an
    error for the request it answered)."""


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._limit:
                raise ResponseTooLarge(f"{_TOO_LARGE} {self._limit:,} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose non-SSE response bodies may be at most ``limit`` bytes."""

    def __init__(self, limit: int, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._limit = limit
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        content_type = response.headers.get("content-type", "").lower()
        if content_type.startswith("text/event-stream"):
            return response  # the SDK caps each event
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._limit),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def too_large_detail(text: str) -> str | None:
    """ "the response is over the limit of N bytes" when an SDK error message says a response
    or an event was over the cap, else ``None``."""
    if _TOO_LARGE in text:
        return text[text.index(_TOO_LARGE) :].rstrip(".")
    match = _SSE_TOO_LARGE.search(text)
    if match is not None:
        return f"{_TOO_LARGE} {int(match.group(1)):,} bytes"
    return None
