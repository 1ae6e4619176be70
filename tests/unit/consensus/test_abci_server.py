"""ABCI socket server: framing, ordering, pipelining, large frames, several connections."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memledger.consensus.wire.interface import BaseApplication, encoded_tx_size
from memledger.consensus.wire.server import (
    APP_METHODS,
    EXIT_APP_BUG,
    ABCIServer,
    FrameError,
    ListenAddress,
    decode_uvarint,
    encode_frame,
    encode_uvarint,
)
from memledger.protocol.pb import abci_pb2 as pb
from memledger.sdk.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]
MAX_FRAME = 8 * 1024 * 1024


class RecordingApp(BaseApplication):
    """Answers with values derived from the request, and records the call order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.active = 0

    def info(self, req: pb.RequestInfo) -> pb.ResponseInfo:
        self.calls.append("info")
        return pb.ResponseInfo(data="test-app", version=req.version, last_block_height=7)

    def check_tx(self, req: pb.RequestCheckTx) -> pb.ResponseCheckTx:
        self.active += 1
        assert self.active == 1, "app calls must be serialized"
        self.calls.append(f"check_tx:{len(req.tx)}")
        time.sleep(0.001)  # widen the window a concurrent call would need
        self.active -= 1
        return pb.ResponseCheckTx(
            code=req.tx[0] if req.tx else 0,
            data=hashlib.sha256(req.tx).digest(),
            gas_wanted=len(req.tx),
        )

    def finalize_block(self, req: pb.RequestFinalizeBlock) -> pb.ResponseFinalizeBlock:
        self.calls.append(f"finalize_block:{req.height}")
        return pb.ResponseFinalizeBlock(
            tx_results=[pb.ExecTxResult(code=0, data=tx[::-1]) for tx in req.txs],
            app_hash=req.height.to_bytes(8, "big"),
        )


# --------------------------------------------------------------------------- harness


class ServerThread:
    """Runs an ABCIServer on its own event loop thread so tests can use blocking sockets."""

    def __init__(self, address: str, app: RecordingApp, max_frame: int = MAX_FRAME) -> None:
        self.app = app
        self.server = ABCIServer(app, address, max_frame_bytes=max_frame)
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "server did not start"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def main() -> None:
            await self.server.start()
            self._ready.set()
            await self.server.serve_forever()

        self.loop.run_until_complete(main())
        self.loop.close()

    def connect(self) -> socket.socket:
        addr = self.server.address
        if addr.scheme == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(addr.path)
        else:
            sock = socket.create_connection(("127.0.0.1", self.server.port))
        sock.settimeout(20)
        return sock

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.stop)
        self._thread.join(10)
        assert not self._thread.is_alive()


@pytest.fixture(params=["unix", "tcp"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerThread]:
    address = f"unix://{tmp_path}/abci.sock" if request.param == "unix" else "tcp://127.0.0.1:0"
    srv = ServerThread(address, RecordingApp())
    yield srv
    srv.stop()


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 1 << 20))
        if not chunk:
            raise EOFError(f"connection closed after {len(data)}/{n} bytes")
        data += chunk
    return bytes(data)


def recv_response(sock: socket.socket) -> pb.Response:
    header = bytearray()
    while True:
        header += recv_exactly(sock, 1)
        decoded = decode_uvarint(header)
        if decoded is not None:
            return pb.Response.FromString(recv_exactly(sock, decoded[0]))


def frames(*reqs: pb.Request) -> bytes:
    return b"".join(encode_frame(r) for r in reqs)


def echo(msg: str) -> pb.Request:
    return pb.Request(echo=pb.RequestEcho(message=msg))


def check_tx(tx: bytes) -> pb.Request:
    return pb.Request(check_tx=pb.RequestCheckTx(tx=tx))


FLUSH = pb.Request(flush=pb.RequestFlush())


# --------------------------------------------------------------------------- uvarint


@pytest.mark.parametrize("value", [0, 1, 127, 128, 255, 300, 2**14, 2**32, 2**63, 2**64 - 1])
def test_uvarint_edge_values_round_trip(value: int) -> None:
    encoded = encode_uvarint(value)
    assert decode_uvarint(encoded) == (value, len(encoded))
    assert decode_uvarint(b"\xaa" + encoded, 1) == (value, len(encoded) + 1)
    assert decode_uvarint(encoded[:-1]) is None  # truncated: need more bytes


def test_uvarint_known_encodings() -> None:
    assert encode_uvarint(0) == b"\x00"
    assert encode_uvarint(127) == b"\x7f"
    assert encode_uvarint(128) == b"\x80\x01"
    assert encode_uvarint(300) == b"\xac\x02"
    assert len(encode_uvarint(2**63)) == 10


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_uvarint_round_trip_property(value: int) -> None:
    encoded = encode_uvarint(value)
    assert decode_uvarint(encoded + b"\xff") == (value, len(encoded))


def test_uvarint_rejects_invalid() -> None:
    with pytest.raises(ValueError):
        encode_uvarint(-1)
    with pytest.raises(ValueError):
        encode_uvarint(2**64)
    with pytest.raises(FrameError):
        decode_uvarint(b"\xff" * 9 + b"\x02")  # 10th byte may only carry one bit
    with pytest.raises(FrameError):
        decode_uvarint(b"\x80" * 11)


def test_listen_address_parsing() -> None:
    assert ListenAddress.parse("tcp://127.0.0.1:26658") == ListenAddress("tcp", "127.0.0.1", 26658)
    assert ListenAddress.parse("127.0.0.1:1") == ListenAddress("tcp", "127.0.0.1", 1)
    assert ListenAddress.parse("tcp://[::1]:5") == ListenAddress("tcp", "::1", 5)
    assert ListenAddress.parse("unix:///tmp/a.sock") == ListenAddress("unix", path="/tmp/a.sock")
    for bad in ("udp://x:1", "tcp://nohost", "unix://"):
        with pytest.raises(ValueError):
            ListenAddress.parse(bad)


# --------------------------------------------------------------------------- server


def test_echo_and_flush(server: ServerThread) -> None:
    with server.connect() as sock:
        sock.sendall(frames(echo("hello"), FLUSH))
        assert recv_response(sock).echo.message == "hello"
        assert recv_response(sock).WhichOneof("value") == "flush"


def test_pipelined_requests_answered_in_order(server: ServerThread) -> None:
    info = pb.Request(info=pb.RequestInfo(version="0.38.25"))
    block = pb.Request(finalize_block=pb.RequestFinalizeBlock(height=5, txs=[b"ab", b"cd"]))
    txs = [bytes([i]) * (i + 1) for i in range(20)]
    with server.connect() as sock:
        sock.sendall(frames(info, *(check_tx(t) for t in txs), echo("mid"), block, FLUSH))
        got_info = recv_response(sock).info
        assert (got_info.data, got_info.version, got_info.last_block_height) == (
            "test-app",
            "0.38.25",
            7,
        )
        for tx in txs:
            resp = recv_response(sock).check_tx
            assert resp.code == tx[0] and resp.data == hashlib.sha256(tx).digest()
        assert recv_response(sock).echo.message == "mid"
        fin = recv_response(sock).finalize_block
        assert [r.data for r in fin.tx_results] == [b"ba", b"dc"]
        assert fin.app_hash == (5).to_bytes(8, "big")
        assert recv_response(sock).HasField("flush")
    assert server.app.calls[0] == "info" and server.app.calls[-1] == "finalize_block:5"


def test_frame_split_into_single_bytes(server: ServerThread) -> None:
    data = frames(check_tx(b"\x03slow"), echo("after"), FLUSH)
    with server.connect() as sock:
        if sock.family != socket.AF_UNIX:  # make each byte its own TCP segment
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(data)):
            sock.sendall(data[i : i + 1])
            time.sleep(0.0005)
        assert recv_response(sock).check_tx.code == 3
        assert recv_response(sock).echo.message == "after"
        assert recv_response(sock).HasField("flush")


def test_large_frame(server: ServerThread) -> None:
    big = bytes(range(256)) * (5 * 1024 * 1024 // 256)
    with server.connect() as sock:
        sender = threading.Thread(target=sock.sendall, args=(frames(check_tx(big), FLUSH),))
        sender.start()
        resp = recv_response(sock).check_tx
        sender.join()
        assert resp.gas_wanted == len(big) and resp.data == hashlib.sha256(big).digest()
        assert recv_response(sock).HasField("flush")


def test_four_concurrent_connections(server: ServerThread) -> None:
    errors: list[BaseException] = []

    def client(n: int) -> None:
        try:
            with server.connect() as sock:
                for round_ in range(30):
                    txs = [bytes([n, round_, k]) for k in range(5)]
                    sock.sendall(frames(*(check_tx(t) for t in txs), echo(f"{n}/{round_}"), FLUSH))
                    for tx in txs:
                        assert recv_response(sock).check_tx.data == hashlib.sha256(tx).digest()
                    assert recv_response(sock).echo.message == f"{n}/{round_}"
                    assert recv_response(sock).HasField("flush")
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert sum(c.startswith("check_tx") for c in server.app.calls) == 4 * 30 * 5


def test_oversized_frame_closes_only_that_connection(tmp_path: Path) -> None:
    srv = ServerThread(f"unix://{tmp_path}/s.sock", RecordingApp(), max_frame=1024)
    try:
        with srv.connect() as bad, srv.connect() as good:
            bad.sendall(encode_uvarint(4096) + b"\x00" * 100)
            assert bad.recv(1) == b""  # closed without an answer
            good.sendall(frames(echo("still here"), FLUSH))
            assert recv_response(good).echo.message == "still here"
    finally:
        srv.stop()


def test_undecodable_frame_closes_connection(server: ServerThread) -> None:
    with server.connect() as sock:
        sock.sendall(encode_uvarint(3) + b"\xff\xff\xff")
        assert sock.recv(1) == b""


def test_unix_socket_file_removed_and_stale_file_replaced(tmp_path: Path) -> None:
    path = tmp_path / "abci.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # a socket file nobody listens on, as left by a crash
    stale.close()
    srv = ServerThread(f"unix://{path}", RecordingApp())
    assert path.exists()
    srv.stop()
    assert not path.exists()


def test_refuses_to_take_over_live_or_non_socket_path(tmp_path: Path) -> None:
    srv = ServerThread(f"unix://{tmp_path}/live.sock", RecordingApp())
    try:
        with pytest.raises(OSError):
            asyncio.run(ABCIServer(RecordingApp(), f"unix://{tmp_path}/live.sock").start())
    finally:
        srv.stop()
    regular = tmp_path / "file"
    regular.write_text("keep me")
    with pytest.raises(FileExistsError):
        asyncio.run(ABCIServer(RecordingApp(), f"unix://{regular}").start())
    assert regular.read_text() == "keep me"


def test_app_without_all_methods_is_rejected() -> None:
    class Partial:
        def info(self, req: pb.RequestInfo) -> pb.ResponseInfo:
            return pb.ResponseInfo()

    with pytest.raises(TypeError, match="check_tx"):
        ABCIServer(Partial(), "tcp://127.0.0.1:0")  # type: ignore[arg-type]


def test_dispatch_covers_every_request_kind() -> None:
    oneof = pb.Request.DESCRIPTOR.oneofs_by_name["value"]
    assert set(APP_METHODS) | {"echo", "flush"} == {f.name for f in oneof.fields}
    response_fields = set(pb.Response.DESCRIPTOR.fields_by_name)
    assert set(APP_METHODS) <= response_fields


_CRASHING_SERVER = """
import sys
from memledger.consensus.wire.interface import BaseApplication
from memledger.consensus.wire.server import run

class Crashing(BaseApplication):
    def check_tx(self, req):
        raise RuntimeError("boom in check_tx")

run(Crashing(), sys.argv[1])
"""


def _wait_listening(proc: subprocess.Popen[str] | subprocess.Popen[bytes], path: Path) -> None:
    """Until a connect succeeds: the socket file appears at bind(), a moment before
    listen(), and a connect in between is refused."""
    def listening() -> bool:
        assert proc.poll() is None, "server exited"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.connect(str(path))
        return True

    wait_until(listening, 20, 0.02, what=f"the server to listen on {path}",
               ignore=(FileNotFoundError, ConnectionRefusedError))


def test_app_exception_kills_process_without_response(tmp_path: Path) -> None:
    path = tmp_path / "crash.sock"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_CRASHING_SERVER), f"unix://{path}"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_listening(proc, path)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(20)
            sock.connect(str(path))
            sock.sendall(frames(echo("before"), check_tx(b"x"), FLUSH))
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        _, stderr = proc.communicate(timeout=20)  # also closes the pipe
        assert proc.returncode == EXIT_APP_BUG
        assert received == b""  # not even the echo that preceded the failing call
        assert "boom in check_tx" in stderr and "Traceback" in stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_sigterm_stops_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "term.sock"
    script = "import sys\nfrom memledger.consensus.wire.interface import BaseApplication\n"
    script += "from memledger.consensus.wire.server import run\n"
    script += "run(BaseApplication(), sys.argv[1])\n"
    proc = subprocess.Popen([sys.executable, "-c", script, f"unix://{path}"], cwd=ROOT)
    try:
        _wait_listening(proc, path)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(path))  # an open connection must not block shutdown
            proc.terminate()
            assert proc.wait(20) == 0
        assert not path.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# --------------------------------------------------------------------------- BaseApplication


def test_base_application_defaults() -> None:
    app = BaseApplication()
    assert app.process_proposal(pb.RequestProcessProposal()).status == (
        pb.ResponseProcessProposal.ACCEPT
    )
    assert app.verify_vote_extension(pb.RequestVerifyVoteExtension()).status == (
        pb.ResponseVerifyVoteExtension.ACCEPT
    )
    assert app.check_tx(pb.RequestCheckTx(tx=b"x")).code == 0
    assert app.offer_snapshot(pb.RequestOfferSnapshot()).result == pb.ResponseOfferSnapshot.REJECT
    assert app.apply_snapshot_chunk(pb.RequestApplySnapshotChunk()).result == (
        pb.ResponseApplySnapshotChunk.ABORT
    )
    assert list(app.list_snapshots(pb.RequestListSnapshots()).snapshots) == []
    fin = app.finalize_block(pb.RequestFinalizeBlock(txs=[b"a", b"b"]))
    assert len(fin.tx_results) == 2


def test_base_prepare_proposal_respects_encoded_size() -> None:
    txs = [b"a" * 100, b"b" * 200, b"c" * 10]
    # 100-byte tx encodes to 102 bytes, 200-byte tx to 203 (two-byte length prefix).
    assert [encoded_tx_size(t) for t in txs] == [102, 203, 12]
    req = pb.RequestPrepareProposal(txs=txs, max_tx_bytes=102 + 203)
    assert list(BaseApplication().prepare_proposal(req).txs) == txs[:2]
    req = pb.RequestPrepareProposal(txs=txs, max_tx_bytes=102 + 202)
    assert list(BaseApplication().prepare_proposal(req).txs) == txs[:1]
    data = pb.ResponsePrepareProposal(txs=txs[:2]).SerializeToString()
    assert len(data) == 102 + 203  # same encoding as CometBFT's Data{txs}


def test_partial_large_frame_after_complete_frames(server: ServerThread) -> None:
    # Complete frames followed by the start of a big one in the same write: the server must
    # answer the complete ones, then wait for exactly the missing rest of the big frame.
    big = b"\x09" + b"z" * (2 * 1024 * 1024)
    big_frame = frames(check_tx(big), FLUSH)
    cut = 1000
    with server.connect() as sock:
        sock.sendall(frames(echo("first"), FLUSH) + big_frame[:cut])
        assert recv_response(sock).echo.message == "first"
        assert recv_response(sock).HasField("flush")
        sock.sendall(big_frame[cut:])
        assert recv_response(sock).check_tx.code == 9
        assert recv_response(sock).HasField("flush")


def test_request_without_method_gets_exception_and_close(server: ServerThread) -> None:
    with server.connect() as sock:
        sock.sendall(frames(echo("ok"), pb.Request(), echo("never answered")))
        assert recv_response(sock).echo.message == "ok"
        assert recv_response(sock).exception.error
        assert sock.recv(1) == b""
