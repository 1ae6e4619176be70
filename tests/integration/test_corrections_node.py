"""Issue 38 on a real node (one validator, real cometbft, REST API): peer disputes in a
shared domain, corrections, the safe default reads, rights; then the same records after
a restart, on a node that replayed every block from genesis and on one that state-synced.
A private domain's memory (issue 39, Must show 3) written before the snapshot stays
private on both joined nodes (no file and no REST answer holds its canary) and a member
reading through the state-synced node opens it, verified.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from memledger.daemon import cometbft
from memledger.daemon.home import NodeHome
from memledger.protocol.codes import Code
from memledger.sdk import Client
from memledger.sdk.keys import Agent
from memledger.sdk.light import PinnedRoot
from memledger.sdk.txbuilder import TxBuilder
from memledger.sdk.waiting import wait_until
from tests.support.chain import seeded_key
from tests.support.node import REPO, NodeRunner, free_base_port, memledger, wait_api_ready

pytestmark = pytest.mark.cometbft
CHAIN = "corrections-it"
AUTHOR = seeded_key("c38-author")
PEER = seeded_key("c38-peer")
INTERVAL = 10
IDS = ["g-wrong", "g-kept", "c-0", "c-1", "d-0", "d-1"]
PRIVATE = "team/secret"
CANARY = f"canary{uuid.uuid4().hex}"
SECRET = f"The vault recovery phrase is {CANARY}"


class Actor:
    """A key that signs with its own nonces and sends through RPC, as an agent would."""

    def __init__(self, node: NodeRunner, builder: TxBuilder) -> None:
        self.node, self.builder, self.nonce = node, builder, 0

    def send(self, kind: str, *args: Any, **kwargs: Any) -> Any:
        self.nonce += 1
        tx = getattr(self.builder, kind)(self.nonce, *args, **kwargs)
        with self.node.rpc() as rpc:
            return rpc.broadcast_tx_commit(tx)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[NodeRunner]:
    runner = NodeRunner(tmp_path_factory.mktemp("c38") / "home", chain_id=CHAIN)
    home = NodeHome(runner.home)
    config = home.load()
    config.snapshot_interval = INTERVAL
    config.snapshot_keep = 20
    home.save(config)
    runner.start()
    wait_api_ready(runner.api_url)
    yield runner
    runner.stop()


@pytest.fixture(scope="module")
def actors(node: NodeRunner) -> dict[str, Actor]:
    validator = TxBuilder(cometbft.validator_signing_key(node.home / "cometbft"), CHAIN)
    return {"author": Actor(node, TxBuilder(AUTHOR, CHAIN)),
            "peer": Actor(node, TxBuilder(PEER, CHAIN)),
            "validator": Actor(node, validator)}


def ok(result: Any) -> Any:
    assert result.code == 0, result
    return result


def committed(actors: dict[str, Actor], memory_id: str, content: str, **kw: Any) -> None:
    ok(actors["author"].send("submit", memory_id, content, **kw))
    ok(actors["validator"].send("vote", memory_id, "accept"))


def ids(found: Any) -> set[str]:
    return {m.id for m in found}


@pytest.fixture(scope="module")
def story(node: NodeRunner, actors: dict[str, Actor]) -> dict[str, Any]:
    """Every write of this module, once, in order, with what the reads showed between
    them: each test asserts on it (and may run alone)."""
    seen: dict[str, Any] = {}
    # a peer's dispute in `general`, one upheld and one not
    committed(actors, "g-wrong", "the staging database lives on host alpha")
    committed(actors, "g-kept", "the staging cache lives on host beta")
    ok(actors["peer"].send("challenge", "g-wrong", "it moved to host gamma last week"))
    ok(actors["peer"].send("challenge", "g-kept", "I think the cache moved too"))
    with Client(node.api_url) as api:
        seen["challenged"] = api.get_memory("g-wrong")
        seen["listed while disputed"] = ids(api.list_memories(domain="general"))
        seen["disputed"] = {m.id: m.status for m in api.list_memories(
            domain="general", include_disputed=True) if m.id.startswith("g-")}
    ok(actors["validator"].send("vote", "g-wrong", "reject", "gamma is right"))
    ok(actors["validator"].send("vote", "g-kept", "accept", "beta still serves it"))
    # a correction, committed
    committed(actors, "c-0", "the release train leaves on tuesdays")
    ok(actors["author"].send("submit", "c-1", "the release train leaves on thursdays",
                             supersedes="c-0"))
    seen["correction decided at"] = ok(actors["validator"].send("vote", "c-1", "accept")).height
    # a correction, rejected
    committed(actors, "d-0", "the on-call rotation changes on mondays")
    ok(actors["author"].send("submit", "d-1", "the on-call rotation changes on fridays",
                             supersedes="d-0"))
    ok(actors["validator"].send("vote", "d-1", "reject", "monday is right"))
    return seen


def test_a_peer_dispute_in_general_is_decided_by_the_electorate(
        node: NodeRunner, story: dict[str, Any]) -> None:
    assert story["challenged"].status == "challenged"
    assert "peer dispute" in (story["challenged"].status_reason or "")
    assert not {"g-wrong", "g-kept"} & story["listed while disputed"]  # not by default
    assert story["disputed"] == {"g-wrong": "challenged", "g-kept": "challenged"}
    with Client(node.api_url) as api:
        assert api.get_memory("g-wrong").status == "deprecated"
        assert api.get_memory("g-kept").status == "committed"
        assert [r["outcome"] for r in api.challenges("g-wrong")] == ["deprecated"]
        assert [r["outcome"] for r in api.challenges("g-kept")] == ["kept"]


def test_a_correction_supersedes_its_original_in_the_same_block(
        node: NodeRunner, story: dict[str, Any]) -> None:
    decided = story["correction decided at"]
    with Client(node.api_url) as api:
        original, correction = api.get_memory("c-0"), api.get_memory("c-1")
        assert original.status == "superseded" and original.superseded_by == "c-1"
        assert correction.status == "committed" and correction.supersedes == "c-0"
        assert original.history[-1] == [decided, "superseded"]
        assert correction.decided_height == decided
        assert correction.corrections == ["c-0", "c-1"]
        listed = ids(api.list_memories(limit=500))
        assert "c-1" in listed and "c-0" not in listed
        assert "c-0" not in ids(api.search("release train"))
        assert "c-0" not in ids(api.recall("release train leaves", mode="text"))
        assert ids(api.list_memories(status="superseded")) == {"c-0"}


def test_a_deprecated_correction_leaves_the_original_committed(
        node: NodeRunner, story: dict[str, Any]) -> None:
    with Client(node.api_url) as api:
        assert api.get_memory("d-1").status == "deprecated"
        original = api.get_memory("d-0")
        assert original.status == "committed" and original.superseded_by is None
        assert original.pending_correction is None


def test_default_reads_return_no_deprecated_or_superseded_memory(
        node: NodeRunner, story: dict[str, Any]) -> None:
    with Client(node.api_url) as api:
        for found in (api.list_memories(limit=500), api.search("host", limit=500),
                      api.recall("host release rotation", mode="text", limit=50)):
            assert {m.status for m in found} <= {"committed"}
        every = list(api.list_memories(
            status=["proposed", "committed", "challenged", "deprecated", "superseded"]))
        assert {"deprecated", "superseded"} <= {m.status for m in every}


def test_rights_are_enforced(node: NodeRunner, actors: dict[str, Actor],
                            story: dict[str, Any]) -> None:
    assert actors["peer"].send("submit", "p-fix", "the on-call rotation changes on sundays",
                               supersedes="d-0").code == Code.CORRECTION_DENIED
    assert actors["author"].send("submit", "x-fix", "a fix of a superseded fact here",
                                 supersedes="c-0").code == Code.SUPERSEDES_TAKEN
    assert actors["author"].send("submit", "y-fix", "a fix of a fact that is not there",
                                 supersedes="nothing-here").code == Code.SUPERSEDES_NOT_FOUND
    ok(actors["author"].send("submit", "own-1", "a note in the author's own domain",
                             domain="author-notes"))
    ok(actors["validator"].send("vote", "own-1", "accept"))
    refused = actors["peer"].send("challenge", "own-1", "wrong")
    assert refused.code == Code.CHALLENGE_DENIED
    assert "memledger grant author-notes" in refused.log


@pytest.fixture(scope="module")
def secret(node: NodeRunner) -> dict[str, Any]:
    """A private domain with a member, and a memory holding a canary written into it."""
    owner, member = Agent.generate(), Agent.generate()
    with Client(node.api_url, key=owner) as own:
        assert own.make_private(PRIVATE).code == 0
        assert own.grant(PRIVATE, bytes(member.signing_key.verify_key), "read").code == 0
        assert own.submit("p-secret", SECRET, domain=PRIVATE).code == 0
    return {"member": member, "id": "p-secret"}


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(path) for path in root.rglob("*")
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes()]


def _records(db_url: str) -> dict[str, Any]:
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, record FROM memories"))
        found = {r.id: json.loads(r.record) for r in rows if r.id in IDS}
    engine.dispose()
    return found


def _join(source: NodeRunner, home: Path, state_sync: bool) -> tuple[subprocess.Popen[str], str]:
    """A node joining `source`; the state-synced one serves the REST API too."""
    memledger("init", "--home", str(home), "--join", source.rpc_url,
              "--base-port", str(free_base_port()),
              "--state-sync" if state_sync else "--no-state-sync")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "memledger.cli.main", "start", "--home",
                             str(home), *([] if state_sync else ["--no-api"])], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, text=True)
    port = int(NodeHome(home).load().rpc_laddr.rsplit(":", 1)[1])
    return proc, f"http://127.0.0.1:{port}"


def test_restart_replay_and_state_sync_give_the_same_records(
        node: NodeRunner, story: dict[str, Any], secret: dict[str, Any],
        tmp_path: Path) -> None:
    before = _records(NodeHome(node.home).db_url(NodeHome(node.home).load()))
    assert set(before) == set(IDS)
    node.stop()
    node.start()
    wait_api_ready(node.api_url)
    assert _records(NodeHome(node.home).db_url(NodeHome(node.home).load())) == before
    with node.rpc() as rpc:
        target = rpc.latest_height()
        rpc.wait_for_height(target + INTERVAL + 1, timeout=90)  # a snapshot past it all
    joined = {name: _join(node, tmp_path / name, state_sync)
              for name, state_sync in (("replayed", False), ("synced", True))}
    try:
        for name, (proc, rpc_url) in joined.items():
            def caught_up(proc: subprocess.Popen[str] = proc, url: str = rpc_url,
                          name: str = name) -> bool:
                assert proc.poll() is None, (tmp_path / name / "logs" / "app.log").read_text()
                info = httpx.get(f"{url}/status", timeout=5).json()["result"]["sync_info"]
                return int(info["latest_block_height"]) > target and not info["catching_up"]
            wait_until(caught_up, 180, 0.5, what=f"the {name} node to catch up",
                       ignore=(httpx.HTTPError, KeyError, ValueError))
            home = NodeHome(tmp_path / name)
            assert _records(home.db_url(home.load())) == before, name
            info = httpx.get(f"{rpc_url}/status", timeout=5).json()["result"]["sync_info"]
            assert (int(info["earliest_block_height"]) == 1) == (name == "replayed"), info
        log = (tmp_path / "synced" / "logs" / "app.log").read_text()
        assert "restored height" in log
        _private_after_state_sync(node, tmp_path, secret)
    finally:
        for proc, _ in joined.values():
            proc.terminate()
            proc.wait(60)


def _private_after_state_sync(node: NodeRunner, tmp_path: Path, secret: dict[str, Any]) -> None:
    """Issue 39, Must show 3: the joined nodes hold only ciphertext of the private memory
    (files and REST answers), and a member reads it through the state-synced node."""
    for name in ("replayed", "synced"):
        assert _files_holding(tmp_path / name, CANARY.encode()) == [], name
    config = NodeHome(tmp_path / "synced").load()
    api = f"http://{config.api_host}:{config.api_port}"
    wait_api_ready(api)
    for path, params in ((f"/v1/memories/{secret['id']}", {"prove": "true"}),
                         ("/v1/memories", {"domain": PRIVATE}),
                         ("/v1/memories", {"q": "vault recovery phrase", "mode": "text"}),
                         ("/v1/proofs/content", {"id": secret["id"]})):
        answer = httpx.get(api + path, params=params, timeout=30)
        assert answer.status_code == 200, (path, answer.text)
        assert CANARY not in answer.text, path
    # the synced node holds no block below its snapshot, so the member pins a header it
    # has, by the hash the first node gives (out of band, as a user pins a checkpoint)
    synced_rpc = f"http://127.0.0.1:{int(config.rpc_laddr.rsplit(':', 1)[1])}"
    status = httpx.get(f"{synced_rpc}/status", timeout=5).json()["result"]["sync_info"]
    height = int(status["earliest_block_height"])
    block = httpx.get(f"{node.rpc_url}/block", params={"height": height}, timeout=5).json()
    root = PinnedRoot(height, bytes.fromhex(block["result"]["block_id"]["hash"]))
    with Client(api, key=secret["member"], trust=root) as member:
        got = member.get(secret["id"], verify=True)
    assert got.content == SECRET and got.verified_height and not got.sealed
