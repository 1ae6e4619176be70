"""A block's Ed25519 checks on a second core, while the main thread executes its txs.

Why: libsodium's verify is ~100 µs per tx, as much as the rest of processTx. A block whose
signatures CheckTx has not already cached (a node catching up, a block proposed by
others from txs it never saw) pays it serially. Here a helper process verifies the
block's signatures in order, a few chunks ahead of the executing thread, which only waits
when it overtakes the helper.

Outcomes cannot change: the helper runs the same `verify_signature` (libsodium), answers
are consumed strictly in block order, and any failure of the helper (death, broken pipe,
garbage) falls back to verifying inline. Only speed depends on the machine. A process,
not a thread: a thread would wait up to the interpreter's 5 ms switch interval for the
GIL after every call while the main thread runs Python.
"""

from __future__ import annotations

import logging
import pickle
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from multiprocessing.connection import Connection

from memledger.consensus.gate.envelope import verify_signature

log = logging.getLogger("memledger.verifypool")

Triple = tuple[bytes, bytes, bytes]  # public key, signed message, signature
_READY = b"ready"


_SEQ = 8  # bytes of chunk sequence number leading every answer
_ANSWER_TIMEOUT_S = 10.0


def _worker(conn: Connection) -> None:
    """Helper process: answer each (seq, triples) with seq + one byte (1 = valid) per item."""
    conn.send_bytes(_READY)
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return
        seq, chunk = pickle.loads(data)
        verdicts = bytes(verify_signature(pk, msg, sig) for pk, msg, sig in chunk)
        conn.send_bytes(seq.to_bytes(_SEQ, "big") + verdicts)


class VerifyPool:
    """One helper process fed a bounded window of chunks; answers come back in order.

    Chunks carry a sequence number that never repeats in this process, so answers left
    unread by an earlier block (txs rejected before their signature was needed) are
    recognised and skipped instead of being taken for this block's.
    """

    def __init__(self, chunk_size: int = 64, window: int = 4, max_restarts: int = 3) -> None:
        self.chunk_size = chunk_size
        self.window = window  # chunks in flight: bounded so send() never blocks for long
        self._restarts_left = max_restarts
        self._conn: Connection | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._chunks: dict[int, list[Triple]] = {}
        self._unsent: deque[int] = deque()
        self._answers: dict[int, bytes] = {}
        self._next_seq = 0  # first sequence number of the next block
        self._base = 0  # this block's first sequence number
        self._expect = 0  # next answer the helper owes this block
        self._block_failed = False
        self.failures = 0

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        """Start the helper: a fresh interpreter running this module on one socket.

        Not multiprocessing.Process: its spawn mode re-imports the parent's __main__,
        and fork would share LMDB and the ABCI sockets with the child.
        """
        parent, child = socket.socketpair()
        fd = child.fileno()
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "memledger.consensus.gate.verifypool", str(fd)], pass_fds=(fd,),
            stdin=subprocess.DEVNULL, close_fds=True)
        child.close()
        self._conn = Connection(parent.detach())
        self._process, self._ready = process, False

    @property
    def usable(self) -> bool:
        """True once the helper has said it is ready (never blocks)."""
        if self._conn is None:
            return False
        if not self._ready:
            try:
                if self._conn.poll(0):
                    self._ready = self._conn.recv_bytes() == _READY
            except (EOFError, OSError):
                self._fail("helper died while starting")
        return self._ready

    def wait_usable(self, timeout_s: float) -> bool:
        """Block until the helper is ready (start-up of tests and benchmarks only)."""
        deadline = time.monotonic() + timeout_s
        while not self.usable:
            if self._conn is None or time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._process is not None:
            try:
                self._process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=2)
        self._conn = self._process = None
        self._ready = False

    def _fail(self, why: str) -> None:
        log.warning("signature helper unusable (%s); verifying inline", why)
        self.failures += 1
        self._block_failed = True
        self.close()
        if self._restarts_left > 0:
            self._restarts_left -= 1
            self.start()

    # -- one block ---------------------------------------------------------------------
    def submit(self, triples: list[Triple]) -> list[tuple[int, int]]:
        """Queue a block's triples; returns each one's (sequence, index) ticket."""
        size = self.chunk_size
        self._base = self._expect = self._next_seq
        self._chunks = {self._base + n: triples[i:i + size]
                        for n, i in enumerate(range(0, len(triples), size))}
        self._next_seq = self._base + len(self._chunks)
        self._unsent = deque(range(self._base, self._next_seq))
        self._answers = {}
        self._block_failed = False
        try:
            self._top_up(self._base)
        except OSError as exc:
            self._fail(repr(exc))
        return [(self._base + i // size, i % size) for i in range(len(triples))]

    def answer(self, ticket: tuple[int, int]) -> bool | None:
        """The helper's verdict for a ticket, or None if the helper failed (verify inline)."""
        seq, index = ticket
        if self._block_failed or self._conn is None or seq not in self._chunks:
            return None
        try:
            self._top_up(seq)
            while seq not in self._answers:
                self._receive()
        except (EOFError, OSError, ValueError) as exc:
            self._fail(repr(exc))
            return None
        return self._answers[seq][index] == 1

    def _receive(self) -> None:
        assert self._conn is not None
        if not self._conn.poll(_ANSWER_TIMEOUT_S):
            raise ValueError("helper did not answer in time")
        data = self._conn.recv_bytes()
        seq = int.from_bytes(data[:_SEQ], "big")
        if seq < self._base:
            return  # left unread by an earlier block
        if seq != self._expect:
            raise ValueError(f"answer {seq} out of order (expected {self._expect})")
        verdicts = data[_SEQ:]
        if len(verdicts) != len(self._chunks[seq]) or not set(verdicts) <= {0, 1}:
            raise ValueError(f"malformed answer for chunk {seq}")
        self._answers[seq] = verdicts
        self._expect += 1

    def _top_up(self, consuming: int) -> None:
        """Keep `window` chunks ahead of the one being consumed on the wire."""
        assert self._conn is not None
        while self._unsent and self._unsent[0] <= consuming + self.window:
            seq = self._unsent.popleft()
            payload = (seq, self._chunks[seq])
            self._conn.send_bytes(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))


if __name__ == "__main__":
    # Ctrl-C reaches the whole foreground group; the helper ends when its socket closes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker(Connection(int(sys.argv[1])))
