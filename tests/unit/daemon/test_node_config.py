"""A node home's config.json and what reads and writes it, without a node.

- every value is checked on load (type, range), an unknown key or malformed JSON is one
  clear error naming the file, and the CLI turns that into its one-line error;
- config.json and cometbft's config.toml are replaced atomically (a failed write, e.g. a
  full disk, leaves the old file whole) and config.json is private (0600, home 0700);
- `init` / `testnet init` refuse base ports whose derived ports leave 1..65535;
- `projection rebuild` on a node that never ran says so in one line.
"""

from __future__ import annotations

import inspect
import json
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from click.testing import CliRunner, Result

from memledger.cli.main import main
from memledger.cli.node import INIT_PORT_SPAN
from memledger.daemon import cometbft
from memledger.daemon.home import (
    MAX_PORT,
    VOTER_HEARTBEAT_MAX_AGE_S,
    VOTER_INTERVAL_MAX_S,
    ConfigError,
    NodeConfig,
    NodeHome,
)
from memledger.daemon.voter import is_alive
from memledger.testnet.layout import TestnetSpec, check_ports, highest_port, node_specs

REPO = Path(__file__).parents[3]


def _home(tmp_path: Path, **changes: Any) -> NodeHome:
    """A home whose config.json is the defaults with ``changes`` written over them."""
    home = NodeHome(tmp_path / "home")
    home.save(NodeConfig())
    data = json.loads(home.config_file.read_text())
    data.update(changes)
    home.config_file.write_text(json.dumps(data))
    return home


def _load_error(home: NodeHome) -> str:
    with pytest.raises(ConfigError) as info:
        home.load()
    message = str(info.value)
    assert "\n" not in message and str(home.config_file) in message
    return message


def _error_line(result: Result) -> str:
    assert result.exit_code == 1, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception  # not a traceback
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# --- item 1: values are checked on load ----------------------------------------------------


@pytest.mark.parametrize(("key", "value", "said"), [
    ("snapshot_interval", "100", 'snapshot_interval must be an integer number of blocks, '
                                 '0 or more (0 = no snapshots), got "100" (a string)'),
    ("snapshot_interval", -1, "got -1"),
    ("snapshot_interval", 10.5, "got 10.5"),
    ("snapshot_keep", 0, "snapshot_keep must be an integer, 1 or more, got 0"),
    ("retain_blocks", 99, "retain_blocks must be 0 (keep every block) or an integer number "
                          "of blocks, 100 or more, got 99"),
    ("retain_blocks", -1, "got -1"),
    ("retain_blocks", True, "got true (a boolean)"),
    ("state_max_gib", 0, "state_max_gib must be an integer number of GiB in 1..1048576, "
                         "got 0"),
    ("state_max_gib", (1 << 20) + 1, "in 1..1048576, got 1048577"),
    ("api_port", True, "api_port must be an integer in 1..65535, got true (a boolean)"),
    ("api_port", 0, "api_port must be an integer in 1..65535, got 0"),
    ("api_port", 65554, "got 65554"),
    ("api_port", "26680", 'got "26680" (a string)'),
    ("voter", "yes", 'voter must be true or false, got "yes"'),
    ("voter", 1, "voter must be true or false, got 1"),
    ("voter_interval_s", 0, "voter_interval_s must be a number of seconds above 0"),
    ("voter_interval_s", -1, "got -1"),
    ("voter_interval_s", 10, "at most 5 (half the 10 s heartbeat limit of /ready), got 10"),
    ("voter_interval_s", True, "got true (a boolean)"),
    ("abci_address", "tcp://127.0.0.1:65538", "abci_address must be an address "
                                              "tcp://HOST:PORT with PORT in 1..65535"),
    ("rpc_laddr", "tcp://127.0.0.1:-4", 'got "tcp://127.0.0.1:-4"'),
    ("p2p_laddr", "127.0.0.1:26656", "p2p_laddr must be an address"),
    ("chain_id", "", "chain_id must be a non-empty string"),
    ("db_url", None, "db_url must be a string, got null"),
    ("extra", {"api_rate_limit_per_s": 0}, "extra.api_rate_limit_per_s must be a string"),
    ("extra", [], "extra must be an object of strings"),
])
def test_a_bad_value_is_refused_on_load_naming_it(tmp_path: Path, key: str, value: Any,
                                                  said: str) -> None:
    message = _load_error(_home(tmp_path, **{key: value}))
    assert message.startswith(f"invalid node config {tmp_path / 'home' / 'config.json'}: ")
    assert said in message


def test_good_values_load_and_every_problem_is_named_at_once(tmp_path: Path) -> None:
    config = _home(tmp_path, voter_interval_s=2, snapshot_interval=0, api_port=1,
                   extra={"api_rate_limit_per_s": "0"}).load()
    assert config.voter_interval_s == 2.0 and isinstance(config.voter_interval_s, float)
    assert config.snapshot_interval == 0 and config.api_port == 1
    assert config.retain_blocks == 0  # the default: keep every block
    assert _home(tmp_path / "pruned", retain_blocks=100).load().retain_blocks == 100
    message = _load_error(_home(tmp_path / "two", api_port=-1, snapshot_keep="2"))
    assert "api_port must be" in message and "snapshot_keep must be" in message


def test_unknown_keys_are_named_with_the_closest_known_one(tmp_path: Path) -> None:
    message = _load_error(_home(tmp_path, snapshot_intervall=100))
    assert "unknown key 'snapshot_intervall' (did you mean 'snapshot_interval'?)" in message
    assert "known keys" not in message  # the suggestion is enough
    message = _load_error(_home(tmp_path / "b", colour="red", voter_intervall=1))
    assert "unknown keys 'colour', 'voter_intervall' (did you mean 'voter_interval_s'?)" \
        in message
    assert "known keys: chain_id, moniker," in message


@pytest.mark.parametrize(("text", "said"), [
    ('{"voter": true,', "is not valid JSON (Expecting property name enclosed in double "
                        "quotes at line 1, column 16)"),
    ("", "is not valid JSON"),  # e.g. truncated by an earlier failed write
    ("[1, 2]", "must hold a JSON object of settings, got [1, 2] (a list)"),
])
def test_malformed_json_is_one_clear_error(tmp_path: Path, text: str, said: str) -> None:
    home = _home(tmp_path)
    home.config_file.write_text(text)
    assert said in _load_error(home)


def test_the_voter_interval_limit_derives_from_the_heartbeat_limit_is_alive_uses() -> None:
    default = inspect.signature(is_alive).parameters["max_age_s"].default
    assert default == VOTER_HEARTBEAT_MAX_AGE_S
    assert 0 < VOTER_INTERVAL_MAX_S < VOTER_HEARTBEAT_MAX_AGE_S
    assert not NodeConfig(voter_interval_s=VOTER_INTERVAL_MAX_S).problems()
    assert NodeConfig(voter_interval_s=VOTER_HEARTBEAT_MAX_AGE_S).problems()


def test_save_refuses_a_bad_config_and_writes_nothing(tmp_path: Path) -> None:
    home = NodeHome(tmp_path / "home")
    with pytest.raises(ConfigError, match="api_port must be an integer in 1..65535"):
        home.save(NodeConfig(api_port=65554))
    assert not home.config_file.exists()


@pytest.mark.parametrize("command", [
    ["start"], ["status"], ["search", "port"], ["projection", "rebuild"],
    ["projection", "reindex"], ["gov", "list"],
])
def test_cli_turns_a_bad_config_into_one_line(tmp_path: Path, command: list[str]) -> None:
    home = _home(tmp_path, snapshot_interval="100", snapshot_intervall=5)
    result = CliRunner().invoke(main, [*command, "--home", str(home.root)])
    line = _error_line(result)
    assert line.startswith(f"memledger: error: invalid node config {home.config_file}: ")
    assert "did you mean 'snapshot_interval'?" in line and '"100" (a string)' in line


def test_cli_bad_config_error_is_json_with_json(tmp_path: Path) -> None:
    home = _home(tmp_path)
    home.config_file.write_text("{")
    for command in (["search", "port"], ["projection", "rebuild"]):
        result = CliRunner().invoke(main, [*command, "--home", str(home.root), "--json"])
        doc = json.loads(_error_line(result))
        assert "is not valid JSON" in doc["error"] and doc["name"] == "config_error"


# --- items 2 and 3: atomic, private writes -------------------------------------------------


_FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    from memledger.daemon import cometbft
    from memledger.daemon.home import NodeConfig, NodeHome

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    home = NodeHome(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (120, resource.RLIM_INFINITY))  # disk full
    failed = []
    for what, write in [
        ("save", lambda: home.save(NodeConfig(moniker="renamed"))),
        ("edit_config", lambda: cometbft.edit_config(
            home.cometbft, lambda c: c.__setitem__("moniker", "renamed"))),
        ("write_genesis", lambda: cometbft.write_genesis(
            home.cometbft, {**cometbft.load_genesis(home.cometbft), "x": "y" * 500})),
    ]:
        try:
            write()
        except OSError:
            failed.append(what)
    print(",".join(failed))
""")


def test_a_failed_write_leaves_config_json_and_config_toml_whole(tmp_path: Path) -> None:
    home = NodeHome(tmp_path / "home")
    home.save(NodeConfig())
    (home.cometbft / "config").mkdir(parents=True)
    toml = cometbft.config_path(home.cometbft)
    toml.write_text(tomlkit.dumps({"moniker": "node0", "proxy_app": "tcp://127.0.0.1:26658",
                                   "comment": "x" * 400}))
    cometbft.genesis_path(home.cometbft).write_text(json.dumps({"chain_id": "c" * 200}))
    before = {p: p.read_bytes() for p in (home.config_file, toml,
                                          cometbft.genesis_path(home.cometbft))}
    out = subprocess.run([sys.executable, "-c", _FULL_DISK, str(home.root)], cwd=REPO,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "save,edit_config,write_genesis", out.stderr
    for path, content in before.items():
        assert path.read_bytes() == content, path
    assert home.load().moniker == "node0"
    leftovers = [p.name for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert not leftovers


def test_config_json_is_private_and_the_home_dir_too(tmp_path: Path) -> None:
    home = NodeHome(tmp_path / "new" / "home")
    home.save(NodeConfig(db_url="postgresql+psycopg://me:secret@db/memledger"))
    assert stat.S_IMODE(home.config_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.root.stat().st_mode) == 0o700
    home.config_file.chmod(0o644)  # an older home: the next save makes it private
    home.save(home.load())
    assert stat.S_IMODE(home.config_file.stat().st_mode) == 0o600


def test_edit_config_keeps_the_file_mode_and_the_rest_of_the_file(tmp_path: Path) -> None:
    path = cometbft.config_path(tmp_path)
    path.parent.mkdir()
    path.write_text('# a comment\nmoniker = "a"\n[p2p]\nladdr = "tcp://0.0.0.0:1"\n')
    path.chmod(0o640)
    cometbft.edit_config(tmp_path, lambda c: c.__setitem__("moniker", "b"))
    assert path.read_text() == '# a comment\nmoniker = "b"\n[p2p]\nladdr = "tcp://0.0.0.0:1"\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]


# --- item 4: ports ---------------------------------------------------------------------------


@pytest.mark.parametrize("base", ["65530", "65512", "-5", "0"])
def test_init_refuses_a_base_port_whose_ports_leave_the_range(tmp_path: Path,
                                                              base: str) -> None:
    home = tmp_path / "home"
    result = CliRunner().invoke(main, ["init", "--home", str(home), "--base-port", base])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--base-port'" in result.stderr
    assert "1<=x<=65511" in result.stderr
    assert not (home / "config.json").exists()


def test_inits_highest_base_port_derives_port_65535() -> None:
    option = next(p for p in main.commands["init"].params if p.name == "base_port")
    assert option.type.max + INIT_PORT_SPAN == MAX_PORT  # type: ignore[attr-defined]


def test_testnet_init_refuses_ports_above_65535_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["testnet", "init", "-n", "20", "--base-port", "65000",
                                       "--out", str(tmp_path / "net")])
    line = _error_line(result)
    assert line == ("memledger: error: --base-port: base port 65000 with 20 nodes needs ports "
                    "65000..65632, outside 1..65535 (node i uses base+32*i up to +24); the "
                    "highest base port for 20 nodes is 64903")
    assert not (tmp_path / "net").exists()


def test_port_checks_of_the_layout() -> None:
    assert highest_port(64903, 20) == MAX_PORT
    check_ports(64903, 20)
    with pytest.raises(ValueError, match="65512..65536"):
        node_specs(1, 65512)
    spec = TestnetSpec("c", 65440, node_specs(3, 65440))  # ports up to 65528
    with pytest.raises(ValueError, match="needs ports 65440..65560"):
        spec.next_node()  # `testnet add-node`: a 4th block would end at 65560


# --- item 6: rebuild before the first start --------------------------------------------------


@pytest.mark.parametrize("extra", [[], ["--db-url", "sqlite:///{tmp}/copy.db"]])
def test_projection_rebuild_of_a_node_never_started_says_so(tmp_path: Path,
                                                            extra: list[str]) -> None:
    home = NodeHome(tmp_path / "home")
    home.save(NodeConfig())
    home.state_dir.mkdir(parents=True)  # as `memledger init` leaves it
    args = [a.format(tmp=tmp_path) for a in extra]
    result = CliRunner().invoke(main, ["projection", "rebuild", "--home", str(home.root),
                                       *args])
    line = _error_line(result)
    assert line.startswith("memledger: error: this node has no state yet (start it once: "
                           f"`memledger start --home {home.root}`)")
    again = home.lock()  # the rebuild let go of the home's lock
    assert again is not None
    again.close()
    shutil.rmtree(home.state_dir)
    assert "has no state yet" in _error_line(
        CliRunner().invoke(main, ["projection", "rebuild", "--home", str(home.root), *args]))
