"""Fuzz the ABCI frame reader: the uvarint decoder and a live server connection.

A connection fed arbitrary bytes must end one of three ways — answered frames, a closed
connection, or both — never a hang, never a dead server, never an application call that
blows up. The app behind the server is BaseApplication (safe defaults); an app failure
would end the process, so it is trapped and recorded here instead.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memledger.consensus.wire import server as abci_server
from memledger.consensus.wire.interface import BaseApplication
from memledger.consensus.wire.server import (
    ABCIServer,
    FrameError,
    decode_uvarint,
    encode_frame,
    encode_uvarint,
)
from memledger.protocol.pb import abci_pb2 as pb
from tests.fuzz.common import budget

MAX_FRAME = 1 << 20
IO_TIMEOUT = 10.0


# ------------------------------------------------------------------ uvarint decoder
@budget(1000)
@given(data=st.binary(max_size=24), pos=st.integers(0, 24))
def test_decode_uvarint_total(data: bytes, pos: int) -> None:
    """None (need more), a value below 2^64 with a forward position, or FrameError."""
    try:
        result = decode_uvarint(data, pos)
    except FrameError:
        tail = data[pos:pos + 10]
        assert len(tail) == 10 and all(b & 0x80 for b in tail[:9]) and tail[9] > 1, data
        return
    if result is None:
        assert all(b & 0x80 for b in data[pos:]) and len(data[pos:]) < 10
        return
    value, end = result
    assert 0 <= value < 1 << 64 and pos < end <= pos + 10 and end <= len(data)
    assert data[end - 1] < 0x80 and all(b & 0x80 for b in data[pos:end - 1])
    minimal = encode_uvarint(value)
    assert decode_uvarint(minimal) == (value, len(minimal))
    assert len(minimal) <= end - pos


# ------------------------------------------------------------------ live server
class AppBug(Exception):
    pass


class FuzzApp(BaseApplication):
    """Defaults, plus a CheckTx that echoes the tx length (to see it answered)."""

    def check_tx(self, req: pb.RequestCheckTx) -> pb.ResponseCheckTx:
        return pb.ResponseCheckTx(code=0, gas_wanted=len(req.tx))


class ServerThread:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.server = ABCIServer(FuzzApp(), f"unix://{path}", max_frame_bytes=MAX_FRAME)
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def main() -> None:
            await self.server.start()
            self.ready.set()
            await self.server.serve_forever()

        self.loop.run_until_complete(main())
        self.loop.close()

    def connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(IO_TIMEOUT)
        sock.connect(str(self.path))
        return sock

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, list[str]]]:
    bugs: list[str] = []

    def trap(what: str) -> None:
        bugs.append(what)
        raise AppBug(what)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(abci_server, "_die_app_bug", trap)
        srv = ServerThread(tmp_path_factory.mktemp("abci-fuzz") / "abci.sock")
        yield srv, bugs
        srv.stop()


def _exchange(srv: ServerThread, stream: bytes) -> bytes:
    """Send everything, half-close, read until the server closes (or time out = hang)."""
    sock = srv.connect()
    received = bytearray()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while chunk := sock.recv(65536):
                received.extend(chunk)
        except OSError as exc:  # reset by peer after a protocol error is fine
            if not isinstance(exc, ConnectionResetError):
                errors.append(exc)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        sock.sendall(stream)
        sock.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server already gave up on us
    t.join(IO_TIMEOUT + 2)
    sock.close()
    assert not t.is_alive(), "server neither answered nor closed the connection (hang)"
    assert not errors, errors
    return bytes(received)


def _responses(data: bytes) -> list[pb.Response]:
    """Parse what the server sent: whole frames only, each a valid Response."""
    out, pos = [], 0
    while pos < len(data):
        head = decode_uvarint(data, pos)
        assert head is not None, "truncated response header"
        length, start = head
        assert start + length <= len(data), "truncated response frame"
        out.append(pb.Response.FromString(data[start:start + length]))
        pos = start + length
    return out


REQUESTS = st.one_of(
    st.builds(lambda m: pb.Request(echo=pb.RequestEcho(message=m)), st.text(max_size=20)),
    st.just(pb.Request(flush=pb.RequestFlush())),
    st.just(pb.Request(info=pb.RequestInfo())),
    st.builds(lambda tx: pb.Request(check_tx=pb.RequestCheckTx(tx=tx)), st.binary(max_size=64)),
    st.builds(lambda p, d: pb.Request(query=pb.RequestQuery(path=p, data=d)),
              st.text(max_size=10), st.binary(max_size=10)),
    st.builds(lambda txs: pb.Request(finalize_block=pb.RequestFinalizeBlock(txs=txs, height=1)),
              st.lists(st.binary(max_size=16), max_size=4)),
    st.just(pb.Request()),  # no method set: answered with an exception, then closed
)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["random", "frames", "frames+garbage", "huge_header",
                                 "partial", "frames_random_payload", "varint_overflow"]))
    frames = b"".join(encode_frame(r) for r in draw(st.lists(REQUESTS, max_size=6)))
    if kind == "random":
        return draw(st.binary(max_size=2048))
    if kind == "frames":
        return frames
    if kind == "frames+garbage":
        return frames + draw(st.binary(min_size=1, max_size=256))
    if kind == "huge_header":
        return frames + encode_uvarint(draw(st.integers(MAX_FRAME + 1, 2**64 - 1)))
    if kind == "partial":
        length = draw(st.integers(1, MAX_FRAME))
        return frames + encode_uvarint(length) + draw(st.binary(max_size=min(length - 1, 512)))
    if kind == "frames_random_payload":
        payloads = draw(st.lists(st.binary(max_size=64), min_size=1, max_size=4))
        return frames + b"".join(encode_uvarint(len(p)) + p for p in payloads)
    return frames + b"\xff" * draw(st.integers(10, 12)) + b"\x01"


@budget(120)
@given(stream=streams())
def test_server_survives_any_stream(live: tuple[ServerThread, list[str]], stream: bytes) -> None:
    srv, bugs = live
    answered = _responses(_exchange(srv, stream))
    for resp in answered:
        assert resp.WhichOneof("value") is not None
    assert not bugs, f"an application call failed: {bugs}"
    # The server is still alive and serves a fresh connection.
    ping = encode_frame(pb.Request(echo=pb.RequestEcho(message="ping")))
    flush = encode_frame(pb.Request(flush=pb.RequestFlush()))
    after = _responses(_exchange(srv, ping + flush))
    assert [r.WhichOneof("value") for r in after] == ["echo", "flush"]
    assert after[0].echo.message == "ping"
