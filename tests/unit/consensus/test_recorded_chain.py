"""A recorded chain's app hashes, byte for byte: code moves must not change a single one.

The workload (tests/support/workload.py, seed 1234, 60 blocks) mixes every tx kind, valid and
invalid; its app hash at every height was recorded before the package split of session 21
and must never change (a change here is a consensus fault, not a test to update).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.workload import run

DATA = Path(__file__).parent / "data"

#: (recording, genesis app version): version 1 as the chain began, and the latest (9) with
#: every rule on (order-free nonces, ballot expiry, vote reasons, ...).
RECORDINGS = [("recorded_chain_1234.json", 0), ("recorded_chain_1234_latest.json", 9)]


@pytest.mark.parametrize(("name", "app_version"), RECORDINGS)
def test_recorded_chain_replays_to_the_same_app_hashes(
        tmp_path: Path, name: str, app_version: int) -> None:
    recorded = {int(h): v for h, v in json.loads((DATA / name).read_text()).items()}
    replayed = run(tmp_path / "chain", 1234, len(recorded), -1, app_version=app_version)
    assert {h: replayed[h] for h in recorded} == recorded
