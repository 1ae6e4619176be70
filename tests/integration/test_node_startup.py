"""A real node's home, startup failure and logs (real cometbft).

- `memledger init` makes the home private (0700) and config.json 0600;
- a part that cannot start is named by `memledger start`, with why (the last line of its
  log) and where its log is;
- an oversized log left by an earlier run is rotated to NAME.log.1 when the node starts.
"""

from __future__ import annotations

import shutil
import socket
import stat
from pathlib import Path

import pytest

from memledger.daemon import supervisor
from tests.support.node import NodeRunner, memledger

pytestmark = pytest.mark.cometbft


def test_init_writes_a_private_home(tmp_path: Path, cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id="memledger-startup")
    assert stat.S_IMODE(runner.home.stat().st_mode) == 0o700
    assert stat.S_IMODE((runner.home / "config.json").stat().st_mode) == 0o600


def test_start_names_the_part_that_failed_and_why(tmp_path: Path, cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id="memledger-startup")
    logs = runner.home / "logs"
    logs.mkdir()
    (logs / "app.log").write_text("an earlier run's last words\n")
    state = runner.home / "data" / "state"
    shutil.rmtree(state, ignore_errors=True)
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text("not a directory: the canonical store cannot open")
    out = memledger("start", "--home", str(runner.home), "--no-api", "--no-voter",
                    check=False, timeout=90)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    log = logs / "app.log"
    assert lines[0].startswith("memledger: startup failed: app exited with code ")
    assert "during startup: " in lines[0] and lines[0].endswith(f"(see {log})")
    assert "earlier run" not in lines[0], lines[0]  # only this run's lines are quoted


def test_start_refuses_ports_another_node_holds_before_starting_anything(
    tmp_path: Path, cometbft_bin: Path,
) -> None:
    """A cometbft started against another node's ABCI port would replay its own blocks
    into that node's app and halt it: `start` refuses first, naming the ports."""
    runner = NodeRunner(tmp_path / "home", chain_id="memledger-startup")
    abci_port = runner.base + 2
    with socket.socket() as other:
        other.bind(("127.0.0.1", abci_port))
        other.listen()
        out = memledger("start", "--home", str(runner.home), "--no-api", "--no-voter",
                        check=False, timeout=90)
        other.settimeout(0.2)
        with pytest.raises(TimeoutError):
            other.accept()  # nobody connected to it
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.strip() == (
        f"memledger: startup failed: ports already in use: ABCI 127.0.0.1:{abci_port} "
        "(another node or program listens there; a cometbft started against another "
        "node's app port would replay its blocks into it)"), out.stderr
    assert not (runner.home / "logs" / "app.log").exists()


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
