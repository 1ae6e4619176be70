"""`memledger gov ...` errors without a node: every command ends in one line, never a
traceback (an unreachable RPC raised httpx.ConnectError; numbers outside a uint64 raised
protobuf's ValueError), and the default upgrade activation height leaves the whole voting
period before it."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from nacl.signing import SigningKey

from memledger.cli import gov as cli_gov
from memledger.cli.main import main
from memledger.daemon.home import NodeConfig, NodeHome
from tests.support.http_server import serving

CLOSED_PORT = 9  # nothing listens: a command that reaches the network fails
KEY = "ab" * 32
U64_MAX = str((1 << 64) - 1)
U64_OVER = str(1 << 64)

#: one invocation per gov command: each must reach the network (the node is down)
NETWORK_COMMANDS: dict[str, list[str]] = {
    "propose validator": ["propose", "validator", "--pubkey", KEY, "--power", "5"],
    "propose scope": ["propose", "scope", "create", "s1", "--domain", "d", "--member",
                      f"{KEY}:3"],
    "propose param": ["propose", "param", "gov_voting_period", "50"],
    "propose upgrade": ["propose", "upgrade", "v9", "--app-version", "9"],
    "propose upgrade-cancel": ["propose", "upgrade-cancel", "v9"],
    "vote": ["vote", "p1", "yes"],
    "cancel": ["cancel", "p1"],
    "list": ["list"],
    "show": ["show", "p1"],
    "watch": ["watch", "p1", "--timeout", "2"],
}


def _make_home(root: Path, rpc_port: int) -> Path:
    """A node home with config.json and a validator key, as `memledger init` leaves it."""
    NodeHome(root).save(NodeConfig(rpc_laddr=f"tcp://127.0.0.1:{rpc_port}"))
    key = SigningKey(b"\x07" * 32)
    config = root / "cometbft" / "config"
    config.mkdir(parents=True)
    raw = bytes(key) + bytes(key.verify_key)
    (config / "priv_validator_key.json").write_text(json.dumps(
        {"priv_key": {"type": "tendermint/PrivKeyEd25519",
                      "value": base64.b64encode(raw).decode()}}))
    return root


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    return _make_home(tmp_path / "home", CLOSED_PORT)


def _gov(home: Path, args: list[str], *extra: str) -> Result:
    yes = ["--yes"] if args[0] in ("propose", "vote", "cancel") else []
    return CliRunner().invoke(main, ["gov", *args, "--home", str(home), *yes, *extra])


def _error_line(result: Result) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def _leaf_commands(group: click.Group, prefix: str = "") -> set[str]:
    found: set[str] = set()
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found |= _leaf_commands(command, f"{prefix}{name} ")
        else:
            found.add(prefix + name)
    return found


def test_every_gov_command_is_exercised_below() -> None:
    assert _leaf_commands(cli_gov.gov) == set(NETWORK_COMMANDS)


@pytest.mark.parametrize("name", sorted(NETWORK_COMMANDS))
def test_node_down_is_one_error_line(home: Path, name: str) -> None:
    result = _gov(home, NETWORK_COMMANDS[name])
    assert result.exit_code == 1
    assert _error_line(result).startswith(
        f"memledger: error: no node answers at http://127.0.0.1:{CLOSED_PORT} (ConnectError")
    assert _error_line(result).endswith(
        f": start it with `memledger start --home {home}` (or `make run` in a source "
        "checkout), or pass --rpc with a running node's address")


@pytest.mark.parametrize("name", sorted(NETWORK_COMMANDS))
def test_node_down_with_json_is_a_json_error(home: Path, name: str) -> None:
    """Every gov command takes --json (`gov cancel` refused it as a usage error)."""
    result = _gov(home, NETWORK_COMMANDS[name], "--json")
    assert result.exit_code == 1 and result.stdout == ""
    doc = json.loads(_error_line(result))
    assert doc["name"] == "connection_error" and "no node answers at" in doc["error"]


@pytest.mark.parametrize("args, option", [
    (["propose", "validator", "--pubkey", KEY, "--power", "-1"], "--power"),
    (["propose", "validator", "--pubkey", KEY, "--power", U64_OVER], "--power"),
    (["propose", "upgrade", "v9", "--app-version", "-3", "--height", "100"], "--app-version"),
    (["propose", "upgrade", "v9", "--app-version", U64_OVER], "--app-version"),
    (["propose", "upgrade", "v9", "--app-version", "9", "--height", "-1"], "--height"),
    (["propose", "upgrade", "v9", "--app-version", "9", "--height", U64_OVER], "--height"),
    (["propose", "param", "gov_voting_period", U64_OVER], "VALUE"),
])
def test_numbers_outside_uint64_are_refused_by_name(home: Path, args: list[str],
                                                    option: str) -> None:
    result = _gov(home, args)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.stderr
    assert f"0<=x<={U64_MAX}" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("member, says", [
    (f"{KEY}:99999999999999999999999", f"weight 99999999999999999999999 is out of range: "
                                       f"at most {U64_MAX}"),
    (f"{KEY}:{U64_OVER}", "is out of range"),
    (f"{KEY}:{'9' * 5000}", "is out of range"),  # int() refuses over 4300 digits
    (f"{KEY}:-1", "--member must be KEY:WEIGHT"),
    (f"{KEY}:\u00b2", "--member must be KEY:WEIGHT"),  # isdigit() but not int()-able
    (f"{KEY}", "--member must be KEY:WEIGHT"),
])
def test_member_weight_outside_uint64_is_one_line(home: Path, member: str, says: str) -> None:
    result = _gov(home, ["propose", "scope", "create", "s1", "--domain", "d",
                         "--member", member])
    assert result.exit_code == 1
    assert says in _error_line(result)


def test_the_largest_uint64_values_are_taken(home: Path) -> None:
    """The ranges are exact: 2**64-1 gets as far as the network."""
    for args in (["propose", "validator", "--pubkey", KEY, "--power", U64_MAX],
                 ["propose", "scope", "create", "s1", "--domain", "d", "--member",
                  f"{KEY}:{U64_MAX}"],
                 ["propose", "upgrade", "v9", "--app-version", U64_MAX, "--height", U64_MAX]):
        result = _gov(home, args)
        assert result.exit_code == 1
        assert "no node answers at" in _error_line(result)


def test_an_unreadable_validator_key_is_one_line(home: Path) -> None:
    (home / "cometbft" / "config" / "priv_validator_key.json").unlink()
    for args in (NETWORK_COMMANDS["vote"], NETWORK_COMMANDS["propose validator"]):
        result = _gov(home, args)
        assert result.exit_code == 1
        assert _error_line(result).startswith(
            f"memledger: error: cannot load the validator key of {home}: ")


class _NotRpc(BaseHTTPRequestHandler):
    """An HTTP server that is not a CometBFT RPC: /json answers JSON, anything else 404."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/json":
            body, status = b'{"type": "about:blank", "status": 404}', 200
        else:
            body, status = b"<html>not here</html>", 404
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def not_rpc() -> Iterator[str]:
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _NotRpc)) as url:
        yield url


def test_an_address_that_is_no_rpc_is_one_line(home: Path, not_rpc: str) -> None:
    """E.g. the REST API's port given as --rpc: it raised KeyError or JSONDecodeError."""
    answered_json = _gov(home, ["list", "--rpc", f"{not_rpc}/json"])
    assert answered_json.exit_code == 1
    assert "not a JSON-RPC answer" in _error_line(answered_json)
    answered_404 = _gov(home, ["show", "p1", "--rpc", f"{not_rpc}/nothing"])
    assert answered_404.exit_code == 1
    assert _error_line(answered_404) == (
        f"memledger: error: {not_rpc}/nothing answered HTTP 404 (is it a CometBFT RPC "
        "address?)")


class _Height:
    """Stands in for the RPC client: only the latest height is asked."""

    def __init__(self, height: int) -> None:
        self.height = height

    def latest_height(self) -> int:
        return self.height


@pytest.mark.parametrize("params, expected", [
    ({"gov_voting_period": 100, "gov_min_upgrade_delay": 20}, 1000 + 100 + 10),
    ({"gov_voting_period": 5, "gov_min_upgrade_delay": 30}, 1000 + 30 + 10),
    ({"gov_voting_period": 40, "gov_min_upgrade_delay": 40}, 1000 + 40 + 10),
    (None, 1000 + 100 + 10),  # no params record yet: the defaults
])
def test_default_activation_height_leaves_the_whole_voting_period(
        home: Path, monkeypatch: pytest.MonkeyPatch, params: dict[str, int] | None,
        expected: int) -> None:
    """Votes count until voting_end = submit height + gov_voting_period, and an upgrade
    that passes at or after its activation height fails: the default was latest +
    gov_min_upgrade_delay + 5 (1025 at the defaults), ~75 blocks inside the voting
    period."""
    ctx = cli_gov.GovContext(home, None)
    monkeypatch.setattr(ctx, "record", lambda key: params if key == b"sys/params" else None)
    monkeypatch.setattr(ctx, "rpc", _Height(1000))
    activation = ctx.default_activation_height()
    assert activation == expected
    period = (params or {}).get("gov_voting_period", 100)
    # Landing up to the margin's blocks late, a proposal still closes before activation.
    latest_submit = 1000 + cli_gov.UPGRADE_MARGIN_BLOCKS - 1
    assert activation > latest_submit + period


def test_upgrade_help_says_the_default_height() -> None:
    result = CliRunner().invoke(main, ["gov", "propose", "upgrade", "--help"],
                                terminal_width=200)
    assert "gov_voting_period" in result.stdout and "gov_min_upgrade_delay" in result.stdout


def test_watch_help_says_its_exit_status() -> None:
    """A proposal that closed without executing ended the watch with status 2, which
    neither --help nor the README said."""
    result = CliRunner().invoke(main, ["gov", "watch", "--help"], terminal_width=200)
    assert "Exit status 0 when it executed" in result.stdout
    assert "2 when it closed otherwise" in result.stdout


class _Chain:
    """What `gov watch` reads once an upgrade's plan is gone: the proposals."""

    def __init__(self, proposals: list[dict[str, Any]]) -> None:
        self._proposals = proposals

    def record(self, key: bytes) -> None:
        assert key == b"sys/upgrade"
        return None  # no plan scheduled

    def proposals(self) -> list[dict[str, Any]]:
        return self._proposals


UPGRADE_P1: dict[str, Any] = {"id": "p1", "kind": "upgrade", "status": "executed",
              "payload": {"name": "v10", "app_version": 10, "activation_height": 10_000}}


def test_watch_tells_a_called_off_upgrade_from_an_activated_one() -> None:
    """Judged by the app version, p1 called off by p2 read `activated` once p3, a later
    upgrade to the same version, had activated."""
    from memledger.cli.gov import _scheduled_upgrade_state

    cancel = {"id": "p2", "kind": "upgrade_cancel", "status": "executed",
              "payload": {"name": "v10", "upgrade_proposal": "p1"}}
    again = {**UPGRADE_P1, "id": "p3"}
    chain = _Chain([UPGRADE_P1, cancel, again])
    assert _scheduled_upgrade_state(chain, UPGRADE_P1) == "called off"  # type: ignore[arg-type]
    assert _scheduled_upgrade_state(chain, again) == "activated"  # type: ignore[arg-type]
    failed = {**cancel, "status": "failed"}
    assert _scheduled_upgrade_state(_Chain([UPGRADE_P1, failed]),  # type: ignore[arg-type]
                                    UPGRADE_P1) == "activated"


def test_list_shows_when_an_upgrades_votes_end() -> None:
    """From v8 an upgrade takes votes until the block before its activation height, not
    to the end of its voting period: `gov list` said ends@156 of one that activates at
    76, and it expired at 75 while the list still showed it taking votes."""
    from memledger.cli.gov import _line

    upgrade = {"id": "p2", "status": "open", "kind": "upgrade", "votes": {},
               "voting_end": 156, "payload": {"name": "u9", "app_version": 9,
                                              "activation_height": 76}}
    assert " ends@75 " in _line(upgrade, 8)
    assert " ends@156 " in _line(upgrade, 7)  # before v8 votes counted to the end
    param = {**upgrade, "kind": "param", "payload": {"key": "nonce_window", "value": 9}}
    assert " ends@156 " in _line(param, 8)


@pytest.mark.parametrize(("powers", "signing", "power", "stops", "most"), [
    ({"aa": 10}, {"aa"}, 4, False, None), ({"aa": 10}, {"aa"}, 5, True, 4),
    ({"aa": 10}, {"aa"}, 10, True, 4),
    ({"aa": 10, "bb": 10, "cc": 10}, {"aa", "bb", "cc"}, 14, False, None),
    ({"aa": 10, "bb": 10, "cc": 10}, {"aa", "bb", "cc"}, 15, True, 14),
    ({"aa": 1}, {"aa"}, 1, True, None),  # a one-power set can take no new key
    ({"aa": 10, KEY: 1}, {"aa", KEY}, 100, False, None),  # a signing member grows
    ({"aa": 10, KEY: 4}, {"aa"}, 4, False, None),  # not signing, unchanged: 10 of 14 sign
    ({"aa": 10, KEY: 4}, {"aa"}, 5, True, None),  # raising one that does not sign
    ({"aa": 10, "bb": 4}, {"aa"}, 4, True, None),  # two small additions, neither signing
    ({"aa": 10, "bb": 10, "cc": 10, "dd": 10}, {"aa", "bb", "cc"}, 0, False, None),
    # one of four down: removing a live one leaves 2 of 3 signing, not more than 2/3
    ({"aa": 10, "bb": 10, "cc": 10, KEY: 10}, {"aa", "bb", KEY}, 0, True, None),
])
def test_a_change_leaving_a_third_of_the_power_not_signing_would_stop_the_chain(
        powers: dict[str, int], signing: set[str], power: int, stops: bool,
        most: int | None) -> None:
    why = cli_gov.validator_change_stops_chain(powers, signing, KEY, power)
    assert (why is not None) == stops, why
    if why is not None:
        assert "--force" in why and "1/3 or more" in why
        assert (f"propose power {most} or less" in why) == (most is not None), why


class _Replay(BaseHTTPRequestHandler):
    """A JSON-RPC endpoint that answers broadcast_tx_commit with `check_tx` (set below):
    a real engine's CheckTx answer, replayed."""

    check_tx: dict[str, Any] = {}

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {
            "check_tx": self.check_tx, "tx_result": {}, "hash": "AB" * 32,
            "height": "0"}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_refused_gov_tx_names_its_code_and_what_to_do(home: Path, tmp_path: Path) -> None:
    """`proposal rejected (code 90): ...` gave a bare number, and no way out of it."""
    from memledger.protocol.codes import NEXT_STEPS, Code
    from memledger.sdk.txbuilder import validator_proposal
    from tests.support.chain import LocalChain, seeded_key

    chain = LocalChain(tmp_path / "chain")
    try:
        outsider = seeded_key("not-a-validator")
        checked = chain.check(chain.builder(outsider).propose(
            1, validator_proposal(bytes.fromhex(KEY), 5, "")))
    finally:
        chain.close()
    assert checked.code == int(Code.GOV_NOT_VALIDATOR)
    _Replay.check_tx = {"code": checked.code, "log": checked.log}
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Replay)) as url:
        propose = ["propose", "validator", "--pubkey", KEY, "--power", "5", "--force",
                   "--rpc", url]
        line = _error_line(_gov(home, propose))
        doc = json.loads(_error_line(_gov(home, [*propose, "--json"])))
    assert line == (f"memledger: error: proposal rejected: gov_not_validator (code 90): "
                    f"{checked.log}. {NEXT_STEPS[Code.GOV_NOT_VALIDATOR]}")
    assert "memledger gov propose validator --pubkey KEY --power N" in line
    assert doc["name"] == "gov_not_validator" and doc["code"] == 90
