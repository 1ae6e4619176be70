"""The ABCI 2.0 application interface that memledger.consensus.wire.server dispatches to.

Each method takes the Request sub-message of the same name (e.g. ``finalize_block`` gets a
``RequestFinalizeBlock``) and returns the matching Response sub-message. Methods are called
synchronously, one at a time, from the server's event loop: implementations need no locking but
must not block for long. Raising is treated as a bug and kills the process (see
memledger.consensus.wire.server).
Echo and Flush never reach the application.
"""

from __future__ import annotations

from typing import Protocol

from memledger.protocol.pb import abci_pb2 as pb

# Protobuf overhead of one entry of the block's `repeated bytes txs = 1`: a one-byte tag plus
# the uvarint length. CometBFT checks PrepareProposal output against max_tx_bytes using this
# encoded size, not the raw tx length.
_TX_TAG_BYTES = 1


class Application(Protocol):
    """What the ABCI server needs from an app; method names equal the Request oneof names."""

    def info(self, req: pb.RequestInfo) -> pb.ResponseInfo: ...

    def init_chain(self, req: pb.RequestInitChain) -> pb.ResponseInitChain: ...

    def query(self, req: pb.RequestQuery) -> pb.ResponseQuery: ...

    def check_tx(self, req: pb.RequestCheckTx) -> pb.ResponseCheckTx: ...

    def prepare_proposal(self, req: pb.RequestPrepareProposal) -> pb.ResponsePrepareProposal: ...

    def process_proposal(self, req: pb.RequestProcessProposal) -> pb.ResponseProcessProposal: ...

    def extend_vote(self, req: pb.RequestExtendVote) -> pb.ResponseExtendVote: ...

    def verify_vote_extension(
        self, req: pb.RequestVerifyVoteExtension
    ) -> pb.ResponseVerifyVoteExtension: ...

    def finalize_block(self, req: pb.RequestFinalizeBlock) -> pb.ResponseFinalizeBlock: ...

    def commit(self, req: pb.RequestCommit) -> pb.ResponseCommit: ...

    def list_snapshots(self, req: pb.RequestListSnapshots) -> pb.ResponseListSnapshots: ...

    def offer_snapshot(self, req: pb.RequestOfferSnapshot) -> pb.ResponseOfferSnapshot: ...

    def load_snapshot_chunk(
        self, req: pb.RequestLoadSnapshotChunk
    ) -> pb.ResponseLoadSnapshotChunk: ...

    def apply_snapshot_chunk(
        self, req: pb.RequestApplySnapshotChunk
    ) -> pb.ResponseApplySnapshotChunk: ...


def encoded_tx_size(tx: bytes) -> int:
    """Bytes one tx adds to the block's Data message (what max_tx_bytes is compared with)."""
    n = len(tx)
    varint_len = 1
    while n >= 0x80:
        n >>= 7
        varint_len += 1
    return _TX_TAG_BYTES + varint_len + len(tx)


class BaseApplication:
    """Safe do-nothing defaults, so an app overrides only what it implements.

    The defaults never answer with an enum's zero value where CometBFT treats that as an error
    (ProcessProposal/VerifyVoteExtension UNKNOWN), and refuse state sync rather than pretend to
    restore a snapshot.
    """

    def info(self, req: pb.RequestInfo) -> pb.ResponseInfo:
        return pb.ResponseInfo()

    def init_chain(self, req: pb.RequestInitChain) -> pb.ResponseInitChain:
        return pb.ResponseInitChain()

    def query(self, req: pb.RequestQuery) -> pb.ResponseQuery:
        return pb.ResponseQuery()

    def check_tx(self, req: pb.RequestCheckTx) -> pb.ResponseCheckTx:
        return pb.ResponseCheckTx(code=0)

    def prepare_proposal(self, req: pb.RequestPrepareProposal) -> pb.ResponsePrepareProposal:
        """Keep CometBFT's tx order, cut at the first tx that would exceed max_tx_bytes."""
        txs: list[bytes] = []
        total = 0
        for tx in req.txs:
            total += encoded_tx_size(tx)
            if total > req.max_tx_bytes:
                break
            txs.append(tx)
        return pb.ResponsePrepareProposal(txs=txs)

    def process_proposal(self, req: pb.RequestProcessProposal) -> pb.ResponseProcessProposal:
        return pb.ResponseProcessProposal(status=pb.ResponseProcessProposal.ACCEPT)

    def extend_vote(self, req: pb.RequestExtendVote) -> pb.ResponseExtendVote:
        return pb.ResponseExtendVote()

    def verify_vote_extension(
        self, req: pb.RequestVerifyVoteExtension
    ) -> pb.ResponseVerifyVoteExtension:
        return pb.ResponseVerifyVoteExtension(status=pb.ResponseVerifyVoteExtension.ACCEPT)

    def finalize_block(self, req: pb.RequestFinalizeBlock) -> pb.ResponseFinalizeBlock:
        """One (successful, empty) result per tx: CometBFT requires len(tx_results) == len(txs)."""
        return pb.ResponseFinalizeBlock(tx_results=[pb.ExecTxResult() for _ in req.txs])

    def commit(self, req: pb.RequestCommit) -> pb.ResponseCommit:
        return pb.ResponseCommit()

    def list_snapshots(self, req: pb.RequestListSnapshots) -> pb.ResponseListSnapshots:
        return pb.ResponseListSnapshots()

    def offer_snapshot(self, req: pb.RequestOfferSnapshot) -> pb.ResponseOfferSnapshot:
        return pb.ResponseOfferSnapshot(result=pb.ResponseOfferSnapshot.REJECT)

    def load_snapshot_chunk(self, req: pb.RequestLoadSnapshotChunk) -> pb.ResponseLoadSnapshotChunk:
        return pb.ResponseLoadSnapshotChunk()

    def apply_snapshot_chunk(
        self, req: pb.RequestApplySnapshotChunk
    ) -> pb.ResponseApplySnapshotChunk:
        return pb.ResponseApplySnapshotChunk(result=pb.ResponseApplySnapshotChunk.ABORT)
