"""Snapshots and restore (memledger/consensus/store/snapshots.py,
memledger/consensus/store/statesync.py) on the in-process chain."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from memledger import durable
from memledger.consensus.app import MemLedgerApp
from memledger.consensus.store.snapshots import (
    SnapshotError,
    SnapshotInfo,
    SnapshotStore,
    SnapshotTaker,
    decode_chunk,
    encode_chunks,
)
from memledger.consensus.store.state import CanonicalStore
from memledger.daemon.appproc import catch_up_projection
from memledger.projection.writer import Projection
from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from tests.support.chain import LocalChain
from tests.support.workload import blocks

Offer = pb.ResponseOfferSnapshot
Apply = pb.ResponseApplySnapshotChunk
CHUNK = 2048  # small chunks, so a few hundred records span many of them


def source_chain(home: Path, seed: int = 5, count: int = 12, version: int = 3) -> LocalChain:
    chain = LocalChain(home / "src", app_state={"app_version": version})
    for txs in blocks(chain, seed, count):
        chain.block(txs)
    return chain


def snapshot_of(chain: LocalChain, root: Path) -> tuple[SnapshotStore, SnapshotInfo]:
    store = SnapshotStore(root, chunk_bytes=CHUNK)
    with chain.app.store.snapshot() as view:
        info = store.write(view)
    return store, info


class Target:
    """A fresh node: empty store and projection, driven through the ABCI methods."""

    def __init__(self, home: Path, background: bool = True, db_url: str | None = None) -> None:
        home.mkdir(parents=True, exist_ok=True)  # an existing home: the node restarted
        self.store = CanonicalStore(str(home / "state"))
        self.projection = Projection(db_url or f"sqlite:///{home / 'p.db'}")
        self.app = MemLedgerApp(self.store, self.projection)
        self.app.statesync.background_rebuild = background

    def offer(self, info: SnapshotInfo, app_hash: bytes, *, fmt: int | None = None,
              metadata: bytes | None = None) -> int:
        snap = pb.Snapshot(height=info.height, format=info.format if fmt is None else fmt,
                           chunks=info.chunks, hash=info.hash,
                           metadata=info.metadata() if metadata is None else metadata)
        return self.app.offer_snapshot(pb.RequestOfferSnapshot(snapshot=snap,
                                                               app_hash=app_hash)).result

    def apply(self, index: int, chunk: bytes, sender: str = "peer-a"
              ) -> pb.ResponseApplySnapshotChunk:
        return self.app.apply_snapshot_chunk(pb.RequestApplySnapshotChunk(
            index=index, chunk=chunk, sender=sender))

    def restore(self, store: SnapshotStore, info: SnapshotInfo) -> list[int]:
        return [self.apply(i, store.load_chunk(info.height, info.format, i)).result
                for i in range(info.chunks)]

    def records(self) -> list[tuple[bytes, bytes]]:
        return list(self.store.iter_prefix(b""))

    def assert_empty(self) -> None:
        assert self.records() == [] and self.store.last_height == 0

    def close(self) -> None:
        self.app.statesync.close()
        self.app.verifier.close()
        self.projection.close()
        self.store.close()


def assert_projection_like(target: Target, chain: LocalChain) -> None:
    """The target serves the source's projection, with the receipt of its last commit."""
    assert target.projection.dump() == chain.app.projection.dump()
    assert target.projection.last_receipt() == (chain.height,
                                                chain.app.store.last_app_hash.hex())


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_chunk_codec_round_trip_and_rejects_truncation() -> None:
    items = [(b"a", b""), (b"b" * 300, b"v" * 5000), (b"c", b"x")]
    chunks = list(encode_chunks(items, chunk_bytes=1000))
    assert len(chunks) == 3  # the large record gets its own chunk
    assert [r for c in chunks for r in decode_chunk(c)] == items
    assert list(encode_chunks([])) == [b""]
    for bad in (chunks[1][:-1], b"\x05ab", b"\xff\xff\xff\xff\xff\x01"):
        with pytest.raises(SnapshotError):
            decode_chunk(bad)


@pytest.mark.parametrize("background, version", [(True, 3), (False, 3), (True, 6)],
                         ids=["child-process", "in-process", "hash-layout-2"])
def test_round_trip_gives_identical_state_app_hash_and_projection(
        tmp_path: Path, background: bool, version: int) -> None:
    chain = source_chain(tmp_path, version=version)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    assert info.chunks > 3 and info.height == chain.height
    target = Target(tmp_path / "dst", background)
    assert target.offer(info, chain.app.store.last_app_hash) == Offer.ACCEPT
    assert target.restore(store, info) == [Apply.ACCEPT] * info.chunks
    assert target.records() == list(chain.app.store.iter_prefix(b""))
    assert target.store.last_app_hash == chain.app.store.last_app_hash
    target.store.check_integrity()
    info_resp = target.app.info(pb.RequestInfo())
    assert (info_resp.last_block_height, info_resp.app_version) == (chain.height, version)
    assert info_resp.last_block_app_hash == chain.app.store.last_app_hash
    assert target.projection.dump() == chain.app.projection.dump()
    # The restored node executes the next block exactly like the source.
    nxt = blocks(chain, 99, 1)[0]
    expected = chain.finalize(nxt)
    got = target.app.finalize_block(pb.RequestFinalizeBlock(
        txs=nxt, height=chain.height + 1, time=pb.Timestamp(seconds=1_780_000_000 +
                                                             chain.height + 1)))
    assert got.app_hash == expected.app_hash
    assert [r.code for r in got.tx_results] == [r.code for r in expected.tx_results]
    target.close()
    chain.close()


def test_a_tx_checked_before_the_restore_is_judged_again_under_the_chain_id(
        tmp_path: Path) -> None:
    """Before a snapshot is restored the node has no chain id: a tx signed for chain ""
    passes CheckTx then. The block must still refuse it as the other nodes do (it was
    remembered as decoded, and accepted: this node's app hash forked off)."""
    from memledger.devtools.chain import seeded_key
    from memledger.sdk.txbuilder import TxBuilder

    chain = source_chain(tmp_path, count=3)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    target = Target(tmp_path / "dst", background=False)
    unnamed = TxBuilder(seeded_key("no-chain"), "").submit(1, "no-chain-id", "for chain ''")
    assert target.app.check_tx(pb.RequestCheckTx(tx=unnamed)).code == 0  # while syncing
    assert target.offer(info, chain.app.store.last_app_hash) == Offer.ACCEPT
    assert target.restore(store, info) == [Apply.ACCEPT] * info.chunks
    assert target.app.check_tx(pb.RequestCheckTx(
        tx=unnamed, type=pb.CheckTxType.RECHECK)).code == Code.WRONG_CHAIN_ID
    height = chain.height + 1
    request = pb.RequestFinalizeBlock(txs=[unnamed], height=height,
                                      time=pb.Timestamp(seconds=1_780_000_000 + height))
    honest, synced = chain.app.finalize_block(request), target.app.finalize_block(request)
    assert [r.code for r in synced.tx_results] == [r.code for r in honest.tx_results] == \
        [Code.WRONG_CHAIN_ID]
    assert synced.app_hash == honest.app_hash
    target.close()
    chain.close()


@pytest.mark.postgres
def test_a_postgres_projection_is_built_beside_the_restore_and_rolled_back_on_rejection(
        tmp_path: Path, fresh_postgres_url: str) -> None:
    chain = source_chain(tmp_path)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    target = Target(tmp_path / "dst", db_url=fresh_postgres_url)
    forged = SnapshotInfo(info.height, info.format, info.chunk_hashes, info.records,
                          bytes(31) + b"\x01")
    assert target.offer(forged, forged.app_hash) == Offer.ACCEPT
    assert target.app.statesync.rebuild_pid is not None
    assert target.restore(store, info)[-1] == Apply.REJECT_SNAPSHOT
    assert not any(target.projection.dump().values())  # the child's rows rolled back
    assert target.offer(info, info.app_hash) == Offer.ACCEPT
    assert target.restore(store, info) == [Apply.ACCEPT] * info.chunks
    assert_projection_like(target, chain)
    target.close()
    chain.close()


def test_same_state_gives_the_same_snapshot_bytes_on_every_node(tmp_path: Path) -> None:
    a, b = source_chain(tmp_path / "a"), source_chain(tmp_path / "b")
    (_, ia), (_, ib) = snapshot_of(a, tmp_path / "sa"), snapshot_of(b, tmp_path / "sb")
    assert ia.hash == ib.hash and ia.metadata() == ib.metadata()
    a.close()
    b.close()


def test_offer_refuses_wrong_format_metadata_and_untrusted_app_hash(tmp_path: Path) -> None:
    chain = source_chain(tmp_path)
    _, info = snapshot_of(chain, tmp_path / "snaps")
    trusted = chain.app.store.last_app_hash
    target = Target(tmp_path / "dst")
    assert target.offer(info, trusted, fmt=2) == Offer.REJECT_FORMAT
    assert target.offer(info, trusted, metadata=b"{not json") == Offer.REJECT
    spaced = json.dumps(json.loads(info.metadata())).encode()  # not canonical
    assert target.offer(info, trusted, metadata=spaced) == Offer.REJECT
    assert target.offer(info, bytes(32)) == Offer.REJECT  # not the trusted app hash
    # Deeply nested JSON (10 kB): a RecursionError escaped and the app exited.
    deep = b"[" * 5000 + b"]" * 5000
    assert target.offer(info, trusted, metadata=deep) == Offer.REJECT
    inner = b'{"app_hash":"' + trusted.hex().encode() + b'","chunk_hashes":' + deep + b"}"
    assert target.offer(info, trusted, metadata=inner) == Offer.REJECT
    target.assert_empty()
    target.close()
    chain.close()


def test_bad_chunks_are_refetched_or_condemn_the_snapshot(tmp_path: Path) -> None:
    chain = source_chain(tmp_path)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    other_chain = source_chain(tmp_path / "other", seed=6)
    other, other_info = snapshot_of(other_chain, tmp_path / "osnaps")
    trusted = chain.app.store.last_app_hash
    target = Target(tmp_path / "dst")
    assert target.offer(info, trusted) == Offer.ACCEPT
    good = [store.load_chunk(info.height, 1, i) for i in range(info.chunks)]
    assert target.apply(0, good[0]).result == Apply.ACCEPT
    # Corrupted: refetch from someone else, and stop asking that sender.
    corrupted = bytes([good[1][0] ^ 1]) + good[1][1:]
    resp = target.apply(1, corrupted, sender="evil")
    assert (resp.result, list(resp.refetch_chunks), list(resp.reject_senders)) == \
        (Apply.RETRY, [1], ["evil"])
    # A chunk of another snapshot at the same index: same treatment.
    foreign = other.load_chunk(other_info.height, 1, 1)
    assert foreign != good[1]
    assert target.apply(1, foreign, sender="confused").result == Apply.RETRY
    # Missing (empty) chunk: retry.
    assert target.apply(1, b"", sender="lazy").result == Apply.RETRY
    # A skipped chunk: CometBFT must restart this snapshot.
    assert target.apply(3, good[3]).result == Apply.RETRY_SNAPSHOT
    # The honest peer delivers the rest; the restore completes.
    assert [target.apply(i, good[i], sender="honest").result
            for i in range(1, info.chunks)] == [Apply.ACCEPT] * (info.chunks - 1)
    assert target.store.last_app_hash == trusted
    for c in (target, ):
        c.close()
    chain.close()
    other_chain.close()


def test_state_that_does_not_hash_to_the_trusted_app_hash_leaves_nothing(
    tmp_path: Path,
) -> None:
    chain = source_chain(tmp_path)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    forged_hash = bytes(31) + b"\x01"
    lying = SnapshotInfo(info.height, info.format, info.chunk_hashes, info.records,
                         forged_hash)
    target = Target(tmp_path / "dst")
    assert target.offer(lying, forged_hash) == Offer.ACCEPT
    child = target.app.statesync.rebuild_pid
    assert child is not None
    results = [target.apply(i, store.load_chunk(info.height, 1, i), sender=f"p{i % 2}")
               for i in range(info.chunks)]
    assert [r.result for r in results[:-1]] == [Apply.ACCEPT] * (info.chunks - 1)
    assert results[-1].result == Apply.REJECT_SNAPSHOT
    assert sorted(results[-1].reject_senders) == ["p0", "p1"]
    target.assert_empty()
    assert target.projection.last_receipt() is None
    assert not any(target.projection.dump().values())  # the child's rows rolled back
    assert not _alive(child)
    # A lying record count is refused the same way.
    short = SnapshotInfo(info.height, info.format, info.chunk_hashes, info.records + 1,
                         info.app_hash)
    assert target.offer(short, info.app_hash) == Offer.ACCEPT
    assert target.restore(store, info)[-1] == Apply.REJECT_SNAPSHOT
    target.assert_empty()
    # And the honest snapshot still restores afterwards.
    assert target.offer(info, info.app_hash) == Offer.ACCEPT
    assert target.restore(store, info)[-1] == Apply.ACCEPT
    assert target.store.last_app_hash == info.app_hash
    target.close()
    chain.close()


@pytest.mark.parametrize("made_up", [
    [(b"mem/" + b"x" * 596, b"{}")],  # a key the store cannot hold (600 bytes)
    [(b"sys/app_version", b"not json")],  # read before the app hash is checked
    [(b"sys/app_version", b'{"name": "no version"}')],
    [(b"sys/app_version", b'{"version": "7"}')],
    [(b"sys/app_version", b"[" * 5000 + b"]" * 5000)],  # RecursionError escaped
    [(b"sys/app_version", b'{"version": ' + b"[" * 5000 + b"]" * 5000 + b"}")],
], ids=["long-key", "not-json", "no-version", "version-str", "deep", "deep-version"])
def test_a_peer_s_made_up_snapshot_is_rejected_not_a_crash(
        tmp_path: Path, made_up: list[tuple[bytes, bytes]]) -> None:
    """Anyone can offer a snapshot that names the trusted app hash (it is public, in the
    next header) with chunks of its own making: each must end in REJECT_SNAPSHOT with
    the sender named. Before, these raised, and the node exited as on an app bug, again
    at every offer of the same snapshot."""
    import hashlib

    from memledger.consensus.store.snapshots import FORMAT

    chain = source_chain(tmp_path, count=3)
    trusted = chain.app.store.last_app_hash
    chunks = list(encode_chunks(made_up))
    info = SnapshotInfo(chain.height, FORMAT, tuple(hashlib.sha256(c).digest() for c in chunks),
                        len(made_up), trusted)
    target = Target(tmp_path / "dst", background=False)
    assert target.offer(info, trusted) == Offer.ACCEPT
    answer = target.apply(0, chunks[0], sender="made-up")
    assert answer.result == Apply.REJECT_SNAPSHOT and list(answer.reject_senders) == ["made-up"]
    target.assert_empty()
    target.close()
    chain.close()


def test_a_restore_interrupted_by_a_crash_rolls_back_at_open(tmp_path: Path) -> None:
    chain = source_chain(tmp_path)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    target = Target(tmp_path / "dst")
    assert target.offer(info, info.app_hash) == Offer.ACCEPT
    assert target.apply(0, store.load_chunk(info.height, 1, 0)).result == Apply.ACCEPT
    assert target.records()
    target.close()
    reopened = CanonicalStore(str(tmp_path / "dst" / "state"))
    assert list(reopened.iter_prefix(b"")) == [] and reopened.last_height == 0
    reopened.close()
    chain.close()


def test_a_dead_rebuild_process_falls_back_to_rebuilding_in_process(tmp_path: Path) -> None:
    chain = source_chain(tmp_path)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    target = Target(tmp_path / "dst")
    assert target.offer(info, info.app_hash) == Offer.ACCEPT
    child = target.app.statesync.rebuild_pid
    assert child is not None
    assert target.apply(0, store.load_chunk(info.height, 1, 0)).result == Apply.ACCEPT
    os.kill(child, signal.SIGKILL)
    assert target.restore(store, info)[-1] == Apply.ACCEPT
    assert_projection_like(target, chain)
    target.close()
    chain.close()


def test_a_crash_before_the_projection_rebuild_is_repaired_at_start(tmp_path: Path) -> None:
    """Canonical state restored and verified, then the node dies before its projection is
    rebuilt: the next start rebuilds it instead of serving an empty projection."""
    chain = source_chain(tmp_path)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    target = Target(tmp_path / "dst", background=False)
    target.projection.rebuild = lambda *a, **k: 0  # type: ignore[method-assign]
    assert target.offer(info, info.app_hash) == Offer.ACCEPT
    assert target.restore(store, info)[-1] == Apply.ACCEPT
    target.close()
    state = CanonicalStore(str(tmp_path / "dst" / "state"))
    projection = Projection(f"sqlite:///{tmp_path / 'dst' / 'p.db'}")
    assert projection.last_receipt() is None and state.last_height == chain.height
    assert catch_up_projection(state, projection) is True
    assert projection.dump() == chain.app.projection.dump()
    assert projection.last_receipt() == (chain.height, chain.app.store.last_app_hash.hex())
    assert catch_up_projection(state, projection) is False  # up to date: left alone
    projection.close()
    state.close()
    chain.close()


def _next_block(chain: LocalChain, target: Target) -> None:
    """One block on the source, and the same block finalized and committed on the target."""
    txs = blocks(chain, 77, 1)[0]
    height = chain.height + 1
    expected = chain.finalize(txs)
    got = target.app.finalize_block(pb.RequestFinalizeBlock(
        txs=txs, height=height, time=pb.Timestamp(seconds=1_780_000_000 + height)))
    assert got.app_hash == expected.app_hash
    target.app.commit(pb.RequestCommit())


class _Stopped(Exception):
    """The node stops here (a SIGKILL in the real hook)."""


def _stop_after_restore(point: str, height: int) -> None:
    if point == "after_restore":
        raise _Stopped(f"{point} {height}")


@pytest.mark.parametrize("stop", ["after-projection", "before-projection"])
def test_a_node_stopped_before_cometbft_saved_its_state_restores_again(
        tmp_path: Path, stop: str) -> None:
    """CometBFT saves its state only after the last ApplySnapshotChunk is answered (and
    the projection is built inside that call): a node stopped in between has no CometBFT
    state, so it state-syncs again at its next start. The store already held the
    restored height and answered every offer ABORT: the node never synced again."""
    chain = source_chain(tmp_path)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    target = Target(tmp_path / "dst", background=False)
    assert target.offer(info, info.app_hash) == Offer.ACCEPT
    if stop == "before-projection":
        target.app.statesync.checkpoint = _stop_after_restore
        with pytest.raises(_Stopped):
            target.restore(store, info)
        assert target.projection.last_receipt() is None
    else:
        assert target.restore(store, info) == [Apply.ACCEPT] * info.chunks
    target.close()

    target = Target(tmp_path / "dst", background=False)  # the restart
    assert target.store.last_height == chain.height
    # Info still reports the restored height: a CometBFT that did save its state at it
    # handshakes against Info (one with none state-syncs without asking Info).
    assert target.app.info(pb.RequestInfo()).last_block_height == chain.height
    # An offer it refuses leaves the restored state alone.
    assert target.offer(info, bytes(32)) == Offer.REJECT
    assert target.store.last_app_hash == info.app_hash
    # CometBFT state-syncs again: the unconfirmed restore is replaced.
    assert target.offer(info, info.app_hash) == Offer.ACCEPT
    assert target.store.last_height == 0
    assert target.restore(store, info) == [Apply.ACCEPT] * info.chunks
    assert target.records() == list(chain.app.store.iter_prefix(b""))
    target.store.check_integrity()
    assert_projection_like(target, chain)
    target.close()
    chain.close()


def test_the_first_block_on_a_restore_confirms_it_and_offers_abort_again(
        tmp_path: Path) -> None:
    """A block at the restored height + 1 proves CometBFT saved its state: from then on
    the node has state of its own, and an offer is aborted (the state kept), also after
    a restart."""
    chain = source_chain(tmp_path)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    target = Target(tmp_path / "dst", background=False)
    assert target.offer(info, info.app_hash) == Offer.ACCEPT
    assert target.restore(store, info) == [Apply.ACCEPT] * info.chunks
    assert target.store.restore_unconfirmed
    _next_block(chain, target)
    assert not target.store.restore_unconfirmed
    assert target.offer(info, info.app_hash) == Offer.ABORT
    target.close()
    target = Target(tmp_path / "dst", background=False)
    assert not target.store.restore_unconfirmed
    assert target.offer(info, info.app_hash) == Offer.ABORT
    assert target.store.last_height == chain.height + 1 == info.height + 1
    target.close()
    chain.close()


def test_offer_to_a_node_with_state_aborts_and_keeps_it(tmp_path: Path) -> None:
    chain = source_chain(tmp_path)
    _, info = snapshot_of(chain, tmp_path / "snaps")
    app = chain.app
    resp = app.offer_snapshot(pb.RequestOfferSnapshot(snapshot=pb.Snapshot(
        height=info.height, format=1, chunks=info.chunks, hash=info.hash,
        metadata=info.metadata()), app_hash=info.app_hash))
    assert resp.result == Offer.ABORT
    assert app.store.last_height == chain.height
    chain.close()


def test_taker_snapshots_every_interval_keeps_the_last_k_and_serves_them(
    tmp_path: Path,
) -> None:
    chain = source_chain(tmp_path, count=2)
    snaps = SnapshotStore(tmp_path / "snaps", keep=2, chunk_bytes=CHUNK)
    chain.app.snapshot_taker = SnapshotTaker(chain.app.store, snaps, interval=3)
    chain.app.statesync.snapshots = snaps
    for txs in blocks(chain, 8, 10):
        chain.block(txs)
        chain.app.snapshot_taker.wait(30)
    heights = [s.height for s in snaps.list()]
    assert heights == [9, 12]
    listed = chain.app.list_snapshots(pb.RequestListSnapshots()).snapshots
    assert [s.height for s in listed] == heights
    last = listed[-1]
    chunk = chain.app.load_snapshot_chunk(pb.RequestLoadSnapshotChunk(
        height=last.height, format=last.format, chunk=0)).chunk
    assert chunk and SnapshotInfo.parse(last.height, last.format, last.chunks,
                                        last.metadata).chunk_hashes[0] is not None
    assert chain.app.load_snapshot_chunk(pb.RequestLoadSnapshotChunk(
        height=last.height, format=1, chunk=10_000)).chunk == b""
    chain.close()


@pytest.mark.parametrize("damaged", [
    b'{"chunk_hashes": 5}',  # TypeError escaped list(), and ListSnapshots with it
    b"[1]",
    b"[" * 5000 + b"]" * 5000,
    b"not json",
], ids=["count-not-list", "not-object", "deep", "not-json"])
def test_a_damaged_local_snapshot_is_skipped_when_listing(tmp_path: Path,
                                                          damaged: bytes) -> None:
    chain = source_chain(tmp_path, count=3)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    bad = tmp_path / "snaps" / str(info.height + 1)
    bad.mkdir()
    (bad / "metadata.json").write_bytes(damaged)
    assert [s.height for s in store.list()] == [info.height]
    chain.app.statesync.snapshots = store
    listed = chain.app.list_snapshots(pb.RequestListSnapshots()).snapshots
    assert [s.height for s in listed] == [info.height]
    chain.close()


def test_a_snapshot_write_that_fails_part_way_leaves_no_tmp_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full disk after the first chunk: the write raises (the taker logs it and the
    node goes on), and its partial <height>.tmp is gone, not left until a restart."""
    import errno

    from memledger.consensus.store import snapshots

    chain = source_chain(tmp_path, count=4)
    root = tmp_path / "snaps"
    store = SnapshotStore(root, chunk_bytes=CHUNK)
    real = durable.write_synced

    def disk_full(path: Path, data: bytes) -> None:
        if path.name != "0":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(snapshots, "write_synced", disk_full)
    with chain.app.store.snapshot() as view, pytest.raises(OSError, match="No space"):
        store.write(view)
    assert list(root.iterdir()) == [] and store.list() == []
    monkeypatch.setattr(snapshots, "write_synced", real)
    with chain.app.store.snapshot() as view:
        info = store.write(view)  # the disk has room again: it works
    assert [p.name for p in root.iterdir()] == [str(info.height)]
    chain.close()


def test_a_snapshot_is_on_disk_before_it_is_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every chunk, the metadata and the directory entries are fsynced before the
    rename that lists the snapshot, so a power cut never leaves a listed, torn one."""
    chain = source_chain(tmp_path, count=4)
    root = tmp_path / "snaps"
    store = SnapshotStore(root, chunk_bytes=CHUNK)
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: object, dst: object) -> None:
        events.append(("replace", str(dst)))
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    with chain.app.store.snapshot() as view:
        info = store.write(view)
    final = root / str(info.height)
    tmp = f"{final}.tmp"
    renamed = events.index(("replace", str(final)))
    synced_before = {path for kind, path in events[:renamed] if kind == "fsync"}
    expected = {f"{tmp}/{i}" for i in range(info.chunks)} | {f"{tmp}/metadata.json", tmp}
    assert info.chunks > 1 and expected <= synced_before
    assert ("fsync", str(root)) in events[renamed:]
    chain.close()
