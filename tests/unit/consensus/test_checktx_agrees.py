"""CheckTx says yes only to what the next block would take: before the first block it
sees the genesis state, and a co-commit's window must be open at the earliest time the
next block can carry (block times trail the wall clock), not just by the wall clock."""

from __future__ import annotations

import time
from pathlib import Path

from memledger.protocol.codes import Code
from memledger.sdk.txbuilder import cocommit_core, sign_cocommit
from tests.support.chain import GENESIS_TIME_S, LocalChain, seeded_key

A, B = seeded_key("agree-a"), seeded_key("agree-b")
MEMBER, OUTSIDER = seeded_key("agree-member"), seeded_key("agree-outsider")
SCOPE = {"id": "ops", "domains": ["ops"], "members": [[bytes(MEMBER.verify_key).hex(), 1]]}


def test_before_the_first_block_checktx_sees_the_genesis_state(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "chain", app_state={"scopes": [SCOPE]})
    assert chain.height == 0
    outsider = chain.builder(OUTSIDER).submit(1, "o-1", "an outsider writes into ops",
                                              domain="ops")
    member = chain.builder(MEMBER).submit(1, "m-1", "a member writes into ops", domain="ops")
    checked = [chain.check(outsider).code, chain.check(member).code]
    assert checked == [Code.DOMAIN_WRITE_DENIED, 0]
    assert [r.code for r in chain.block([outsider, member])] == checked
    chain.close()


def _cocommit(chain: LocalChain, not_before_ns: int) -> bytes:
    keys = sorted([A, B], key=lambda k: bytes(k.verify_key))
    core = cocommit_core(chain.chain_id, "we both saw the deploy finish",
                         [bytes(k.verify_key) for k in keys], not_before_unix_ns=not_before_ns,
                         not_after_unix_ns=time.time_ns() + 3600 * 10**9)
    sigs = sorted(sign_cocommit(k, core) for k in keys)
    return chain.builder(A).cocommit(chain.next_nonce(A), core, sigs)


def test_a_cocommit_window_not_yet_open_for_the_next_block_is_refused_by_checktx(
    tmp_path: Path,
) -> None:
    chain = LocalChain(tmp_path / "chain")
    chain.block([])  # last block time: GENESIS_TIME_S + 1 s, long before the wall clock
    opens = (GENESIS_TIME_S + 3) * 10**9  # passed by the wall clock, not by any block yet
    tx = _cocommit(chain, opens)
    refused = chain.check(tx)
    assert refused.code == Code.COCOMMIT_OUTSIDE_WINDOW and "next block" in refused.log
    assert chain.block([tx])[0].code == Code.COCOMMIT_OUTSIDE_WINDOW  # block at +2 s
    assert chain.check(tx).code == Code.COCOMMIT_OUTSIDE_WINDOW  # last block +2 s < +3 s
    chain.block([])  # +3 s: the window is open from the next block on
    assert chain.check(tx).code == 0
    assert chain.block([tx])[0].code == 0
    chain.close()


def test_the_last_block_time_survives_a_restart(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "chain")
    chain.block([])
    chain.block([])  # last block time: +2 s
    chain.reopen()
    tx = _cocommit(chain, (GENESIS_TIME_S + 3) * 10**9)
    assert chain.check(tx).code == Code.COCOMMIT_OUTSIDE_WINDOW
    chain.close()
