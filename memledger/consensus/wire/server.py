"""Asyncio ABCI socket server for CometBFT v0.38.

Wire format (CometBFT libs/protoio): every message is ``uvarint(len) || protobuf``; CometBFT
sends Request frames and expects exactly one Response per Request, in request order. It opens
four connections (consensus, mempool, query, snapshot); each gets its own reader task, but all
of them run on one event loop and the application is called synchronously from it, so app calls
are serialized without locks.

An exception from the application is a bug, not an answer: we log it and ``os._exit(70)``
without writing anything, so CometBFT can never persist a result the app did not compute.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import logging
import os
import signal
import socket
import stat
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, NoReturn

from google.protobuf.message import DecodeError, Message

from memledger.consensus.wire.interface import Application
from memledger.consensus.wire.phases import PhaseCpu
from memledger.protocol.pb import abci_pb2 as pb

log = logging.getLogger(__name__)

MiB = 1024 * 1024
# A frame carries at most one block (FinalizeBlock/ProcessProposal) plus commit info and
# evidence. 64 MiB of block plus headroom; keep consensus block.max_bytes below 64 MiB.
DEFAULT_MAX_FRAME_BYTES = 64 * MiB + 4 * MiB
MAX_UVARINT_BYTES = 10  # 64 bits / 7 bits per byte, rounded up
EXIT_APP_BUG = 70  # EX_SOFTWARE
_READ_CHUNK = 256 * 1024
_SERVER_ANSWERED = ("echo", "flush")
# Request oneof names the app must implement; the Response oneof uses the same names.
APP_METHODS: tuple[str, ...] = tuple(
    f.name
    for f in pb.Request.DESCRIPTOR.oneofs_by_name["value"].fields
    if f.name not in _SERVER_ANSWERED
)


class FrameError(ValueError):
    """The peer sent bytes that are not a valid frame; the connection cannot continue."""


# --------------------------------------------------------------------------- framing


def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128, as Go's binary.PutUvarint."""
    if not 0 <= value < 1 << 64:
        raise ValueError(f"uvarint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """Return (value, position after it), or None if data ends mid-varint.

    Rejects what Go's binary.ReadUvarint rejects: more than 10 bytes, or a value over 64 bits.
    """
    value = 0
    for i in range(MAX_UVARINT_BYTES):
        if pos + i >= len(data):
            return None
        byte = data[pos + i]
        if i == MAX_UVARINT_BYTES - 1 and byte > 1:
            raise FrameError("uvarint overflows 64 bits")
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value, pos + i + 1
    raise FrameError("uvarint longer than 10 bytes")


def encode_frame(msg: Message) -> bytes:
    """Length-prefixed serialization of one message."""
    body: bytes = msg.SerializeToString(deterministic=True)
    return encode_uvarint(len(body)) + body


# --------------------------------------------------------------------------- addresses


@dataclass(frozen=True)
class ListenAddress:
    """A parsed ``tcp://host:port`` or ``unix://path`` (CometBFT's proxy_app syntax)."""

    scheme: str  # "tcp" | "unix"
    host: str = ""
    port: int = 0
    path: str = ""

    @classmethod
    def parse(cls, address: str) -> ListenAddress:
        scheme, sep, rest = address.partition("://")
        if not sep:  # CometBFT treats a bare host:port as tcp
            scheme, rest = "tcp", address
        if scheme == "unix":
            if not rest:
                raise ValueError(f"unix address without a path: {address!r}")
            return cls("unix", path=rest)
        if scheme != "tcp":
            raise ValueError(f"unsupported ABCI address scheme {scheme!r} in {address!r}")
        host, colon, port = rest.rpartition(":")
        if not colon or not port.isdigit():
            raise ValueError(f"tcp address needs host:port: {address!r}")
        return cls("tcp", host=host.strip("[]"), port=int(port))


# --------------------------------------------------------------------------- server


def _die_app_bug(what: str) -> NoReturn:
    """Log the active exception loudly and end the process without answering CometBFT."""
    log.critical("ABCI application bug in %s; terminating without a response", what, exc_info=True)
    for handler in logging.getLogger().handlers + log.handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(EXIT_APP_BUG)


class ABCIServer:
    """Serves one Application over a TCP or unix socket until stop() is called."""

    def __init__(
        self,
        app: Application,
        address: str,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        missing = [m for m in APP_METHODS if not callable(getattr(app, m, None))]
        if missing:
            raise TypeError(f"application lacks ABCI methods: {', '.join(missing)}")
        self._handlers: dict[str, Callable[[Message], Message]] = {
            m: getattr(app, m) for m in APP_METHODS
        }
        self.address = ListenAddress.parse(address)
        self.max_frame_bytes = max_frame_bytes
        self._server: asyncio.Server | None = None
        self._stopped = asyncio.Event()  # loop-agnostic until first awaited (3.10+)
        self._conns: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._unix_inode: int | None = None
        phases = getattr(app, "phase_cpu", None)
        self._phases: PhaseCpu | None = phases if isinstance(phases, PhaseCpu) else None

    # ---- lifecycle

    async def start(self) -> None:
        """Bind and start accepting; returns once listening."""
        if self.address.scheme == "unix":
            path = self.address.path
            _remove_stale_unix_socket(path)
            self._server = await asyncio.start_unix_server(self._on_connect, path=path)
            self._unix_inode = os.stat(path).st_ino
        else:
            self._server = await asyncio.start_server(
                self._on_connect, host=self.address.host or None, port=self.address.port
            )
        log.info("ABCI server listening on %s", self.listening_on)

    @property
    def listening_on(self) -> str:
        """The bound address (with the real port when port 0 was requested)."""
        if self.address.scheme == "unix":
            return f"unix://{self.address.path}"
        return f"tcp://{self.address.host}:{self.port}"

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            raise RuntimeError("server is not listening")
        return int(self._server.sockets[0].getsockname()[1])

    async def serve_forever(self) -> None:
        """Start if needed, then serve until stop(); cleans up sockets before returning."""
        if self._server is None:
            await self.start()
        try:
            await self._stopped.wait()
        finally:
            await self._shutdown()

    def stop(self) -> None:
        """Ask serve_forever() to return (safe from a signal handler, before start, or twice)."""
        self._stopped.set()

    async def _shutdown(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
        if server is not None:
            await server.wait_closed()
        if self.address.scheme == "unix" and self._unix_inode is not None:
            with contextlib.suppress(FileNotFoundError):
                if os.stat(self.address.path).st_ino == self._unix_inode:
                    os.unlink(self.address.path)
            self._unix_inode = None
        log.info("ABCI server stopped")

    # ---- connections

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        conn_id = next(self._ids)
        log.info("ABCI connection %d opened", conn_id)
        try:
            await self._serve_connection(conn_id, reader, writer)
        except asyncio.CancelledError:
            pass
        except FrameError as exc:
            log.error("ABCI connection %d: protocol error, closing: %s", conn_id, exc)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.warning("ABCI connection %d lost: %r", conn_id, exc)
        except Exception:  # a server bug: drop this connection loudly, keep the others
            log.critical(
                "ABCI connection %d: unexpected server error, closing", conn_id, exc_info=True
            )
        finally:
            self._conns.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            log.info("ABCI connection %d closed", conn_id)

    async def _serve_connection(
        self, conn_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Read frames, answer each in order; responses go out before every blocking read."""
        buf = bytearray()
        out = bytearray()
        pos = 0  # first unconsumed byte in buf
        while True:
            head = decode_uvarint(buf, pos)
            missing = 0  # bytes still needed to complete a frame whose header we have
            if head is not None:
                length, start = head
                self._check_size(conn_id, length)
                if start + length <= len(buf):
                    pos = start + length
                    req_bytes = bytes(memoryview(buf)[start:pos])
                    if not await self._handle_frame(writer, out, req_bytes):
                        return
                    continue
                missing = start + length - len(buf)
            await _send(writer, out)  # never sit on answers while waiting for the peer
            del buf[:pos]
            pos = 0
            if missing:  # header known: fetch exactly the rest of a (large) frame
                buf += await reader.readexactly(missing)
                continue
            chunk = await reader.read(_READ_CHUNK)
            if not chunk:
                if buf:
                    log.warning("ABCI connection %d: EOF inside a frame", conn_id)
                return
            buf += chunk

    async def _handle_frame(
        self, writer: asyncio.StreamWriter, out: bytearray, req_bytes: bytes
    ) -> bool:
        """Queue the response to one frame; False if the connection must close afterwards."""
        try:
            req = pb.Request.FromString(req_bytes)
        except DecodeError as exc:
            raise FrameError(f"undecodable Request ({len(req_bytes)} bytes): {exc}") from exc
        kind = req.WhichOneof("value")
        out += encode_frame(self._respond(kind, req))
        if kind == "flush":
            await _send(writer, out)
        elif kind is None:  # answered with an exception, which ends the connection (as in Go)
            await _send(writer, out)
            log.error("ABCI request with no method set; closing the connection")
            return False
        return True

    def _check_size(self, conn_id: int, length: int) -> None:
        if length > self.max_frame_bytes:
            log.critical(
                "ABCI connection %d: frame of %d bytes exceeds max_frame_bytes=%d; closing it "
                "(is consensus block.max_bytes larger than the server limit?)",
                conn_id,
                length,
                self.max_frame_bytes,
            )
            raise FrameError("frame too large")

    def _respond(self, kind: str | None, req: pb.Request) -> pb.Response:
        """Compute the Response for one Request; app failures end the process."""
        if kind == "echo":
            return pb.Response(echo=pb.ResponseEcho(message=req.echo.message))
        if kind == "flush":
            return pb.Response(flush=pb.ResponseFlush())
        if kind is None:
            return pb.Response(exception=pb.ResponseException(error="request has no method"))
        resp = pb.Response()
        phases = self._phases
        started = time.thread_time_ns() if phases is not None else 0
        try:
            result = self._handlers[kind](getattr(req, kind))
            getattr(resp, kind).CopyFrom(result)  # TypeError if the app returned the wrong type
        except Exception:
            _die_app_bug(kind)
        if phases is not None:
            phase = "recheck_tx" if kind == "check_tx" and req.check_tx.type == pb.RECHECK \
                else kind
            phases.add(phase, time.thread_time_ns() - started)
        return resp


async def _send(writer: asyncio.StreamWriter, out: bytearray) -> None:
    """Write pending responses (if any) and wait for the socket buffer to drain."""
    if out:
        writer.write(bytes(out))
        out.clear()
        await writer.drain()


def _remove_stale_unix_socket(path: str) -> None:
    """Delete a leftover socket file, but never a live socket or a non-socket file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(errno.EEXIST, "not a socket, refusing to replace", path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # nobody listening: stale file from a previous run
            return
    raise OSError(errno.EADDRINUSE, "another process is serving on this socket", path)


def run(app: Application, address: str, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
    """Serve app on address until SIGINT/SIGTERM, then shut down cleanly."""

    async def main() -> None:
        server = ABCIServer(app, address, max_frame_bytes=max_frame_bytes)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, server.stop)
        await server.serve_forever()

    _loop_runner()(main())


def _loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """uvloop's runner when it is installed (a node install has it), else asyncio's.

    Why: cometbft sends CheckTx one or a few at a time, and each batch costs the event
    loop a read, a write and a wake-up; uvloop does that part in C, about a quarter less
    CPU per request. Which loop runs cannot change an answer: the app is called
    synchronously, in each connection's request order, on either.
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run
