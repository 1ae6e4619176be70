"""Kept-alive HTTP/1.1 requests to CometBFT's RPC on asyncio streams, for a hot path.

httpx's async pool looked at every pooled connection on each request (an idle check and
a socket poll per connection): at 32 concurrent submits it was about half of the REST
process's CPU per tx. CometBFT's JSON-RPC needs one request shape (a POST of JSON, an
answer with Content-Length or chunked), so this does only that: idle connections on a
stack, one request per connection at a time, a connection that fails is dropped.

Failures are raised as httpx's exception types (ConnectError, ReadError, ReadTimeout,
RemoteProtocolError) so callers keep one vocabulary for "cometbft did not answer".
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple
from urllib.parse import urlsplit

import httpx

#: the most bytes an answer's header block may take
MAX_HEADER_BYTES = 64 * 1024


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        self.writer.close()


class PostPool:
    """POST bodies to one http:// URL over at most `keep` idle kept-alive connections."""

    def __init__(self, url: str, *, timeout: float | None = 30.0, keep: int = 64) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"PostPool speaks plain http only, not {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.path = parts.path or "/"
        self.timeout = timeout
        self.keep = keep
        self._idle: list[_Conn] = []
        self._head = (f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                      "Content-Type: application/json\r\nConnection: keep-alive\r\n")

    async def post(self, body: bytes) -> tuple[int, bytes]:
        """(status, body) of the answer. A kept connection the server closed meanwhile is
        retried once on a new one, only when nothing of an answer had arrived."""
        answer = await self.send(f"{self._head}Content-Length: {len(body)}\r\n\r\n".encode()
                                 + body)
        return answer.status, answer.body

    async def get(self, target: str) -> tuple[int, bytes]:
        """(status, body) of a GET of `target` (path and query) on the same host."""
        answer = await self.send(f"GET {target} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                                 "Connection: keep-alive\r\n\r\n".encode())
        return answer.status, answer.body

    async def send(self, request: bytes) -> Answer:
        """The answer to one whole HTTP/1.1 request (head and body, as bytes) on a kept
        connection to this host: for callers that need another method, path or headers."""
        while self._idle:
            conn = self._idle.pop()
            try:
                return await self._exchange(conn, request)
            except _Stale:
                continue  # the server closed it while idle: try the next or a new one
        try:
            return await self._exchange(await self._open(), request)
        except _Stale:
            raise httpx.ReadError(f"{self.host}:{self.port} closed the connection "
                                  "without an answer") from None

    async def _open(self) -> _Conn:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.timeout)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {self.host}:{self.port}") from None
        except OSError as exc:
            raise httpx.ConnectError(f"{self.host}:{self.port}: {exc}") from None
        return _Conn(reader, writer)

    async def _exchange(self, conn: _Conn, request: bytes) -> Answer:
        started = False
        try:
            conn.writer.write(request)
            await conn.writer.drain()
            async with asyncio.timeout(self.timeout):
                head = await conn.reader.readuntil(b"\r\n\r\n")
            started = True
            status, headers, length, chunked, close = _parse_head(head)
            async with asyncio.timeout(self.timeout):
                if chunked:
                    data = await _read_chunked(conn.reader)
                elif length is not None:
                    data = await conn.reader.readexactly(length)
                else:
                    data, close = await conn.reader.read(), True
        except TimeoutError:
            conn.close()
            raise httpx.ReadTimeout(f"no answer from {self.host}:{self.port}") from None
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
            conn.close()
            if not started and isinstance(exc, (asyncio.IncompleteReadError,
                                                ConnectionResetError, BrokenPipeError)):
                raise _Stale from None
            raise httpx.ReadError(f"{self.host}:{self.port}: {exc!r}") from None
        except ValueError as exc:
            conn.close()
            raise httpx.RemoteProtocolError(str(exc)) from None
        if close or len(self._idle) >= self.keep:
            conn.close()
        else:
            self._idle.append(conn)
        return Answer(status, headers, data)

    async def aclose(self) -> None:
        self.close_idle()

    def close_idle(self) -> None:
        """Close the kept connections, even where their loop has ended (then each is only
        dropped)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            try:
                conn.close()
            except RuntimeError:  # its event loop is closed: nothing left to close it on
                pass


class Answer(NamedTuple):
    """An HTTP answer read whole: status, header fields in the order sent, body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


class _Stale(Exception):
    """A kept connection was closed by the server before it answered anything."""


def _parse_head(head: bytes) -> tuple[int, list[tuple[str, str]], int | None, bool, bool]:
    """(status, header fields, content length, chunked, connection close) of an answer's
    head."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
    status = int(parts[1])
    headers: list[tuple[str, str]] = []
    length: int | None = None
    chunked = close = False
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        name, value = name.strip(), value.strip()
        headers.append((name, value))
        lowered = name.lower()
        if lowered == "content-length":
            length = int(value)
        elif lowered == "transfer-encoding":
            chunked = "chunked" in value.lower()
        elif lowered == "connection":
            close = "close" in value.lower()
    return status, headers, length, chunked, close


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    out = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return bytes(out)
        out += await reader.readexactly(size)
        await reader.readexactly(2)
