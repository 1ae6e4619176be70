"""stdio for the MCP server on the event loop itself.

The SDK's stdio transport reads stdin and writes stdout through worker threads (a thread
hop per line read, two per message written): on a 2-core machine that is most of what a
tool call costs beyond the REST call under it. Here the same pipes are asyncio streams,
read and written on the loop, and handed to the SDK's own `stdio_server` (public: it
takes any async line iterator and writer), so the framing and parsing stay the SDK's.

Like the SDK, it claims the process's fds while serving: the wire moves to private
duplicates, fd 0 reads the null device and fd 1 writes to stderr, so a stray print or a
child process cannot corrupt the protocol; both are put back on exit.

One thing is not public: the low-level server under `MCPServer` (`lowlevel_server`),
which `MCPServer.run_stdio_async` runs itself. Only `lowlevel_server` reaches for it;
when a future SDK moves it, or stdin/stdout are not pipes (a regular file), the server
runs on the SDK's own stdio transport instead, slower and otherwise the same.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import IO, Any

from mcp.server.stdio import stdio_server

#: the longest line read (a message): far above the ledger's 1 MiB transaction
LINE_LIMIT = 64 << 20
#: the transports `serve` can run on
PIPES, SDK_STDIO = "pipes", "sdk-stdio"


def lowlevel_server(server: Any) -> Any | None:
    """The low-level server `MCPServer` wraps, or None when this SDK hides it elsewhere.
    The one place that reaches for the private attribute."""
    low = getattr(server, "_lowlevel_server", None)
    if callable(getattr(low, "run", None)) and \
            callable(getattr(low, "create_initialization_options", None)):
        return low
    return None


class LinesIn:
    """Lines of a pipe as text, for `async for` (what the SDK's stdio reader iterates)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            line = await self._reader.readline()
            if not line:
                return
            yield line.decode("utf-8", errors="replace")


class _FlowControl(asyncio.Protocol):
    """A write pipe's back-pressure: `flush` waits while the pipe's buffer is full."""

    def __init__(self) -> None:
        self.ready = asyncio.Event()
        self.ready.set()
        self.lost: Exception | None = None

    def pause_writing(self) -> None:
        self.ready.clear()

    def resume_writing(self) -> None:
        self.ready.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or BrokenPipeError("the MCP client closed stdout")
        self.ready.set()


class LinesOut:
    """Text written to a pipe without blocking the loop (what the SDK's stdio writer
    calls: `write`, then `flush`)."""

    def __init__(self, transport: asyncio.WriteTransport, flow: _FlowControl) -> None:
        self._transport = transport
        self._flow = flow

    async def write(self, text: str) -> None:
        if self._flow.lost is not None:
            raise self._flow.lost
        self._transport.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._flow.ready.wait()
        if self._flow.lost is not None:
            raise self._flow.lost


def _private_copy(fd: int, mode: str) -> IO[Any]:
    dup = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    return os.fdopen(dup, mode, buffering=0)


@asynccontextmanager
async def claimed_pipes(stdin_fd: int = 0, stdout_fd: int = 1,
                        ) -> AsyncIterator[tuple[LinesIn, LinesOut] | None]:
    """The process's stdin and stdout as loop streams, or None when they are not pipes
    (nothing is claimed then). While open, the two fds point away from the wire."""
    loop = asyncio.get_running_loop()
    wire_in, wire_out = _private_copy(stdin_fd, "rb"), _private_copy(stdout_fd, "wb")
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    try:
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), wire_in)
    except (ValueError, OSError):  # a regular file or a terminal asyncio cannot watch
        wire_in.close()
        wire_out.close()
        yield None
        return
    try:
        write_transport, flow = await loop.connect_write_pipe(_FlowControl, wire_out)
    except (ValueError, OSError):
        read_transport.close()
        wire_out.close()
        yield None
        return
    saved = [(fd, os.dup(fd)) for fd in (stdin_fd, stdout_fd)]
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, stdin_fd)
        os.close(null)
        os.dup2(2, stdout_fd)  # stray prints go to stderr
        yield LinesIn(reader), LinesOut(write_transport, flow)
    finally:
        for fd, copy in saved:
            with suppress(OSError):
                os.dup2(copy, fd)
            os.close(copy)
        read_transport.close()
        write_transport.close()


async def serve(server: Any) -> str:
    """Serve `server` (an MCPServer) on stdio until the client closes stdin; returns the
    transport it ran on (PIPES, or SDK_STDIO when it had to fall back)."""
    low = lowlevel_server(server)
    if low is not None:
        async with claimed_pipes() as pipes:
            if pipes is not None:
                async with stdio_server(*pipes) as (read, write):  # type: ignore[arg-type]
                    await low.run(read, write, low.create_initialization_options())
                return PIPES
    await server.run_stdio_async()
    return SDK_STDIO
