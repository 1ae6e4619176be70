"""Governance CLI against a real single-validator node: params and an upgrade."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memledger.daemon import cometbft
from memledger.sdk.waiting import wait_until
from tests.support.chain import seeded_key
from tests.support.node import NodeRunner, memledger

pytestmark = pytest.mark.cometbft

#: short enough to wait through, long enough to vote in after the old default activation
VOTING_PERIOD = 20
UPGRADE_DELAY = 4


def test_cli_upgrade_activates_and_old_binary_halts(tmp_path: Path, cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id="gov-it", app_version=1)
    home = str(runner.home)
    genesis = cometbft.load_genesis(runner.home / "cometbft")
    genesis["app_state"]["params"] = {"gov_voting_period": VOTING_PERIOD}
    cometbft.write_genesis(runner.home / "cometbft", genesis)
    runner.start("--no-api")
    try:
        out = memledger("gov", "propose", "param", "gov_min_upgrade_delay", str(UPGRADE_DELAY),
                        "--home", home, "--yes", "--json")
        pid = json.loads(out.stdout)["proposal_id"]
        assert pid == "p1"
        memledger("gov", "vote", pid, "yes", "--home", home, "--yes")
        watched = memledger("gov", "watch", pid, "--home", home, "--timeout", "60", "--json")
        assert json.loads(watched.stdout)["status"] == "executed"
        listed = json.loads(memledger("gov", "list", "--home", home, "--json").stdout)
        assert [p["id"] for p in listed] == ["p1"]
        # Too-soon activation is refused with its own code, from the CLI, in one line.
        with runner.rpc() as rpc:
            h = rpc.latest_height()
        refused = memledger("gov", "propose", "upgrade", "v2", "--app-version", "2", "--height",
                            str(h + 1), "--home", home, "--yes", check=False)
        assert refused.returncode == 1 and "code 95" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        out = memledger("gov", "propose", "upgrade", "memledger-v2", "--app-version", "2",
                        "--home", home, "--yes", "--json")
        upgrade_id = json.loads(out.stdout)["proposal_id"]
        shown = json.loads(memledger("gov", "show", upgrade_id, "--home", home, "--json").stdout)
        submitted, voting_end = shown["submit_height"], shown["voting_end"]
        assert voting_end == submitted + VOTING_PERIOD
        # The default activation height leaves the whole voting period: vote past where
        # the old default (latest + delay + 5 <= submitted + delay + 4) put it.
        assert shown["payload"]["activation_height"] > voting_end
        with runner.rpc() as rpc:
            rpc.wait_for_height(submitted + UPGRADE_DELAY + 5, timeout=60)
        memledger("gov", "vote", upgrade_id, "yes", "--home", home, "--yes")
        shown = json.loads(memledger("gov", "show", upgrade_id, "--home", home, "--json").stdout)
        assert min(h for _, h, *_ in shown["votes"].values()) > submitted + UPGRADE_DELAY + 4
        watched = memledger("gov", "watch", upgrade_id, "--home", home, "--timeout", "90",
                            "--json")
        assert json.loads(watched.stdout)["watch_state"] == "activated"
        with runner.rpc() as rpc:
            info = rpc.abci_info()["response"]
            assert int(info["app_version"]) == 2
            h = rpc.latest_height()
            rpc.wait_for_height(h + 1)
            header = rpc.block(h + 1)["block"]["header"]
            assert header["version"]["app"] == "2"
        # The gated rule is live: corroborating a proposed memory is refused under v2.
        from memledger.sdk.txbuilder import TxBuilder

        agent, other = TxBuilder(seeded_key("ga"), "gov-it"), TxBuilder(seeded_key("gb"), "gov-it")
        with runner.rpc() as rpc:
            assert rpc.broadcast_tx_commit(agent.submit(1, "g-1", "under v2 rules")).code == 0
            assert rpc.broadcast_tx_sync(other.corroborate(1, "g-1")).code == 61
    finally:
        runner.stop()
    # Restart as a binary that only knows v1: it halts with the upgrade name.
    runner.start("--no-api", "--app-arg", "--max-app-version=1", wait=False)
    assert runner.wait_exit(timeout=90) != 0
    app_log = (runner.home / "logs" / "app.log").read_text()
    assert "upgrade required: memledger-v2" in app_log
    # Restarted with support, it continues from where it stopped.
    runner.start("--no-api")
    try:
        with runner.rpc() as rpc:
            h = rpc.latest_height()
            rpc.wait_for_height(h + 2, timeout=60)
    finally:
        runner.stop()


def test_cli_calls_off_a_scheduled_upgrade(tmp_path: Path, cometbft_bin: Path) -> None:
    """A passed upgrade with a height nobody meant is called off from the CLI (v9), after
    which another upgrade can be scheduled; before v9 it blocked every later one."""
    runner = NodeRunner(tmp_path / "home", chain_id="gov-cancel", app_version=9)
    home = str(runner.home)
    runner.start("--no-api")
    try:
        with runner.rpc() as rpc:
            far = rpc.latest_height() + 100_000

        def passed(*args: str) -> str:
            out = memledger("gov", "propose", *args, "--home", home, "--yes", "--json")
            pid = str(json.loads(out.stdout)["proposal_id"])
            memledger("gov", "vote", pid, "yes", "--home", home, "--yes")

            def status() -> str:  # `gov watch` would follow an upgrade until it activates
                shown = memledger("gov", "show", pid, "--home", home, "--json").stdout
                return str(json.loads(shown)["status"])
            wait_until(lambda: status() != "open", 30, 0.5, what=f"{pid} to close")
            assert status() == "executed"
            return pid

        upgrade = passed("upgrade", "v10-typo", "--app-version", "10", "--height", str(far))
        blocked = memledger("gov", "propose", "upgrade", "v10", "--app-version", "10",
                            "--home", home, "--yes", check=False)
        assert blocked.returncode == 1
        assert "another upgrade is already scheduled" in blocked.stderr
        wrong = memledger("gov", "propose", "upgrade-cancel", "v10", "--home", home, "--yes",
                          check=False)
        assert wrong.returncode == 1
        assert "the scheduled upgrade is 'v10-typo', not 'v10'" in wrong.stderr
        cancel = passed("upgrade-cancel", "v10-typo", "--title", "wrong height")
        shown = json.loads(memledger("gov", "show", cancel, "--home", home, "--json").stdout)
        assert (shown["kind"], shown["payload"]) == (
            "upgrade_cancel", {"name": "v10-typo", "upgrade_proposal": upgrade})
        # `gov watch` on the upgrade says so at once, where it waited for the activation
        watched = memledger("gov", "watch", upgrade, "--home", home, "--timeout", "20",
                            "--json", check=False)
        assert watched.returncode == 2
        assert json.loads(watched.stdout)["watch_state"] == "called off"
        out = memledger("gov", "propose", "upgrade", "v10", "--app-version", "10",
                        "--home", home, "--yes", "--json")
        assert json.loads(out.stdout)["code"] == 0
    finally:
        runner.stop()


def test_cli_refuses_a_new_validator_that_would_stop_the_chain(tmp_path: Path,
                                                               cometbft_bin: Path) -> None:
    """A key not yet in the set signs nothing: given 1/3 of the power or more it stops the
    chain for good (a proposal to take it out can never be committed). The CLI refuses it,
    names the most it may have, and counts validators added whose nodes do not sign."""
    runner = NodeRunner(tmp_path / "home", chain_id="gov-valset")
    home = str(runner.home)
    runner.start("--no-api")
    try:
        def propose(key: bytes, power: int, *extra: str) -> tuple[int, str, str]:
            done = memledger("gov", "propose", "validator", "--pubkey", key.hex(), "--power",
                             str(power), "--home", home, "--yes", "--json", *extra,
                             check=False)
            return done.returncode, done.stdout, done.stderr

        first, second = (seeded_key(f"valset-{n}").verify_key.encode() for n in (1, 2))
        code, _, err = propose(first, 10)  # the node's own power is 10
        assert code == 1 and err.count("\n") == 1, err
        assert "would hold 10 of 20 power, 1/3 or more" in err and "power 4 or less" in err
        code, out, _ = propose(first, 4)
        assert code == 0
        pid = str(json.loads(out)["proposal_id"])
        memledger("gov", "vote", pid, "yes", "--home", home, "--yes")
        wait_until(lambda: json.loads(memledger("gov", "show", pid, "--home", home, "--json")
                                      .stdout)["status"] == "executed", 30, 0.5,
                   what=f"{pid} to execute")
        # the first one's node does not run: with it, even 1 more is 5 of 15 not signing
        code, _, err = propose(second, 1)
        assert code == 1 and "would hold 5 of 15 power" in err and "or less" not in err, err
        code, out, _ = propose(second, 7, "--force")  # its node runs, says the operator
        assert code == 0 and json.loads(out)["code"] == 0
        with runner.rpc() as rpc:  # 10 of 14 still sign: the chain goes on
            start = rpc.latest_height()
            wait_until(lambda: rpc.latest_height() >= start + 3, 30, 0.5,
                       what="the chain to go on with the 4-power validator offline")
    finally:
        runner.stop()
