"""A real node's home, startup failure and logs (real cometbft).

- `memledger init` makes the home private (0700) and config.json 0600;
- a part that cannot start is named by `memledger start`, with why (the last line of its
  log) and where its log is;
- an oversized log left by an earlier run is rotated to NAME.log.1 when the node starts.
"""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from memledger.node import supervisor
from tests.support.node import NodeRunner, memledger

pytestmark = pytest.mark.cometbft


def test_init_writes_a_private_home(tmp_path: Path, cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id="memledger-startup")
    assert stat.S_IMODE(runner.home.stat().st_mode) == 0o700
    assert stat.S_IMODE((runner.home / "config.json").stat().st_mode) == 0o600


def test_start_names_the_part_that_failed_and_why(tmp_path: Path, cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id="memledger-startup")
    abci_port = runner.base + 2
    with socket.socket() as taken:  # bound, not listening: the app cannot bind, and
        taken.bind(("127.0.0.1", abci_port))  # nothing answers there while it tries
        out = memledger("start", "--home", str(runner.home), "--no-api", "--no-voter",
                        check=False, timeout=90)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    log = runner.home / "logs" / "app.log"
    assert lines[0].startswith("memledger: startup failed: app exited with code ")
    assert "during startup: " in lines[0] and lines[0].endswith(f"(see {log})")
    assert "ddress already in use" in lines[0], lines[0]


def test_an_oversized_log_is_rotated_when_the_node_starts(tmp_path: Path,
                                                          cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id="memledger-startup")
    logs = runner.home / "logs"
    logs.mkdir()
    big = supervisor.LOG_MAX_BYTES + 1
    with open(logs / "cometbft.log", "wb") as f:
        f.write(b"from an earlier run\n")
        f.truncate(big)  # sparse: no 64 MiB actually written
    (logs / "cometbft.log.1").write_bytes(b"the run before that\n")
    runner.start("--no-api", "--no-voter")
    try:
        pass  # start() waited for the first block: cometbft has written its log
    finally:
        assert runner.stop() == 0
    previous = logs / "cometbft.log.1"
    assert previous.stat().st_size == big
    with open(previous, "rb") as f:
        assert f.read(20) == b"from an earlier run\n"
    current = (logs / "cometbft.log").read_bytes()
    assert 0 < len(current) < 10 * 1024 * 1024 and b"from an earlier run" not in current
