"""The ABCI application: method dispatch and the block lifecycle (DESIGN §6).

FinalizeBlock executes every tx against one uncommitted overlay. Commit makes it durable
in a fixed order — the commit sink (the node's SQL projection, with its receipt; the
app sees it only as `store.sinks.CommitSink`), then LMDB — and halts the process rather
than answer a Commit it could not make durable.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

import lmdb

from memledger.consensus import versions
from memledger.consensus.block import genesis, lifecycle
from memledger.consensus.block.committed import CommittedView, RecordingView
from memledger.consensus.block.execute import TxOutcome, process_tx, recheck_nonce
from memledger.consensus.block.proposal import order_by_nonce
from memledger.consensus.families.accounts import nonces
from memledger.consensus.families.context import BlockInfo, TxBuffer
from memledger.consensus.faults import FaultPlan, halt
from memledger.consensus.gate.pending import PendingNonces
from memledger.consensus.gate.recheck import RecheckMemo
from memledger.consensus.gate.sigverify import SignatureVerifier
from memledger.consensus.gate.txcache import DecodedTxCache
from memledger.consensus.gate.verifypool import VerifyPool
from memledger.consensus.query import BACKLOG_PATH, QueryService, answer
from memledger.consensus.retain import retain_height
from memledger.consensus.store.sinks import CommitSink
from memledger.consensus.store.snapshots import SnapshotStore, SnapshotTaker
from memledger.consensus.store.state import BlockOverlay, CanonicalStore
from memledger.consensus.store.statesync import StateSync
from memledger.consensus.versions import INITIAL_APP_VERSION, SUPPORTED_APP_VERSIONS
from memledger.consensus.wire.interface import BaseApplication
from memledger.consensus.wire.phases import PHASES_PATH, PhaseCpu
from memledger.protocol import records
from memledger.protocol.codes import CODESPACE, QueryCode
from memledger.protocol.pb import abci_pb2 as pb

log = logging.getLogger("memledger.abci")

APP_NAME = "memledger"
SOFTWARE_VERSION = "0.1.0"
#: store meta (outside the app hash): the last committed block's time, for CheckTx
LAST_BLOCK_TIME_META = "last_block_time_ns"


@dataclass
class _PendingBlock:
    height: int
    overlay: BlockOverlay
    app_hash: bytes
    app_version: int
    time_ns: int


#: the commit sink's type: callers that passed a projection read it back as one
SinkT = TypeVar("SinkT", bound=CommitSink)


class MemLedgerApp(BaseApplication, Generic[SinkT]):
    """memledger's ABCI 2.0 application; `projection` is the commit sink it flushes
    every block to before LMDB (the node passes its SQL projection)."""

    def __init__(
        self,
        store: CanonicalStore,
        projection: SinkT,
        *,
        faults: FaultPlan | None = None,
        on_halt: Callable[[str], None] = halt,
        supported_versions: frozenset[int] = SUPPORTED_APP_VERSIONS,
        verify_helper: bool = False,
        snapshots: SnapshotStore | None = None,
        snapshot_interval: int = 0,
        retain_blocks: int = 0,
    ) -> None:
        self.supported_versions = supported_versions
        pool = None
        if verify_helper:
            pool = VerifyPool()
            pool.start()
        self.verifier = SignatureVerifier(pool=pool)
        self.decoded = DecodedTxCache()
        self.phase_cpu = PhaseCpu()  # charged by the ABCI server, read by benches
        self.store = store
        self.projection = projection
        self.faults = faults or FaultPlan()
        self.on_halt = on_halt
        # the genesis writes (key order) until the first block commits them
        self._genesis: dict[bytes, bytes | None] | None = None
        self._last_time_ns: int | None = None
        self._genesis_height = 0
        self._pending: _PendingBlock | None = None
        self._genesis_version = INITIAL_APP_VERSION
        self.mempool_nonces = PendingNonces()
        self.rechecks = RecheckMemo()
        self._chain_id = self._load_chain_id()
        self.statesync = StateSync(store, projection, snapshots, on_restored=self._restored,
                                   checkpoint=lambda p, h: self.faults.maybe_kill(p, h))
        self.queries = QueryService(store)
        self.snapshot_taker = (None if snapshots is None
                               else SnapshotTaker(store, snapshots, snapshot_interval))
        self.snapshots = snapshots
        self.retain_blocks = retain_blocks

    # ----------------------------------------------------------------- helpers
    def _load_chain_id(self) -> str:
        raw = self.store.get(records.CHAIN)
        return "" if raw is None else str(json.loads(raw)["chain_id"])

    def _restored(self) -> None:
        """State sync filled the store: pick up the chain facts it now holds. The txs
        CheckTx let in before (under no chain id) are judged again under the real one."""
        self._chain_id = self._load_chain_id()
        self.decoded = DecodedTxCache()
        self.rechecks.clear()

    @property
    def app_version(self) -> int:
        """The committed version; before the first Commit, the one genesis named."""
        return self.store.app_version or self._genesis_version

    # ----------------------------------------------------------------- info / init
    def info(self, req: pb.RequestInfo) -> pb.ResponseInfo:
        """The committed height, a restored one too before any block confirms it: CometBFT
        checks it after the last chunk, and a CometBFT that saved its state at that height
        handshakes against it (one with no state state-syncs without asking)."""
        return pb.ResponseInfo(
            data=APP_NAME,
            version=SOFTWARE_VERSION,
            app_version=self.app_version,
            last_block_height=self.store.last_height,
            last_block_app_hash=self.store.last_app_hash if self.store.last_height else b"",
        )

    def init_chain(self, req: pb.RequestInitChain) -> pb.ResponseInitChain:
        members: list[tuple[str, int]] = []
        for update in req.validators:
            if update.pub_key.WhichOneof("sum") != "ed25519":
                self.on_halt("genesis validators must use ed25519 keys")
            members.append((update.pub_key.ed25519.hex(), int(update.power)))
        overlay = self.store.begin_block()
        buffer = TxBuffer(overlay)
        try:
            app_state = genesis.parse_app_state(req.app_state_bytes)
            version = genesis.initial_app_version(app_state, self.supported_versions)
            genesis.apply_genesis(buffer, req.chain_id, int(req.initial_height or 1), members,
                                  app_state)
        except genesis.GenesisError as exc:
            self.on_halt(str(exc))
            raise
        buffer.apply()
        overlay.set_layout(versions.hash_layout(version))
        self._genesis = dict(overlay.changes())
        self._genesis_height = int(req.initial_height or 1)
        self._chain_id = req.chain_id
        self._genesis_version = version
        params = pb.ConsensusParams(version=pb.VersionParams(app=version))
        return pb.ResponseInitChain(app_hash=overlay.app_hash(), consensus_params=params)

    # ----------------------------------------------------------------- mempool
    def check_tx(self, req: pb.RequestCheckTx) -> pb.ResponseCheckTx:
        """Advisory: the full processTx against committed state, writes discarded.

        From the nonce-window rule on, the nonce check also sees what the mempool holds
        (new txs and rechecks alike add to that view; Commit clears it). A recheck that
        fails drops a tx this node once acknowledged: it is logged, never silent.
        """
        version = self.app_version
        earliest = self._last_block_time_ns() + 1
        block = BlockInfo(
            height=self.store.last_height + 1,
            time_ns=max(time.time_ns(), earliest),
            chain_id=self._chain_id,
            app_version=version,
            earliest_time_ns=earliest,
        )
        pending = self.mempool_nonces if versions.active("nonce_window", version) else None
        recheck = req.type == pb.RECHECK
        outcome = self._recheck_unchanged(req.tx, block, pending) if recheck else None
        if outcome is None:
            view = RecordingView(self.store, self._genesis)
            outcome = process_tx(view, block, req.tx, apply=False,
                                 check=self.verifier, decoded=self.decoded, pending=pending,
                                 recheck=recheck)
            reads = view.reads
            if outcome.code == 0 and reads is not None:
                # the signer's account feeds the nonce rule alone, which every recheck runs
                reads.discard(records.account_key(outcome.signer_key))
                self.rechecks.remember(outcome.tx_hash, self.store.last_height, version, reads)
        if pending is not None and outcome.code == 0:
            pending.add(outcome.signer_key, outcome.nonce)
        if recheck and outcome.code:
            log.warning("recheck dropped acknowledged tx %s from the mempool: %s (code %d) %s",
                        hashlib.sha256(req.tx).hexdigest(), outcome.code.slug,
                        int(outcome.code), outcome.log)
        return pb.ResponseCheckTx(
            code=int(outcome.code),
            log=outcome.log,
            codespace=CODESPACE if outcome.code else "",
            gas_wanted=1,
        )

    def _recheck_unchanged(self, raw: bytes, block: BlockInfo,
                           pending: PendingNonces | None) -> TxOutcome | None:
        """A recheck of a tx whose last full check read nothing the block wrote: the
        nonce rule alone (memledger.consensus.gate.recheck); None when it needs the full
        check."""
        signed = self.decoded.get(raw, self._chain_id)
        if signed is None or not self.rechecks.unchanged(signed.tx_hash, self.store.last_height,
                                                         block.app_version):
            return None
        outcome = recheck_nonce(CommittedView(self.store, self._genesis), block, signed, pending)
        if outcome.code:
            self.rechecks.forget(signed.tx_hash)
        return outcome

    # ----------------------------------------------------------------- proposals
    def prepare_proposal(self, req: pb.RequestPrepareProposal) -> pb.ResponsePrepareProposal:
        """CometBFT's cut, then each signer's txs in nonce order (a proposer's choice)."""
        cut = super().prepare_proposal(req)
        return pb.ResponsePrepareProposal(txs=order_by_nonce(list(cut.txs), self.decoded))

    def process_proposal(self, req: pb.RequestProcessProposal) -> pb.ResponseProcessProposal:
        # Invalid txs get deterministic error codes in FinalizeBlock; rejecting a block
        # for them would let one bad tx stall liveness.
        return pb.ResponseProcessProposal(status=pb.ResponseProcessProposal.ACCEPT)

    def _last_block_time_ns(self) -> int:
        """The last committed block's time (kept beside the state, outside the app hash):
        the next block's time is later. 0 before the first block, or after a state-sync
        restore until the next block: then only the wall clock bounds a window."""
        if self._last_time_ns is None:
            raw = self.store.get_meta(LAST_BLOCK_TIME_META)
            self._last_time_ns = int.from_bytes(raw, "big") if raw else 0
        return self._last_time_ns

    # ----------------------------------------------------------------- execution
    def finalize_block(self, req: pb.RequestFinalizeBlock) -> pb.ResponseFinalizeBlock:
        height = int(req.height)
        version = self.app_version
        if version not in self.supported_versions:
            self._halt_upgrade_required(version)
        overlay = self.store.begin_block()
        if self._genesis is not None and height == self._genesis_height:
            for key, value in self._genesis.items():
                if value is None:
                    overlay.delete(key)
                else:
                    overlay.put(key, value)
        block = BlockInfo(
            height=height,
            time_ns=int(req.time.seconds) * 1_000_000_000 + int(req.time.nanos),
            chain_id=self._chain_id,
            app_version=version,
        )
        opening = TxBuffer(overlay)
        lifecycle.begin_block(opening, height)
        opening.apply()
        response = pb.ResponseFinalizeBlock()
        add_result, verifier, decoded = response.tx_results.add, self.verifier, self.decoded
        verifier.prefetch(req.txs, known=decoded)
        skip = self.faults.diverges(height)  # test hook: a build that differs (faults.py)
        for tx in req.txs:
            if skip:
                add_result()
                continue
            outcome = process_tx(overlay, block, tx, check=verifier, decoded=decoded)
            self._fill_result(add_result(), outcome)
        verifier.end_block()
        closing = TxBuffer(overlay)
        effects = lifecycle.end_block(
            closing, height, version,
            [(int(m.type), bytes(m.validator.address)) for m in req.misbehavior])
        closing.apply()
        # A block hashes the state it leaves under the layout of the version it ran under,
        # so the first block under a new layout rehashes every bucket (docs/APP_HASH.md),
        # and a binary that lacks the new version halts before it, never mid-way.
        overlay.set_layout(versions.hash_layout(version))
        overlay.set_meta(LAST_BLOCK_TIME_META, block.time_ns.to_bytes(8, "big"))
        app_hash = overlay.app_hash()
        new_version = effects.new_app_version or version
        self._pending = _PendingBlock(height, overlay, app_hash, new_version, block.time_ns)
        self.faults.maybe_kill("after_finalize", height)
        response.app_hash = app_hash
        self._add_events(response.events, effects.events)
        response.validator_updates.extend(
            pb.ValidatorUpdate(pub_key=pb.PublicKey(ed25519=key), power=power)
            for key, power in effects.final_validator_updates()
        )
        if effects.new_app_version is not None:
            response.consensus_param_updates.CopyFrom(
                pb.ConsensusParams(version=pb.VersionParams(app=effects.new_app_version)))
        return response

    def _halt_upgrade_required(self, version: int) -> None:
        raw = self.store.get(records.APP_VERSION)
        name = json.loads(raw)["name"] if raw is not None else f"v{version}"
        self.on_halt(
            f"upgrade required: {name} (chain runs app version {version}; this binary "
            f"supports {sorted(self.supported_versions)})"
        )

    @staticmethod
    def _add_events(container: Any, events: list[tuple[str, list[tuple[str, str]]]]) -> None:
        """Append events in place with add(): nested constructors copy, at twice the cost."""
        add_event = container.add
        for kind, attrs in events:
            add = add_event(type=kind).attributes.add
            for key, value in attrs:
                add(key=key, value=value, index=True)

    @staticmethod
    def _fill_result(result: pb.ExecTxResult, outcome: TxOutcome) -> None:
        """Write an outcome into its slot of the response."""
        if outcome.code:
            result.code = int(outcome.code)
            result.log = outcome.log
            result.codespace = CODESPACE
        MemLedgerApp._add_events(result.events, outcome.events)

    def commit(self, req: pb.RequestCommit) -> pb.ResponseCommit:
        pending = self._pending
        if pending is None:
            self.on_halt("Commit without a finalized block")
            raise RuntimeError("unreachable")
        if self.faults.exit_before_commit_height == pending.height:
            halt(f"fault injection: exit before Commit at height {pending.height}")
        changes = pending.overlay.changes()
        faults, height = self.faults, pending.height
        faults.maybe_kill("before_flush", height)
        try:
            if self.faults.fail_flush_height == pending.height:
                raise OSError(f"fault injection: projection flush fails at {pending.height}")
            self.projection.flush(pending.height, pending.app_hash, changes,
                                  before_commit=lambda: faults.maybe_kill("in_flush", height),
                                  follows=self.store.last_height)
        except Exception as exc:  # noqa: BLE001 - any failure must halt
            self.on_halt(f"projection flush failed at height {pending.height}: {exc!r}")
            raise
        faults.maybe_kill("after_flush", height)
        try:
            self.store.set_before_commit(lambda: faults.maybe_kill("in_lmdb", height))
            self.store.commit(pending.overlay, pending.height, pending.app_hash,
                              pending.app_version)
        except lmdb.MapFullError:
            size = self.store.map_size
            shown = f"{size >> 30} GiB" if size >= 1 << 30 else f"{size >> 20} MiB"
            self.on_halt(f"canonical state is full at height {pending.height} (LMDB map of "
                         f"{shown}): raise state_max_gib in the node's config.json and start "
                         "it again")
            raise
        except Exception as exc:  # noqa: BLE001
            self.on_halt(f"canonical store commit failed at height {pending.height}: {exc!r}")
            raise
        faults.maybe_kill("after_lmdb", height)
        self._pending = None
        self._last_time_ns = pending.time_ns
        self.mempool_nonces.clear()  # CometBFT rechecks what is left before new txs
        self.rechecks.committed(pending.height, (key for key, _ in changes))
        if self.snapshot_taker is not None:
            self.snapshot_taker.after_commit(pending.height)
        if pending.height == self._genesis_height:
            self._genesis = None
        return pb.ResponseCommit(retain_height=self._retain_height(pending.height))

    def _retain_height(self, height: int) -> int:
        """Node-local block pruning (consensus.retain); never part of the app hash."""
        if self.retain_blocks <= 0:
            return 0
        oldest = None if self.snapshots is None else self.snapshots.oldest_height()
        return retain_height(height, self.retain_blocks, oldest)

    # ----------------------------------------------------------------- state sync
    def list_snapshots(self, req: pb.RequestListSnapshots) -> pb.ResponseListSnapshots:
        return self.statesync.list_snapshots()

    def load_snapshot_chunk(self, req: pb.RequestLoadSnapshotChunk
                            ) -> pb.ResponseLoadSnapshotChunk:
        chunk = self.statesync.load_snapshot_chunk(req)
        if chunk and self.faults.corrupt_snapshot_chunks:
            chunk = bytes([chunk[0] ^ 0xFF]) + chunk[1:]
        return pb.ResponseLoadSnapshotChunk(chunk=chunk)

    def offer_snapshot(self, req: pb.RequestOfferSnapshot) -> pb.ResponseOfferSnapshot:
        return self.statesync.offer_snapshot(req)

    def apply_snapshot_chunk(self, req: pb.RequestApplySnapshotChunk
                             ) -> pb.ResponseApplySnapshotChunk:
        return self.statesync.apply_snapshot_chunk(req)

    # ----------------------------------------------------------------- queries
    def query(self, req: pb.RequestQuery) -> pb.ResponseQuery:
        if req.path == BACKLOG_PATH and not req.prove:
            return self._backlog(bytes(req.data))
        if req.path == PHASES_PATH and not req.prove:
            return pb.ResponseQuery(value=self.phase_cpu.to_json(),
                                    height=self.store.last_height)
        return self.queries.query(req)

    def _backlog(self, data: bytes) -> pb.ResponseQuery:
        """`/mempool/backlog` (data `<signer hex>/<nonce>`): may the REST API let this tx
        into the mempool? This node's view, not committed state: never proven."""
        height = self.store.last_height
        try:
            signer_hex, nonce_text = data.decode("ascii").split("/")
            signer, nonce = bytes.fromhex(signer_hex), int(nonce_text)
        except ValueError:
            return answer(QueryCode.BAD_REQUEST, height, "data must be <signer hex>/<nonce>")
        state = TxBuffer(CommittedView(self.store))
        if versions.active("nonce_window", self.app_version):
            room = nonces.backlog(nonces.load(state, signer).recent,
                                  self.mempool_nonces.for_signer(signer), nonce,
                                  nonces.window_size(state))
        else:
            room = nonces.UNBOUNDED
        return pb.ResponseQuery(value=json.dumps(asdict(room)).encode(), height=height)
