"""`memledger testnet` as a newcomer meets it beside a running node (issue 18, points 10-11).

- `init` without --base-port picks a free range clear of a single node's default ports,
  and skips ports that are in use;
- `up` on a net whose ports are taken refuses at once, naming them (no 10 s wait, no
  half-started net);
- `init --compose` writes its compose files beside the homes, never over the repository's
  tracked deploy/docker-compose.yml, whatever the working directory.
"""

from __future__ import annotations

import hashlib
import json
import socket
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from memledger.cli.main import main
from memledger.cli.testnet import DEFAULT_TESTNET_BASE, first_free_base_port
from memledger.daemon.ports import bindable
from memledger.testnet.layout import PORT_BLOCK

REPO_ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def listening(port: int) -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))
        s.listen(1)
        yield s


def _free_block(start: int = 24000) -> int:
    """A block-aligned base in the test range whose first two blocks are free."""
    return first_free_base_port(2, start=start, limit=31000)


def test_default_range_is_clear_of_a_single_node() -> None:
    single = {26656, 26657, 26658, 26680}
    assert DEFAULT_TESTNET_BASE > max(single)


def test_first_free_base_port_skips_a_port_in_use() -> None:
    base = _free_block()
    with listening(base + 1):  # its RPC port
        assert not bindable(base + 1)
        picked = first_free_base_port(2, start=base, limit=31000)
    assert picked > base and (picked - base) % PORT_BLOCK == 0


def test_init_picks_free_ports_and_up_refuses_busy_ones_at_once(
        tmp_path: Path, cometbft_bin: Path) -> None:
    runner = CliRunner()
    base = _free_block(25000)
    result = runner.invoke(main, ["testnet", "init", "-n", "2", "--out", str(tmp_path / "net"),
                                  "--base-port", str(base), "--json"])
    assert result.exit_code == 0, result.output
    nodes = json.loads(result.stdout)["nodes"]
    p2p = nodes[0]["p2p_port"]
    assert p2p == base
    for name in ("node0", "node1"):  # private like a single node's home (db_url secrets)
        home = tmp_path / "net" / name
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        assert stat.S_IMODE((home / "config.json").stat().st_mode) == 0o600
    with listening(base + 1):
        # An explicit --base-port whose ports are in use is refused, naming them.
        clash = runner.invoke(main, ["testnet", "init", "-n", "1", "--out",
                                     str(tmp_path / "other"), "--base-port", str(base)])
        assert clash.exit_code == 1 and str(base + 1) in clash.output, clash.output
        started = time.monotonic()
        up = runner.invoke(main, ["testnet", "up", str(tmp_path / "net")])
        elapsed = time.monotonic() - started
    assert up.exit_code == 1, up.output
    assert f"node0: {base + 1}" in up.output and "already in use" in up.output, up.output
    assert elapsed < 5, elapsed
    assert not list((tmp_path / "net" / "node0").glob("logs/*.log")), "nothing was started"


def test_compose_files_go_beside_the_homes_not_into_the_repo(
        tmp_path: Path, cometbft_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tracked = REPO_ROOT / "deploy" / "docker-compose.yml"
    before = hashlib.sha256(tracked.read_bytes()).hexdigest()
    monkeypatch.chdir(REPO_ROOT)  # where the README's command is typed
    out = tmp_path / "net"
    result = CliRunner().invoke(main, ["testnet", "init", "--validators", "2", "--out",
                                       str(out), "--compose", "--json"])
    assert result.exit_code == 0, result.output
    files = [Path(p) for p in json.loads(result.stdout)["files"]]
    assert out / "docker-compose.yml" in files
    assert all(p.is_relative_to(out) for p in files), files
    assert hashlib.sha256(tracked.read_bytes()).hexdigest() == before
