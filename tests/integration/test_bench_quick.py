"""The benchmark suite runs end to end in quick mode (it measures; it never gates)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
pytestmark = pytest.mark.cometbft


def test_quick_bench_suite_runs_and_records_json(cometbft_bin: Path) -> None:
    plots = REPO / "bench" / "results" / "quick" / "plots"
    shutil.rmtree(plots, ignore_errors=True)  # only PNGs from this run count
    proc = subprocess.run([sys.executable, "bench/run.py", "--quick"], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    summary = json.loads((REPO / "bench" / "results" / "quick" / "summary.json").read_text())
    assert set(summary["benches"]) == {"engine", "apphash", "flush", "read", "e2e", "resources",
                                        "nonce", "statesync"}
    engine = summary["benches"]["engine"]["result"]
    assert engine["raw_ed25519_verify_per_s"] > 0
    for mode in ("inline", "helper", "warm"):
        assert engine[mode]["submit_ratio_to_verify"] > 0, mode
        assert engine[mode]["vote_ratio_to_verify"] > 0, mode
    sqlite = summary["benches"]["read"]["result"]["backends"]["sqlite"]["10000"]
    assert sqlite["resources"]["lmdb_bytes_per_memory"] > 0  # filled via the Commit path
    nonce = summary["benches"]["nonce"]["result"]["versions"]
    assert nonce["v3"]["8-writers"]["one_key"]["lost"] == 0
    assert nonce["v3"]["8-writers"]["one_key"]["committed"] == 100
    sync = summary["benches"]["statesync"]["result"]
    assert sync["restore"]["5000"]["restore_with_projection_s"] > 0
    assert sync["net"]["state_sync_ready_s"] > 0 and sync["net"]["replay_ready_s"] > 0
    pngs = sorted(plots.glob("*.png"))
    assert pngs, proc.stdout[-2000:]
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
