"""An httpx transport that moves bytes with aiohttp, for the probe's https replicas.

Plain-HTTP replicas are read by the probe's own client (`wire.py`), which stamps each read as it
lands and knows its lag; TLS needs a library. httpx parses HTTP/1.1 in pure Python, one event per
chunk, and at thousands of token chunks a second that work, not the replica, would set how fast
the probe reads; aiohttp's parser is compiled. The probe keeps httpx's API, its MockTransport
tests and its error tree: aiohttp's errors are mapped here, once, to the httpx exceptions the
stream code classifies.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import httpx

_HOP_HEADERS = frozenset({b"host", b"content-length", b"transfer-encoding", b"connection"})


def _translated(exc: BaseException, request: httpx.Request, reading: bool) -> httpx.HTTPError:
    """The httpx exception that says what an aiohttp (or socket) failure means."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(text, request=request)
    if isinstance(exc, (aiohttp.ServerTimeoutError, asyncio.TimeoutError)):
        return httpx.ReadTimeout(text, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(text, request=request)
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return httpx.RemoteProtocolError(text, request=request)
    if reading:
        return httpx.ReadError(text, request=request)
    return httpx.ConnectError(text, request=request)


class _ResponseBody(httpx.AsyncByteStream):
    """An aiohttp response body, yielded as it arrives, read by httpx."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for data in self._response.content.iter_any():
                yield data
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise _translated(exc, self._request, reading=True) from exc

    async def aclose(self) -> None:
        if self._response.content.at_eof():
            self._response.release()  # the connection goes back to the pool
        else:
            self._response.close()  # unread bytes: drop the connection, the replica sees it go


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Sends httpx requests through one aiohttp session with a bounded connection pool."""

    def __init__(self, max_connections: int, timeout_s: float) -> None:
        self._max_connections = max_connections
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=timeout_s, sock_read=timeout_s
        )
        self._session: aiohttp.ClientSession | None = None

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None:  # made inside the running loop, as aiohttp requires
            connector = aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=0)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, auto_decompress=False
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in request.headers.raw
            if name.lower() not in _HOP_HEADERS
        ]
        body = await request.aread()
        try:
            response = await self._session_now().request(
                request.method, str(request.url), headers=headers, data=body or None
            )
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise _translated(exc, request, reading=False) from exc
        return httpx.Response(
            response.status,
            headers=[(name, value) for name, value in response.raw_headers],
            stream=_ResponseBody(response, request),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
