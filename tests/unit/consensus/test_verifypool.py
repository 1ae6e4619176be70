"""Signatures checked on the helper process give exactly the inline outcomes.

The helper is a real second interpreter (memledger.consensus.gate.verifypool); these tests compare
whole
blocks — tx codes and app hashes — between a chain verifying inline and one using the
helper, including forged signatures, undecodable txs, duplicates, answers left unread
by an earlier block, and a helper killed in the middle of a block.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from memledger.consensus.gate.verifypool import VerifyPool
from memledger.protocol.codes import Code
from memledger.protocol.pb import tx_pb2
from tests.support.chain import LocalChain, seeded_key

AGENTS = [seeded_key(f"pool-agent-{i}") for i in range(8)]


def _wait_usable(chain: LocalChain) -> None:
    pool = chain.app.verifier._pool
    assert pool is not None
    assert pool.wait_usable(30), "helper never became ready"


def _forge(raw: bytes) -> bytes:
    env = tx_pb2.Tx()
    env.ParseFromString(raw)
    env.signature = bytes([env.signature[0] ^ 1]) + env.signature[1:]
    return env.SerializeToString(deterministic=True)


def _blocks(chain: LocalChain) -> list[list[bytes]]:
    """Three blocks: mixed outcomes, a tail of never-verified txs, then clean submits."""
    nonces = dict.fromkeys(range(len(AGENTS)), 0)

    def submit(i: int, chain_id: str | None = None) -> bytes:
        a = i % len(AGENTS)
        nonces[a] += 1
        builder = chain.builder(AGENTS[a])
        if chain_id is not None:
            builder.chain_id = chain_id
        return builder.submit(nonces[a], f"pool-{i}", f"memory {i}", tags=["pool"])

    first = [submit(i) for i in range(300)]
    first[7] = _forge(first[7])
    first[150] = b"\x0a\x05ab"  # truncated: not a Tx
    first.insert(40, first[39])  # duplicate: second copy replays the nonce
    # Signed for another chain: rejected before the signature is needed, so their
    # helper answers are never read in this block.
    second = [submit(1000 + i) for i in range(150)] + [
        submit(2000 + i, chain_id="other-chain") for i in range(200)]
    third = [submit(3000 + i) for i in range(260)]
    third[-1] = _forge(third[-1])
    return [first, second, third]


def _kill_helper_during_next_block(chain: LocalChain) -> None:
    """SIGKILL the helper when the block asks for its third chunk (once)."""
    pool = chain.app.verifier._pool
    assert pool is not None and pool._process is not None
    original, victim = pool.answer, pool._process

    def answer_then_kill(ticket: tuple[int, int]) -> bool | None:
        if ticket[0] == pool._base + 2 and victim.poll() is None:
            victim.kill()  # once: the restarted helper is left alone
            victim.wait()
        return original(ticket)

    pool.answer = answer_then_kill  # type: ignore[method-assign]


def _run(tmp: Path, helper: bool, kill_after: int | None = None,
         failures: int = 0) -> list[tuple[list[int], bytes]]:
    chain = LocalChain(tmp, verify_helper=helper)
    try:
        if helper:
            _wait_usable(chain)
        blocks = _blocks(chain)
        out = []
        for n, txs in enumerate(blocks):
            if kill_after is not None and n == kill_after:
                _kill_helper_during_next_block(chain)
            results = chain.block(txs)
            out.append(([r.code for r in results], chain.app_hashes[chain.height]))
        if helper:
            pool = chain.app.verifier._pool
            assert pool is not None
            assert chain.app.verifier.prefetched > 0
            assert pool.failures == failures  # 0: stale answers skipped, never a fallback
        return out
    finally:
        chain.close()


def test_helper_outcomes_equal_inline(tmp_path: Path) -> None:
    inline = _run(tmp_path / "inline", helper=False)
    pooled = _run(tmp_path / "pooled", helper=True)
    assert pooled == inline
    codes = inline[0][0]
    assert codes[7] == Code.BAD_SIGNATURE
    assert codes[151] == Code.TX_DECODE
    assert codes[40] == Code.NONCE_REPLAYED
    assert inline[1][0][-1] == Code.WRONG_CHAIN_ID
    assert inline[2][0][-1] == Code.BAD_SIGNATURE
    assert sum(1 for c in inline[2][0] if c == Code.OK) == 259


def test_helper_killed_mid_block_falls_back_inline(tmp_path: Path) -> None:
    inline = _run(tmp_path / "inline", helper=False)
    killed = _run(tmp_path / "killed", helper=True, kill_after=0, failures=1)
    assert killed == inline


def test_small_blocks_stay_inline(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path, verify_helper=True)
    try:
        _wait_usable(chain)
        key = AGENTS[0]
        txs = [chain.builder(key).submit(n + 1, f"small-{n}", "x") for n in range(10)]
        assert all(r.code == Code.OK for r in chain.block(txs))
        assert chain.app.verifier.prefetched == 0
    finally:
        chain.close()


#: A stand-in helper process: says ready like the real one, answers the first chunk with
#: the bytes given (hex) on the real socket, then waits for the pool to hang up.
_GARBAGE_HELPER = """
import sys
from multiprocessing.connection import Connection

conn = Connection(int(sys.argv[1]))
conn.send_bytes(b"ready")
conn.recv_bytes()
conn.send_bytes(bytes.fromhex(sys.argv[2]))
try:
    while conn.recv_bytes():
        pass
except (EOFError, OSError):
    pass
"""


def _start_garbage_helper(pool: VerifyPool, garbage: bytes) -> None:
    """Replace the pool's helper by one whose first answer is ``garbage`` (the restart
    after the failure gets a real helper again)."""
    pool.close()
    parent, child = socket.socketpair()
    fd = child.fileno()
    pool._process = subprocess.Popen(
        [sys.executable, "-c", _GARBAGE_HELPER, str(fd), garbage.hex()], pass_fds=(fd,),
        stdin=subprocess.DEVNULL, close_fds=True)
    child.close()
    pool._conn, pool._ready = Connection(parent.detach()), False
    assert pool.wait_usable(30), "stand-in helper never became ready"


@pytest.mark.parametrize(("case", "why"), [
    ("short", "malformed answer"),        # this chunk's number, one verdict for 64 txs
    ("not-a-verdict", "malformed answer"),  # 64 bytes, but not 0/1
    ("out-of-order", "out of order"),     # a chunk number never sent
])
def test_malformed_helper_answer_is_not_trusted(tmp_path: Path, case: str, why: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """A reply that is not a well-formed verdict makes the block verify inline."""
    chain = LocalChain(tmp_path, verify_helper=True)
    try:
        _wait_usable(chain)
        pool = chain.app.verifier._pool
        assert pool is not None
        seq = pool._next_seq.to_bytes(8, "big")  # the first chunk of the next block
        garbage = {"short": seq + b"\x01", "not-a-verdict": seq + b"\x02" * pool.chunk_size,
                   "out-of-order": b"\xff" * 8 + b"\x01" * pool.chunk_size}[case]
        _start_garbage_helper(pool, garbage)
        key = AGENTS[1]
        txs = [chain.builder(key).submit(n + 1, f"m-{n}", "y") for n in range(200)]
        txs[0] = _forge(txs[0])
        with caplog.at_level(logging.WARNING, logger="memledger.verifypool"):
            codes = [r.code for r in chain.block(txs)]
        assert codes[0] == Code.BAD_SIGNATURE
        assert all(c == Code.OK for c in codes[1:])
        # The garbage was read and refused (not merely a dead helper), once.
        assert pool.failures == 1
        assert why in caplog.text, caplog.text
        # The pool restarted a real helper, which serves the next block.
        assert pool.wait_usable(30)
        more = [chain.builder(key).submit(n + 201, f"n-{n}", "z") for n in range(200)]
        assert all(r.code == Code.OK for r in chain.block(more))
        assert pool.failures == 1
    finally:
        chain.close()
