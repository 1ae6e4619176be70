"""An in-process chain: drives MemLedgerApp exactly as CometBFT would, without sockets.

Used by unit and property tests and by benchmarks that need many blocks fast. Integration
tests use the real cometbft binary instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from memledger.consensus.app import MemLedgerApp
from memledger.consensus.store.state import CanonicalStore
from memledger.projection.writer import Projection
from memledger.protocol.pb import abci_pb2 as pb
from memledger.sdk.txbuilder import TxBuilder
from memledger.sqlite_uri import sqlite_url

CHAIN_ID = "memledger-test"
GENESIS_TIME_S = 1_780_000_000


def seeded_key(label: str) -> SigningKey:
    """Deterministic keys so tests (and their app hashes) are reproducible."""
    import hashlib

    return SigningKey(hashlib.sha256(label.encode()).digest())


class HaltCalled(RuntimeError):
    pass


class LocalChain:
    """Genesis + blocks through the ABCI methods, with a per-block time step of 1 s."""

    def __init__(
        self,
        home: Path,
        powers: list[int] = (10, 20, 30, 40),  # type: ignore[assignment]
        app_state: dict[str, Any] | None = None,
        db_url: str | None = None,
        chain_id: str = CHAIN_ID,
        verify_helper: bool = False,
    ) -> None:
        self.verify_helper = verify_helper
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.chain_id = chain_id
        self.validator_keys = [seeded_key(f"validator-{i}") for i in range(len(powers))]
        self.powers = list(powers)
        self.app_state = app_state or {}
        self.db_url = db_url or sqlite_url(home / 'projection.db')
        self.halts: list[str] = []
        self.app = self._open()
        self.height = self.app.store.last_height
        self.nonces: dict[bytes, int] = {}
        self.last_results: list[pb.ExecTxResult] = []
        self.app_hashes: dict[int, bytes] = {}
        if self.height == 0:
            self._init()

    def _halt(self, message: str) -> None:
        self.halts.append(message)
        raise HaltCalled(message)

    def _open(self) -> MemLedgerApp[Projection]:
        store = CanonicalStore(str(self.home / "state"))
        return MemLedgerApp(store, Projection(self.db_url), on_halt=self._halt,
                            verify_helper=self.verify_helper)

    def reopen(self) -> None:
        """Simulate a process restart: drop in-memory state, reopen stores.

        Before the first Commit the app has no state yet, so CometBFT's handshake sends
        InitChain again; so does this.
        """
        self.close()
        self.app = self._open()
        self.height = self.app.store.last_height
        if self.height == 0:
            self._init()

    def close(self) -> None:
        self.app.verifier.close()
        self.app.projection.close()
        self.app.store.close()

    def _init(self) -> None:
        validators = [
            pb.ValidatorUpdate(pub_key=pb.PublicKey(ed25519=bytes(k.verify_key)), power=p)
            for k, p in zip(self.validator_keys, self.powers, strict=True)
        ]
        self.app.init_chain(pb.RequestInitChain(
            chain_id=self.chain_id, validators=validators, initial_height=1,
            app_state_bytes=json.dumps(self.app_state).encode(),
            time=pb.Timestamp(seconds=GENESIS_TIME_S),
        ))

    def builder(self, key: SigningKey) -> TxBuilder:
        return TxBuilder(key, self.chain_id)

    def next_nonce(self, key: SigningKey) -> int:
        pk = bytes(key.verify_key)
        self.nonces[pk] = self.nonces.get(pk, 0) + 1
        return self.nonces[pk]

    def finalize(self, txs: list[bytes], height: int | None = None) -> pb.ResponseFinalizeBlock:
        h = self.height + 1 if height is None else height
        return self.app.finalize_block(pb.RequestFinalizeBlock(
            txs=txs, height=h, time=pb.Timestamp(seconds=GENESIS_TIME_S + h),
        ))

    def block(self, txs: list[bytes]) -> list[pb.ExecTxResult]:
        """FinalizeBlock + Commit; returns the tx results."""
        resp = self.finalize(txs)
        self.app.commit(pb.RequestCommit())
        self.height += 1
        self.app_hashes[self.height] = resp.app_hash
        self.last_results = list(resp.tx_results)
        return self.last_results

    def check(self, tx: bytes) -> pb.ResponseCheckTx:
        return self.app.check_tx(pb.RequestCheckTx(tx=tx))

    def memory(self, memory_id: str) -> dict[str, Any] | None:
        raw = self.app.store.get(b"mem/" + memory_id.encode())
        return None if raw is None else json.loads(raw)


def apply_direct(chain: LocalChain, mutate: Any) -> None:
    """Commit one block whose only change is `mutate(TxBuffer)`.

    Stands in for a passed governance proposal in unit tests of rules that react to
    roster changes; the governance tests drive the real path.
    """
    from memledger.consensus.families.context import TxBuffer

    app = chain.app
    original = app.finalize_block

    def finalize(req: pb.RequestFinalizeBlock) -> pb.ResponseFinalizeBlock:
        resp = original(req)
        assert app._pending is not None
        buffer = TxBuffer(app._pending.overlay)
        mutate(buffer)
        buffer.apply()
        app._pending.app_hash = app._pending.overlay.app_hash()
        resp.app_hash = app._pending.app_hash
        return resp

    app.finalize_block = finalize  # type: ignore[method-assign]
    try:
        chain.block([])
    finally:
        app.finalize_block = original  # type: ignore[method-assign]
