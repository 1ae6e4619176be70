"""A node whose SQLite projection is damaged starts and serves everything (real cometbft).

The projection is derived data: the app moves a damaged file aside (kept, as
projection.db.corrupt-N) and rebuilds a new one from canonical state before it serves.
Before, the app exited at every start ("database disk image is malformed"), and the
documented repair, `memledger projection rebuild`, failed on the same file.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from memledger.sdk import Client
from memledger.sdk.keys import Agent
from tests.support.node import NodeRunner, memledger, statuses_after_start, wait_api_ready

pytestmark = pytest.mark.cometbft
IDS = [f"pd-{i}" for i in range(12)]


def _damage(db: Path) -> None:
    """Checkpoint the projection into its file (its WAL would mask the damage), then cut
    the file in half."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = db.read_bytes()
    db.write_bytes(data[:len(data) // 2])


def test_a_damaged_projection_is_set_aside_and_rebuilt(tmp_path: Path,
                                                       cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id="memledger-damaged-projection")
    db = runner.home / "data" / "projection.db"
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        with Client(runner.api_url, key=Agent.generate("pd")) as ml:
            for i, memory_id in enumerate(IDS):
                assert ml.submit(memory_id, f"projection damage memory {i} " * 20).height
        assert runner.stop() == 0

        _damage(db)  # at start: the app sets it aside and rebuilds
        assert statuses_after_start(runner, IDS) == [200] * len(IDS)
        assert (db.parent / "projection.db.corrupt-1").is_file()
        assert "is damaged (database disk image is malformed): moved it aside" in \
            (runner.home / "logs" / "app.log").read_text()
        assert runner.stop() == 0

        _damage(db)  # by hand: projection rebuild does the same
        out = memledger("projection", "rebuild", "--home", str(runner.home), check=False)
        assert out.returncode == 0, out.stderr
        assert (db.parent / "projection.db.corrupt-2").is_file()
        assert statuses_after_start(runner, IDS) == [200] * len(IDS)
    finally:
        runner.stop()
