"""Admissions of one signer run one at a time; other signers are not held up; no lock
outlives its last user."""

from __future__ import annotations

import anyio

from memledger.api.signer_locks import SignerLocks


def test_one_signer_at_a_time_others_in_parallel_and_nothing_kept() -> None:
    locks = SignerLocks()
    inside: dict[bytes, int] = {b"a": 0, b"b": 0}
    most: dict[bytes, int] = {b"a": 0, b"b": 0}
    both_at_once = False

    async def admit(signer: bytes) -> None:
        nonlocal both_at_once
        async with locks.hold(signer):
            inside[signer] += 1
            most[signer] = max(most[signer], inside[signer])
            both_at_once |= inside[b"a"] > 0 and inside[b"b"] > 0
            await anyio.sleep(0.01)
            inside[signer] -= 1

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(admit, b"ab"[i % 2:i % 2 + 1])
            tg.start_soon(admit_unsigned)

    async def admit_unsigned() -> None:
        async with locks.hold(None):
            await anyio.sleep(0)

    anyio.run(run)
    assert most == {b"a": 1, b"b": 1} and both_at_once
    assert len(locks) == 0
