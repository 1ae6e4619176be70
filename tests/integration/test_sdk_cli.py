"""SDK and CLI end to end on a real node with the auto-voter, on SQLite and PostgreSQL.

Each backend gets one node for the module: the SDK and the CLI each submit a memory, the
auto-voter commits it, full-text search finds it, it reads back. The last test kills
cometbft under the supervisor and restarts the node: nothing committed is lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memledger.sdk import Client, MemLedgerError
from memledger.sdk.keys import Agent
from memledger.sdk.waiting import wait_until
from tests.support.node import REPO, NodeRunner, wait_api_ready
from tests.support.postgres import create_database, drop_database, unique_db_name

pytestmark = pytest.mark.cometbft
CHAIN = "memledger-sdk"


class Env:
    """One node plus a keys dir for the CLI, shared by the module's tests."""

    def __init__(self, node: NodeRunner, keys: Path) -> None:
        self.node = node
        self.keys = keys
        self.committed: list[str] = []

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PYTHONPATH=str(REPO), MEMLEDGER_KEYS_DIR=str(self.keys),
                   MEMLEDGER_HOME=str(self.node.home))
        out = subprocess.run([sys.executable, "-m", "memledger.cli.main", *args],
                             capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
        if check:
            assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
        return out

    def cli_json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "--json").stdout)

    def cli_submit_committed(self, memory_id: str, content: str, key: str) -> None:
        """Make key ``key``, submit ``content`` as ``memory_id`` and wait for the voter: the
        state a test builds for itself instead of relying on an earlier test."""
        self.cli("keys", "new", key)
        receipt = self.cli_json("submit", content, "--id", memory_id, "--key", key)
        assert receipt["status"] == "included" and receipt["memory_id"] == memory_id
        wait_until(lambda: self.cli_json("get", memory_id)["status"] == "committed", 30, 0.2,
                   what=f"the voter to commit {memory_id}")


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres",
                                                               marks=pytest.mark.postgres)])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        cometbft_bin: Path) -> Iterator[Env]:
    db_url, pg, dbname = "", "", ""
    if request.param == "postgres":
        pg = request.getfixturevalue("postgres_url")
        dbname = unique_db_name("sdk")
        db_url = create_database(pg, dbname)
    root = tmp_path_factory.mktemp(f"sdk-{request.param}")
    runner = NodeRunner(root / "home", chain_id=CHAIN, db_url=db_url, voter=True)
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        yield Env(runner, root / "keys")
    finally:
        runner.stop()
        if pg:
            drop_database(pg, dbname)


def _status(ml: Client, memory_id: str) -> str:
    return ml.get_memory(memory_id).status


def test_sdk_submit_voter_commits_search_finds(env: Env) -> None:
    agent = Agent.generate("sdk")
    with Client(env.node.api_url, key=agent) as ml:
        receipt = ml.submit("sdk-1", "Otters hold hands while sleeping so they do not drift",
                            type="fact", confidence=0.95, tags=["animals", "sleep"])
        assert receipt.committed and receipt.height and receipt.memory_id == "sdk-1"
        wait_until(lambda: _status(ml, "sdk-1") == "committed", 30, 0.2, what="voter commit")
        found = [m.id for m in ml.search("otters drifting")]
        assert found == ["sdk-1"]
        memory = ml.get_memory("sdk-1")
        assert memory.author == agent.public_key_hex and memory.tags == ["animals", "sleep"]
        assert memory.confidence_ppm == 950_000
        assert [v.decision for v in ml.votes("sdk-1")] == ["accept"]
        assert ml.account().last_nonce > 0
        assert ml.status().chain_id == CHAIN
        # A retry of the same write after it was decided (its first answer lost) is the
        # same write, not a failure: the receipt of the tx that wrote it.
        again = ml.submit("sdk-1", "Otters hold hands while sleeping so they do not drift",
                          type="fact", confidence=0.95, tags=["sleep", "animals"])
        assert again.included and again.hash == receipt.hash and again.memory_status == \
            "committed", again
        with pytest.raises(MemLedgerError) as refused:  # another write under that id
            ml.submit("sdk-1", "Otters never hold hands", confidence=0.95,
                      tags=["animals", "sleep"])
        assert refused.value.name == "memory_terminal"
    env.committed.append("sdk-1")


def test_cli_keys_submit_search_get(env: Env) -> None:
    created = env.cli_json("keys", "new", "alice")
    assert len(created["public_key"]) == 64
    path = Path(created["path"])
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert env.cli("keys", "show", "alice").stdout.strip() == created["public_key"]
    receipt = env.cli_json("submit", "Badgers dig setts with many tunnel entrances",
                           "--id", "cli-1", "--tag", "animals", "--type", "observation",
                           "--key", "alice")
    assert receipt["status"] == "included" and receipt["memory_id"] == "cli-1"
    wait_until(lambda: env.cli_json("get", "cli-1")["status"] == "committed", 30, 0.2,
               what="voter commit via CLI")
    hits = env.cli_json("search", "badger tunnels")
    assert [m["id"] for m in hits] == ["cli-1"]
    human = env.cli("search", "badger tunnels").stdout
    assert "cli-1" in human and "[committed]" in human
    shown = env.cli("get", "cli-1").stdout
    assert "status:     committed" in shown and "Badgers dig setts" in shown
    status = env.cli_json("status")
    assert status["chain_id"] == CHAIN and status["height"] > 0
    env.committed.append("cli-1")


def test_cli_disputes_and_cocommit(env: Env) -> None:
    # Its own keys and memory (it must pass alone, not only after the keys/submit test).
    env.cli_submit_committed("dispute-1", "Herons stand motionless in the shallows to fish",
                             key="carol")
    env.cli("keys", "new", "dave")
    # dave corroborates carol's memory; carol (the author, shared domain) challenges it:
    # one eligible corroborator, so the memory is challenged rather than deprecated.
    assert env.cli_json("corroborate", "dispute-1", "--key", "dave")["status"] == "included"
    assert env.cli_json("challenge", "dispute-1", "--reason", "seen only once",
                        "--key", "carol")["status"] == "included"
    assert env.cli_json("get", "dispute-1")["status"] == "challenged"
    assert env.cli_json("search", "herons shallows") == []  # disputed: hidden by default
    assert [m["id"] for m in env.cli_json("search", "herons shallows", "--include-disputed")] \
        == ["dispute-1"]
    assert env.cli_json("reinstate", "dispute-1", "--key", "dave")["status"] == "included"
    assert env.cli_json("get", "dispute-1")["status"] == "committed"
    env.committed.append("dispute-1")
    receipt = env.cli_json("co-commit", "Carol and Dave agree the river floods in spring",
                           "--key", "carol", "--coauthor", "dave", "--tag", "joint")
    memory = env.cli_json("get", receipt["memory_id"])
    assert memory["status"] == "committed" and len(memory["coauthors"]) == 2
    env.committed.append(receipt["memory_id"])


def test_cli_errors_are_one_line(env: Env) -> None:
    env.cli_submit_committed("errors-1", "Wrens sing loudest for their size", key="erin")
    out = env.cli("get", "no-such-memory", check=False)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        "memledger: error: not_found: no memory with id 'no-such-memory'"]
    out = env.cli("vote", "no-such-memory", "accept", "--validator", check=False)
    assert out.returncode == 1 and "memory_not_found (code 50)" in out.stderr
    out = env.cli("vote", "errors-1", "accept", "--key", "erin", check=False)
    assert out.returncode == 1 and "not_a_validator (code 51)" in out.stderr
    # ...and says who votes and how a key becomes a validator (issue 34)
    assert "Only validators vote on a memory" in out.stderr
    assert "`memledger gov propose validator --pubkey KEY --power N`" in out.stderr
    out = env.cli("submit", "Tagged too long", "--key", "erin", "--tag", "t" * 65,
                  check=False)
    assert out.returncode == 1 and "invalid_tag (code 37)" in out.stderr
    assert "at most 32 tags, distinct, each 1 to 64 bytes of UTF-8" in out.stderr
    out = env.cli("vote", "errors-1", "reject", "--validator", "--reason", "x" * 4097,
                  check=False)
    assert out.returncode == 1 and "vote_reason_too_long (code 56)" in out.stderr
    out = env.cli("submit", "x", "--key", "nobody", check=False)
    assert out.returncode == 1 and "no key named 'nobody'" in out.stderr
    out = env.cli("status", "--api", "http://127.0.0.1:9", check=False)
    assert out.returncode == 1 and "no node answers at http://127.0.0.1:9" in out.stderr
    assert "memledger start --home" in out.stderr
    for result in (out,):
        assert "Traceback" not in result.stderr


def test_get_verify_shows_why_as_plain_get_does(env: Env) -> None:
    """`get --verify` dropped the `why:` line plain `get` shows (issue 34)."""
    env.cli_submit_committed("why-1", "Swifts sleep on the wing for months", key="fay")
    plain = env.cli("get", "why-1").stdout
    why = next(line for line in plain.splitlines() if line.startswith("why:"))
    assert why.startswith("why:        accepted by validator votes"), plain
    verified = env.cli("get", "why-1", "--verify").stdout
    assert why in verified.splitlines(), verified
    assert "verified: committed state at height" in verified
    assert env.cli_json("get", "why-1", "--verify")["status_reason"] == why[12:]


def test_list_views_mark_cut_content(env: Env) -> None:
    """`search` and `recall` cut content at 60 characters without a mark (issue 34)."""
    content = ("Albatrosses can glide for hours without a single wingbeat, riding the wind "
               "over the waves")
    env.cli_submit_committed("long-1", content, key="gus")
    for command in (["search", "albatrosses wingbeat"],
                    ["recall", "albatrosses wingbeat", "--mode", "text"]):
        [line] = env.cli(*command).stdout.splitlines()
        assert line.endswith(f"{content[:60]!r}… ({len(content)} chars)"), line
    env.cli_submit_committed("short-1", "Puffins nest in burrows", key="hal")
    assert env.cli("search", "puffins burrows").stdout.splitlines() == [
        "short-1  [committed]  general  'Puffins nest in burrows'"]  # whole: no mark


def test_openapi_served_and_valid(env: Env) -> None:
    from openapi_spec_validator import validate

    spec = httpx.get(f"{env.node.api_url}/openapi.json").json()
    validate(spec)
    assert spec["info"]["title"] == "memledger" and "/v1/memories" in spec["paths"]
    assert httpx.get(f"{env.node.api_url}/docs").status_code == 200


def _cometbft_pid(home: Path) -> int:
    out = subprocess.run(["pgrep", "-f", f"cometbft start --home {home.resolve() / 'cometbft'}"],
                         capture_output=True, text=True)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 1, out
    return pids[0]


def test_cometbft_death_stops_node_and_restart_resumes(env: Env) -> None:
    node = env.node
    with Client(node.api_url, key=Agent.generate("restart")) as ml:
        assert ml.submit("restart-1", "Kingfishers dive from a perch above the water").committed
        wait_until(lambda: _status(ml, "restart-1") == "committed", 30, 0.2, what="voter commit")
        env.committed.append("restart-1")
        before = ml.status().height
    os.kill(_cometbft_pid(node.home), signal.SIGKILL)
    code = node.wait_exit(timeout=60)
    assert code != 0
    assert "cometbft exited" in node.output, node.output
    node.start()
    wait_api_ready(node.api_url)
    with Client(node.api_url) as ml:
        assert ml.status().height >= before
        for memory_id in env.committed:
            assert ml.get_memory(memory_id).status == "committed", memory_id
        assert [m.id for m in ml.search("kingfishers")] == ["restart-1"]
        with pytest.raises(MemLedgerError) as info:
            ml.get_memory("never-written")
        assert info.value.status == 404
