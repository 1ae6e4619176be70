"""Crash consistency: SIGKILL the app at random points of the block lifecycle, in a loop.

One real node (cometbft + app via `memledger start --no-api`). Each iteration arms a kill
point a block or two ahead (`--app-arg=--kill-at=POINT:HEIGHT`), lets the app die there
while memories and votes keep arriving over RPC, checks exactly what the crash left on
disk, restarts without the hook and checks that:

- the handshake replayed the lost block and the chain moves on;
- cometbft agrees with the app: the app hash the app reports for height L is the
  header app hash of block L+1;
- an independent reference app, replaying every block fetched from cometbft's RPC from
  the same genesis, reaches the header's app hash at every height (and the same codes);
- the projection equals a rebuild from the canonical state (`memledger projection
  rebuild` on the first and last iterations, the same code path in-process otherwise);
- every tx acknowledged as committed (broadcast_tx_commit, code 0) is still there.

MEMLEDGER_KILL_LOOPS (default 50) sets the iteration count, MEMLEDGER_KILL_SEED the seed.
"""

from __future__ import annotations

import base64
import calendar
import collections
import contextlib
import json
import os
import random
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from memledger.consensus.app import MemLedgerApp
from memledger.consensus.faults import KILL_POINTS
from memledger.consensus.store.state import CanonicalStore
from memledger.daemon import cometbft
from memledger.projection.writer import Projection
from memledger.protocol import records
from memledger.protocol.pb import abci_pb2 as pb
from memledger.sdk.rpc import RpcClient, RpcError
from memledger.sdk.txbuilder import TxBuilder
from memledger.sdk.waiting import WaitTimeout, wait_until
from tests.support.chain import seeded_key
from tests.support.node import NodeRunner, memledger

pytestmark = pytest.mark.cometbft

LOOPS = int(os.environ.get("MEMLEDGER_KILL_LOOPS", "50"))
SEED = int(os.environ.get("MEMLEDGER_KILL_SEED", str(random.SystemRandom().randrange(2**32))))
CHAIN = "memledger-kill"
LINGER_S = 2.0  # at most this long per iteration waiting for acknowledged load
#: what is durable once the app died at a point of height h: (LMDB height, receipt height)
DURABLE = {
    "after_finalize": (-1, -1), "before_flush": (-1, -1), "in_flush": (-1, -1),
    "after_flush": (-1, 0), "in_lmdb": (-1, 0), "after_lmdb": (0, 0),
}
assert set(DURABLE) == set(KILL_POINTS)


# ------------------------------------------------------------------ load while it runs
@dataclass
class Ack:
    tx_hash: str
    memory_id: str
    kind: str  # "submit" | "vote"
    height: int


@dataclass
class Submitter:
    """Submits a memory, then the validator's vote on it, over and over, via RPC.

    Only broadcast_tx_commit answers with code 0 count as acknowledged; anything cut off
    by a crash is unknown and not counted (it may or may not commit — both are fine).
    """

    rpc_url: str
    validator: TxBuilder
    agent: TxBuilder
    acked: list[Ack] = field(default_factory=list)
    attempts: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _nonces: dict[str, int] = field(default_factory=dict)

    def _nonce(self, who: str) -> int:
        value = max(time.time_ns(), self._nonces.get(who, 0) + 1)
        self._nonces[who] = value
        return value

    def _commit(self, tx: bytes) -> tuple[str, int] | None:
        try:
            with RpcClient(self.rpc_url, timeout=20) as rpc:
                result = rpc.broadcast_tx_commit(tx)
        except (httpx.HTTPError, RpcError, KeyError, ValueError):
            return None
        if result.code == 0 and result.height > 0 and (result.tx_result or {}).get(
                "code", 0) == 0:
            return result.hash.lower(), result.height
        return None

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            memory_id = f"kill-{SEED}-{i}"
            self.attempts += 1
            done = self._commit(self.agent.submit(self._nonce("agent"), memory_id,
                                                  f"written through crash loop, #{i}"))
            if done is None:
                time.sleep(0.1)
                continue
            with self.lock:
                self.acked.append(Ack(done[0], memory_id, "submit", done[1]))
            voted = self._commit(self.validator.vote(self._nonce("validator"), memory_id))
            if voted is not None:
                with self.lock:
                    self.acked.append(Ack(voted[0], memory_id, "vote", voted[1]))

    def snapshot(self) -> list[Ack]:
        with self.lock:
            return list(self.acked)


# ------------------------------------------------------------------ the reference
def header_time(text: str) -> pb.Timestamp:
    """RFC 3339 with up to nanoseconds (cometbft's header time) as a protobuf Timestamp."""
    main, _, frac = text.rstrip("Z").partition(".")
    seconds = calendar.timegm(time.strptime(main, "%Y-%m-%dT%H:%M:%S"))
    return pb.Timestamp(seconds=seconds, nanos=int((frac + "000000000")[:9]))


class Reference:
    """A fresh in-process app fed the node's blocks from RPC, checked block by block."""

    def __init__(self, home: Path, work: Path) -> None:
        self.halts: list[str] = []
        store = CanonicalStore(str(work / "state"))
        self.app = MemLedgerApp(store, Projection(f"sqlite:///{work / 'reference.db'}"),
                                on_halt=self._halt)
        genesis = cometbft.load_genesis(home / "cometbft")
        self.app.init_chain(pb.RequestInitChain(
            chain_id=genesis["chain_id"],
            initial_height=int(genesis.get("initial_height") or 1),
            app_state_bytes=json.dumps(genesis["app_state"]).encode()
            if genesis.get("app_state") is not None else b"",
            validators=[pb.ValidatorUpdate(
                pub_key=pb.PublicKey(ed25519=base64.b64decode(v["pub_key"]["value"])),
                power=int(v["power"])) for v in genesis["validators"]],
        ))
        self.height = 0
        self.replayed_txs = 0

    def _halt(self, message: str) -> None:
        self.halts.append(message)
        raise RuntimeError(f"reference app halted: {message}")

    def sync(self, rpc: RpcClient, upto: int) -> None:
        """Replay blocks height+1..upto; each app hash must equal header(h+1).app_hash."""
        if self.height >= upto:
            return
        block = rpc.block(self.height + 1)["block"]
        while self.height < upto:
            h = self.height + 1
            txs = [base64.b64decode(t) for t in block["data"]["txs"] or []]
            resp = self.app.finalize_block(pb.RequestFinalizeBlock(
                txs=txs, height=h, time=header_time(block["header"]["time"])))
            self.app.commit(pb.RequestCommit())
            results = rpc.block_results(h).get("txs_results") or []
            assert [int(r.get("code") or 0) for r in results] == \
                [r.code for r in resp.tx_results], f"tx codes differ at height {h}"
            following = rpc.block(h + 1)["block"]
            assert following["header"]["app_hash"].lower() == resp.app_hash.hex(), (
                f"app hash after height {h}: reference {resp.app_hash.hex()}, "
                f"header of {h + 1} {following['header']['app_hash']}")
            self.height, block = h, following
            self.replayed_txs += len(txs)

    def close(self) -> None:
        self.app.projection.close()
        self.app.store.close()


# ------------------------------------------------------------------ on-disk inspection
def durable_state(home: Path) -> tuple[int, int]:
    """(LMDB height, highest projection receipt) of a stopped node."""
    store = CanonicalStore(str(home / "data" / "state"), readonly=True)
    try:
        height = store.last_height
    finally:
        store.close()
    con = sqlite3.connect(f"file:{home / 'data' / 'projection.db'}?mode=ro", uri=True)
    try:
        row = con.execute("SELECT max(height) FROM receipts").fetchone()
    except sqlite3.OperationalError:
        row = None
    finally:
        con.close()
    return height, int(row[0]) if row and row[0] is not None else 0


def check_stopped_node(runner: NodeRunner, work: Path, acked: list[Ack], cli: bool) -> None:
    """Projection == rebuild from canonical state; every acknowledged tx is in both."""
    home = runner.home
    target = work / "rebuilt.db"
    target.unlink(missing_ok=True)
    if cli:
        out = memledger("projection", "rebuild", "--home", str(home), "--db-url",
                        f"sqlite:///{target}", "--json")
        assert json.loads(out.stdout)["records"] > 0
    else:  # the same steps as the CLI command, without a process start
        store = CanonicalStore(str(home / "data" / "state"), readonly=True)
        proj = Projection(f"sqlite:///{target}")
        try:
            proj.rebuild(store, store.last_height, store.last_app_hash)
        finally:
            proj.close()
            store.close()
    live = Projection(f"sqlite:///{home / 'data' / 'projection.db'}")
    rebuilt = Projection(f"sqlite:///{target}")
    store = CanonicalStore(str(home / "data" / "state"), readonly=True)
    try:
        live_dump = live.dump()
        assert live_dump == rebuilt.dump(), "projection differs from a rebuild"
        assert live.last_receipt() == (store.last_height, store.last_app_hash.hex())
        ids = {row[0]: row for row in live_dump["memories"]}
        for ack in acked:
            raw = store.get(records.memory_key(ack.memory_id))
            assert raw is not None and ack.memory_id in ids, f"acknowledged {ack} lost"
            if ack.kind == "vote":
                voter = runner_validator_hex(runner)
                assert voter in json.loads(raw)["votes"], f"acknowledged vote {ack} lost"
    finally:
        live.close()
        rebuilt.close()
        store.close()


def runner_validator_hex(runner: NodeRunner) -> str:
    return cometbft.validator_pubkey(runner.home / "cometbft").hex()


def app_log(runner: NodeRunner) -> str:
    return (runner.home / "logs" / "app.log").read_text(errors="replace")


# ------------------------------------------------------------------ the loop
@pytest.mark.timeout(900)  # ~6.5 min for 50 iterations on 2 vCPUs; a hang fails loudly
def test_kill_loop(tmp_path: Path, cometbft_bin: Path) -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    runner = NodeRunner(tmp_path / "home", chain_id=CHAIN)
    reference = Reference(runner.home, tmp_path)
    validator = TxBuilder(cometbft.validator_signing_key(runner.home / "cometbft"), CHAIN)
    submitter = Submitter(runner.rpc_url, validator, TxBuilder(seeded_key("kill-agent"), CHAIN))
    worker = threading.Thread(target=submitter.run, daemon=True)
    worker.start()
    points: collections.Counter[str] = collections.Counter()
    context = f"(MEMLEDGER_KILL_SEED={SEED})"
    try:
        for i in range(LOOPS):
            base, _ = durable_state(runner.home) if i else (0, 0)
            point = rng.choice(KILL_POINTS)
            height = base + rng.choice((1, 2))
            marker = f"fault injection: SIGKILL at {point} of height {height}"
            seen = app_log(runner).count(marker) if i else 0
            runner.start("--no-api", f"--app-arg=--kill-at={point}:{height}", wait=False)
            code = runner.wait_exit(timeout=90)
            assert code != 0 and "app exited with code -9" in runner.output[-2000:], (
                f"iteration {i}: {point}@{height} did not kill the app {context}\n"
                f"{runner.output[-2000:]}\n{runner.logs()}")
            assert app_log(runner).count(marker) == seen + 1, (i, point, height, context)
            points[point] += 1
            # Exactly what the crash point promises is on disk, nothing more, nothing less.
            lmdb_delta, receipt_delta = DURABLE[point]
            assert durable_state(runner.home) == (height + lmdb_delta, height + receipt_delta), (
                f"iteration {i}: after SIGKILL at {point} of {height} {context}")
            # Restart without the hook: the chain replays the lost block and moves on.
            acked_before = len(submitter.snapshot())
            runner.start("--no-api")
            with runner.rpc() as rpc:
                info = rpc.abci_info()["response"]
                last = int(info["last_block_height"])
                assert last >= height, (i, point, height, info, context)
                rpc.wait_for_height(last + 1, timeout=60)
                header = rpc.block(last + 1)["block"]["header"]["app_hash"]
                assert base64.b64decode(info["last_block_app_hash"]).hex() == header.lower(), (
                    f"iteration {i}: app hash at {last} disagrees with header {context}")
                reference.sync(rpc, rpc.latest_height() - 1)
            # Let some load through (a memory and its vote) before the next crash.
            with contextlib.suppress(WaitTimeout):
                wanted = acked_before + 2
                wait_until(lambda: len(submitter.snapshot()) >= wanted, LINGER_S,  # noqa: B023
                           0.05, what="two more acknowledged txs")
            assert runner.stop() == 0
            check_stopped_node(runner, tmp_path, submitter.snapshot(), cli=i in (0, LOOPS - 1))
        # Final sweep: cometbft still has every acknowledged tx, with code 0.
        submitter.stop.set()
        worker.join(30)
        acked = submitter.snapshot()
        runner.start("--no-api")
        with runner.rpc() as rpc:
            for ack in acked:
                found = rpc.tx(ack.tx_hash)
                assert int(found["height"]) == ack.height, ack
                assert int(found["tx_result"].get("code") or 0) == 0, ack
            reference.sync(rpc, rpc.latest_height() - 1)
        runner.stop()
        check_stopped_node(runner, tmp_path, acked, cli=False)
    finally:
        submitter.stop.set()
        runner.stop()
        reference.close()
    elapsed = time.monotonic() - started
    submits = sum(1 for a in acked if a.kind == "submit")
    print(f"\nkill loop: {LOOPS} iterations in {elapsed:.0f}s (seed {SEED}); kill points "
          f"{dict(sorted(points.items()))}; {len(acked)} acknowledged txs ({submits} memories) "
          f"of {submitter.attempts} submit attempts; reference replayed {reference.height} "
          f"blocks / {reference.replayed_txs} txs")
    assert submits > 0 and reference.height > LOOPS


def test_public_abci_query_cannot_kill_the_node(tmp_path: Path, cometbft_bin: Path) -> None:
    """Regression (fixed in 15a29d1): `abci_query path=/key` with empty data raised in
    LMDB, and the ABCI server answers any app exception with os._exit(70) — one
    unauthenticated RPC call took the node down."""
    runner = NodeRunner(tmp_path / "home", chain_id=CHAIN)
    runner.start("--no-api")
    try:
        with runner.rpc() as rpc:
            for path, data in (("/key", b""), ("/key", b"k" * 600), ("/account", b"\xff"),
                               ("/nope", b"")):
                try:
                    answer = rpc.abci_query(path, data)
                except (httpx.HTTPError, RpcError) as exc:
                    pytest.fail(f"abci_query {path} {data[:8]!r} broke the node: {exc!r}")
                assert answer.code != 0, (path, answer)
            time.sleep(1.0)
            assert runner.proc is not None and runner.proc.poll() is None, \
                "the node died after one abci_query"
            height = rpc.latest_height()
            rpc.wait_for_height(height + 1, timeout=20)
    finally:
        runner.stop()
