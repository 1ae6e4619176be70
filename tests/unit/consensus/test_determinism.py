"""Same blocks → byte-identical app hashes, across processes, hash seeds and restarts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[3]


def _run(home: Path, hash_seed: str, restart_at: int) -> dict[str, str]:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-m", "tests.support.workload", str(home), "1234", "40",
         str(restart_at)],
        check=True, capture_output=True, text=True, env=env, cwd=REPO,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_two_processes_with_different_hash_seeds_agree_at_every_height(tmp_path: Path) -> None:
    first = _run(tmp_path / "a", "1", restart_at=-1)
    second = _run(tmp_path / "b", "4242", restart_at=17)
    assert len(first) == 40
    assert first == second
    assert len(set(first.values())) > 10  # the workload really changes state


def test_different_blocks_give_different_hashes(tmp_path: Path) -> None:
    from tests.support.workload import run

    a = run(tmp_path / "a", 1, 5, -1)
    b = run(tmp_path / "b", 2, 5, -1)
    assert a[5] != b[5]
