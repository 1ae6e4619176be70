"""CLI errors a newcomer meets, without a node (issue 18, points 2, 9 and 13).

Every error is one line on stderr and exit status 1; with --json that line is a JSON
object. Limits are checked before anything is signed or sent, and say the limit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memledger.cli.main import main

CLOSED = "http://127.0.0.1:9"  # nothing listens: a command that reaches the network fails


@pytest.fixture()
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("MEMLEDGER_KEYS_DIR", str(tmp_path / "keys"))
    monkeypatch.setenv("MEMLEDGER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MEMLEDGER_KEY", raising=False)
    return CliRunner()


def _error_line(result: object) -> str:
    stderr = result.stderr  # type: ignore[attr-defined]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return str(lines[0])


def test_json_errors_are_json(runner: CliRunner) -> None:
    result = runner.invoke(main, ["get", "some-id", "--json", "--api", CLOSED])
    assert result.exit_code == 1 and result.stdout == ""
    doc = json.loads(_error_line(result))
    assert doc["name"] == "connection_error" and "no node answers at" in doc["error"]
    plain = runner.invoke(main, ["get", "some-id", "--api", CLOSED])
    assert plain.exit_code == 1
    assert _error_line(plain).startswith(f"memledger: error: no node answers at {CLOSED}")


def test_other_commands_answer_json_errors_too(runner: CliRunner, tmp_path: Path) -> None:
    rebuild = runner.invoke(main, ["projection", "rebuild", "--home", str(tmp_path / "none"),
                                   "--json"])
    assert rebuild.exit_code == 1
    assert "no memledger node at" in json.loads(_error_line(rebuild))["error"]
    status = runner.invoke(main, ["testnet", "status", str(tmp_path / "nonet"), "--json"])
    assert status.exit_code == 1
    assert "no test net at" in json.loads(_error_line(status))["error"]


@pytest.mark.parametrize("index", ["2", "-1"])
def test_bench_load_refuses_a_node_index_the_net_lacks(runner: CliRunner, tmp_path: Path,
                                                      index: str) -> None:
    """--node 2 of a 2-node net failed with "list index out of range", and --node -1 put
    the load on its last node."""
    from memledger.testnet.net import Testnet

    net = Testnet.create(tmp_path / "net", 2, voter=False)
    result = runner.invoke(main, ["bench", "load", "--net", str(net.root), "--node", "0",
                                  "--node", index, "--duration", "1"])
    assert result.exit_code == 1
    assert _error_line(result) == (f"memledger: error: --node {index}: {net.root} has "
                                   "nodes 0..1")


@pytest.mark.parametrize(("option", "value"), [
    ("--duration", "-5"), ("--duration", "0"), ("--settle", "-1"), ("--rate", "0"),
    ("--content-bytes", "-1"),
    # nan and inf pass a FloatRange's bounds: int(inf) was a traceback, nan a failed run
    ("--duration", "inf"), ("--duration", "nan"), ("--rate", "inf"), ("--rate", "nan"),
    ("--settle", "nan"), ("--settle", "inf")])
def test_bench_load_refuses_a_negative_or_empty_span(runner: CliRunner, option: str,
                                                     value: str) -> None:
    """A negative --duration or --settle ran no load and reported it as a result."""
    result = runner.invoke(main, ["bench", "load", "--rpc", CLOSED, option, value])
    assert result.exit_code == 2 and f"'{option}'" in result.output


def test_oversized_content_is_refused_before_sending_naming_the_limit(
        runner: CliRunner) -> None:
    assert runner.invoke(main, ["keys", "new", "alice"]).exit_code == 0
    big = "x" * (2 << 20)  # 2 MiB: as a request body it would be ~2.8 MB of base64 JSON
    result = runner.invoke(main, ["submit", "-", "--key", "alice", "--api", CLOSED],
                           input=big)
    assert result.exit_code == 1
    line = _error_line(result)
    assert "content_too_large (code 33): content is 2097152 bytes" in line
    assert "at most 524288 bytes (512 KiB)" in line
    assert "request body" not in line and "no node answers" not in line


def test_missing_default_key_says_to_pass_key(runner: CliRunner) -> None:
    result = runner.invoke(main, ["submit", "hello world", "--api", CLOSED])
    assert result.exit_code == 1
    assert "no --key given and no default key" in _error_line(result)
    # co-commit needs no default key: its first --coauthor submits.
    for name in ("alice", "bob"):
        assert runner.invoke(main, ["keys", "new", name]).exit_code == 0
    cocommit = runner.invoke(main, ["co-commit", "We agreed", "--coauthor", "alice",
                                    "--coauthor", "bob", "--api", CLOSED])
    assert cocommit.exit_code == 1
    assert "no node answers" in _error_line(cocommit)  # got as far as the network


@pytest.mark.parametrize(("text", "says"), [
    ('{"genesis_time": "2026-01-01T00:00:00Z", "validators": []}', "genesis has no chain_id"),
    ("nope", "cannot read genesis"),
    ("[]", "genesis is not a JSON object"),
    ('{"chain_id": "c", "genesis_time": "2026-01-01T00:00:00Z", "initial_height": "x1"}',
     "initial_height is not a number"),
])
def test_a_malformed_genesis_for_verify_is_one_line(runner: CliRunner, tmp_path: Path,
                                                     text: str, says: str) -> None:
    genesis = tmp_path / "genesis.json"
    genesis.write_text(text)
    result = runner.invoke(main, ["get", "m1", "--verify", "--genesis", str(genesis),
                                  "--api", CLOSED])
    assert result.exit_code == 3, result.output
    line = _error_line(result)
    assert says in line and "verification failed" in line  # it was a KeyError traceback


def test_content_that_is_not_text_is_one_line_naming_where(runner: CliRunner) -> None:
    """Command-line bytes that are not UTF-8 reach Python as lone surrogates."""
    assert runner.invoke(main, ["keys", "new", "alice"]).exit_code == 0
    for command in (["submit", "caf\udce9 au lait", "--key", "alice"],
                    ["co-commit", "caf\udce9 au lait", "--coauthor", "alice",
                     "--coauthor", "alice"]):
        result = runner.invoke(main, [*command, "--api", CLOSED])
        assert result.exit_code == 1
        line = _error_line(result)
        assert "invalid_content" in line and "U+DCE9 at character 3" in line, line


def test_a_mistyped_key_names_the_keys_that_exist(runner: CliRunner) -> None:
    """`--key alcie` was answered with how to create a key named alcie (issue 34)."""
    for name in ("alice", "bob"):
        assert runner.invoke(main, ["keys", "new", name]).exit_code == 0
    for command in (["submit", "hello world", "--key", "alcie"], ["keys", "show", "alcie"]):
        result = runner.invoke(main, [*command, "--api", CLOSED] if command[0] == "submit"
                               else command)
        assert result.exit_code == 1
        line = _error_line(result)
        assert "no key named 'alcie'" in line and "did you mean 'alice'?" in line, line
        assert "keys there: alice, bob" in line, line
        assert "`memledger keys new NAME`" in line and "keys new alcie" not in line, line


def test_an_unknown_key_far_from_any_suggests_none(runner: CliRunner) -> None:
    assert runner.invoke(main, ["keys", "new", "alice"]).exit_code == 0
    line = _error_line(runner.invoke(main, ["keys", "show", "zebra"]))
    assert "no key named 'zebra'" in line and "did you mean" not in line
    assert "keys there: alice" in line


def test_an_unknown_key_in_an_empty_keys_dir_says_how_to_make_it(runner: CliRunner,
                                                                tmp_path: Path) -> None:
    line = _error_line(runner.invoke(main, ["keys", "show", "alice"]))
    assert line == (f"memledger: error: no key named 'alice': the keys dir {tmp_path / 'keys'} "
                    "holds no keys yet; create one with `memledger keys new alice`")


def test_missing_default_key_names_the_keys_there(runner: CliRunner) -> None:
    assert runner.invoke(main, ["keys", "new", "alice"]).exit_code == 0
    line = _error_line(runner.invoke(main, ["submit", "hello world", "--api", CLOSED]))
    assert "no --key given and no default key" in line and "keys there: alice" in line


def test_a_stopped_node_says_how_to_start_one(runner: CliRunner, tmp_path: Path) -> None:
    """A stopped node was `cannot reach ...: Connection refused`, nothing more."""
    from memledger.daemon.home import NodeConfig, NodeHome

    home = tmp_path / "home"
    NodeHome(home).save(NodeConfig(api_port=9))  # an initialised node that is not running
    for command in (["status"], ["get", "m1"], ["search", "x"]):
        line = _error_line(runner.invoke(main, [*command, "--home", str(home)]))
        assert line.startswith(f"memledger: error: no node answers at {CLOSED} "
                               "(ConnectError: "), line
        assert line.endswith(f": start it with `memledger start --home {home}` (or `make run` "
                             "in a source checkout), or pass --api with a running node's "
                             "address"), line


def test_a_stopped_node_without_a_home_says_to_init_one(runner: CliRunner,
                                                         tmp_path: Path) -> None:
    result = runner.invoke(main, ["status", "--api", CLOSED, "--json"])
    doc = json.loads(_error_line(result))
    assert doc["name"] == "connection_error"
    home = tmp_path / "home"
    assert doc["error"].startswith(f"no node answers at {CLOSED} (ConnectError: ")
    assert (f"set one up with `memledger init --home {home}` then `memledger start --home "
            f"{home}` (or `make run` in a source checkout)") in doc["error"]


@pytest.mark.parametrize(("tags", "says"), [
    (["t" * 65], "invalid_tag (code 37): tag 'ttttt"),
    (["same", "same"], "invalid_tag (code 37): tag 'same' is given twice"),
    ([f"t{i}" for i in range(33)], "too_many_tags (code 36): 33 tags"),
])
def test_tags_past_the_limits_are_refused_before_sending(runner: CliRunner, tags: list[str],
                                                         says: str) -> None:
    """Like content, tags are checked before anything is signed, naming the limits."""
    assert runner.invoke(main, ["keys", "new", "alice"]).exit_code == 0
    flags = [arg for tag in tags for arg in ("--tag", tag)]
    for command in (["submit", "Tagged content", "--key", "alice"],
                    ["co-commit", "Tagged content", "--coauthor", "alice", "--coauthor",
                     "alice"]):
        result = runner.invoke(main, [*command, *flags, "--api", CLOSED])
        assert result.exit_code == 1
        line = _error_line(result)
        assert says in line and "no node answers" not in line, line
        assert line.endswith("A memory takes at most 32 tags, distinct, each 1 to 64 bytes "
                             "of UTF-8 of any characters but NUL (U+0000)"), line


def test_a_key_named_by_the_environment_says_so(runner: CliRunner,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale $MEMLEDGER_KEY was answered as if --key had been typed."""
    assert runner.invoke(main, ["keys", "new", "alice"]).exit_code == 0
    monkeypatch.setenv("MEMLEDGER_KEY", "alcie")
    line = _error_line(runner.invoke(main, ["submit", "hello world", "--api", CLOSED]))
    assert "no key named 'alcie'" in line and "(did you mean 'alice'?)" in line
    assert line.endswith("(the name came from $MEMLEDGER_KEY)"), line


def test_a_new_key_over_an_existing_one_says_what_to_do(runner: CliRunner,
                                                        tmp_path: Path) -> None:
    assert runner.invoke(main, ["keys", "new", "alice"]).exit_code == 0
    result = runner.invoke(main, ["keys", "new", "alice"])
    assert result.exit_code == 1
    assert _error_line(result) == (
        f"memledger: error: key alice already exists at {tmp_path / 'keys' / 'alice.json'}: "
        "use it as --key alice, or pass --force to replace it (its identity is lost for "
        "good)")


def test_a_remote_node_that_does_not_answer_is_not_told_to_start_here(tmp_path: Path) -> None:
    """Starting a node on this machine would not bring up one at another address."""
    import click

    from memledger.cli.root import no_node_answers

    ctx = click.Context(click.Command("status"))
    ctx.params = {"api": "http://10.1.2.3:26680", "home": tmp_path}
    with ctx.scope():
        remote = no_node_answers("http://10.1.2.3:26680", "ConnectError: refused")
        local = no_node_answers("http://localhost:26680", "ConnectError: refused")
    assert remote == ("no node answers at http://10.1.2.3:26680 (ConnectError: refused): is "
                      "the node there running? Else pass --api with a running node's "
                      "address")
    assert "memledger init --home" in local and "memledger start" not in remote
