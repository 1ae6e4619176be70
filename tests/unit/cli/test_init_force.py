"""`memledger init --force` on an existing home, without a node.

An option left out keeps the home's value (config.json, the genesis' app version), not
the command's default; a home that has run a chain keeps its genesis: another chain id or
app version, or --join, is refused in one line and nothing is written. "Has run a chain"
is what cometbft leaves at its first start (cometbft/data/state.db, where it records the
genesis' hash) or the app's canonical state (data/state/data.mdb); the tests lay those
down by hand instead of running a node.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memledger.cli.main import main
from memledger.daemon import cometbft
from memledger.daemon.home import NodeHome

BASE = 41900


def _init(home: NodeHome, *args: str) -> Result:
    return CliRunner().invoke(main, ["init", "--home", str(home.root), *args])


def _error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def _genesis(home: NodeHome) -> dict[str, object]:
    return cometbft.load_genesis(home.cometbft)


@pytest.fixture()
def prod(tmp_path: Path) -> NodeHome:
    """A home made with non-default options and a setting no option sets."""
    home = NodeHome(tmp_path / "home")
    result = _init(home, "--chain-id", "prod", "--base-port", str(BASE), "--no-voter",
                   "--moniker", "alpha", "--app-version", "5")
    assert result.exit_code == 0, result.output
    data = json.loads(home.config_file.read_text())
    data["snapshot_interval"] = 7
    home.config_file.write_text(json.dumps(data))
    return home


def _run_a_chain(home: NodeHome, marker: str = "cometbft/data/state.db") -> None:
    (home.root / marker).mkdir(parents=True)


@pytest.mark.parametrize("marker", ["cometbft/data/state.db", "cometbft/data/blockstore.db",
                                    "data/state/data.mdb"])
def test_force_on_a_chain_keeps_the_chain_and_every_value_not_given(prod: NodeHome,
                                                                    marker: str) -> None:
    _run_a_chain(prod, marker)
    genesis = cometbft.genesis_path(prod.cometbft).read_bytes()
    result = _init(prod, "--force", "--base-port", str(BASE + 100))
    assert result.exit_code == 0, result.output
    config = prod.load()
    assert (config.chain_id, config.moniker, config.voter, config.snapshot_interval) == (
        "prod", "alpha", False, 7)
    assert config.rpc_laddr == f"tcp://127.0.0.1:{BASE + 101}"  # the option given
    assert config.api_port == BASE + 100 + 24
    assert cometbft.genesis_path(prod.cometbft).read_bytes() == genesis


@pytest.mark.parametrize(("args", "said"), [
    (["--chain-id", "other"], "chain id 'prod' -> 'other'"),
    (["--app-version", "7"], "app version 5 -> 7"),
    (["--join", "http://127.0.0.1:9"], "--join takes the genesis of the net at "),
])
def test_force_refuses_to_give_a_chain_another_genesis(prod: NodeHome, args: list[str],
                                                       said: str) -> None:
    _run_a_chain(prod)
    before = {p: p.read_bytes() for p in (prod.config_file, cometbft.genesis_path(prod.cometbft),
                                          cometbft.config_path(prod.cometbft))}
    line = _error_line(_init(prod, "--force", *args))
    assert line.startswith(f"memledger: error: {prod.root} has run a chain "
                           "(cometbft/data/state.db); init would change its genesis (")
    assert said in line and "init a new --home" in line
    assert {p: p.read_bytes() for p in before} == before


def test_the_same_chain_id_and_app_version_given_again_are_accepted(prod: NodeHome) -> None:
    _run_a_chain(prod)
    result = _init(prod, "--force", "--chain-id", "prod", "--app-version", "5", "--voter")
    assert result.exit_code == 0, result.output
    assert prod.load().voter is True  # --voter turns the auto-voter back on
    assert _genesis(prod)["chain_id"] == "prod"


def test_force_before_the_first_start_may_change_the_genesis_and_keeps_the_rest(
        prod: NodeHome) -> None:
    assert _init(prod, "--force", "--chain-id", "fresh").exit_code == 0
    assert prod.load().chain_id == "fresh" and _genesis(prod)["chain_id"] == "fresh"
    assert _genesis(prod)["app_state"] == {"app_version": 5}  # not the default 7
    assert _init(prod, "--force").exit_code == 0
    assert prod.load().chain_id == "fresh" and _genesis(prod)["chain_id"] == "fresh"
    assert prod.load().rpc_laddr == f"tcp://127.0.0.1:{BASE + 1}"


def test_force_replaces_a_broken_config_keeping_the_genesis_chain_id(prod: NodeHome) -> None:
    _run_a_chain(prod)
    prod.config_file.write_text("{not json")
    result = _init(prod, "--force")
    assert result.exit_code == 0, result.output
    assert prod.load().chain_id == "prod"
