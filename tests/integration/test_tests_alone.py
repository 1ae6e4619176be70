"""Tests that once passed only after their neighbours, each run alone in a fresh process.

`make test` runs every test file in its own process (scripts/run_tests.py), which catches
a file that needs another file; this catches a test that needs an earlier test of its own
file. Each of these relied on state an earlier test left behind (a key, a memory, a used
nonce, a counted request) until it was made to build its own; a one-off sweep ran every
unit and integration test alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]

pytestmark = pytest.mark.cometbft

ONCE_ORDER_DEPENDENT = [
    "tests/unit/api/test_api_reads.py::test_metrics",
    "tests/integration/test_single_node.py::test_check_tx_rejections_over_rpc",
    "tests/integration/test_rest_api.py::test_sdk_vote_commits_and_metrics_count_codes[sqlite]",
]
# Not here, for time (a node, its voter and a dozen CLI processes):
# tests/integration/test_sdk_cli.py::test_cli_disputes_and_cocommit, the one issue 16 named.


@pytest.mark.parametrize("node_id", ONCE_ORDER_DEPENDENT)
def test_passes_alone(node_id: str, cometbft_bin: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:schemathesis", node_id], cwd=REPO, capture_output=True,
                         text=True, timeout=540)
    assert out.returncode == 0, f"{node_id} fails alone:\n{out.stdout[-4000:]}{out.stderr}"
    assert "1 passed" in out.stdout, out.stdout
