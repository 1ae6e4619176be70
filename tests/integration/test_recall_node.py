"""Recall by meaning on a real node (cometbft + app + REST + voter), SQLite and PostgreSQL.

One node per backend for the module, with the default embedder (`minilm-int8:128`): a paraphrase
that shares no word with a memory finds it; every filter and include_disputed holds in
every mode; a challenged memory leaves default results; restart, `projection reindex`,
a deleted index, a damaged key map and a model change all come back to the same results
(the last three rebuilding at start, and saying why in /v1/status); the changed model is
`wordllama`, which must find the paraphrases too and keep its index across a restart.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memledger.sdk import Client
from memledger.sdk.keys import Agent
from memledger.sdk.waiting import wait_until
from tests.support.node import NodeRunner, memledger, wait_api_ready
from tests.support.postgres import create_database, drop_database, unique_db_name

pytestmark = pytest.mark.cometbft
MODES = ("text", "semantic", "hybrid")

# (id, domain, content, tags, author index)
MEMORIES = [
    ("r-cat", "home", "Our cat Miso is allergic to chicken, so buy salmon food", ["pets"], 0),
    ("r-budget", "finance", "The marketing budget for the third quarter is 40,000 euros",
     ["money"], 0),
    ("r-deploy", "ops", "Deploys happen on Tuesdays after the standup", ["release"], 1),
    ("r-oncall", "ops", "Maria is on call this week for production incidents", ["people"], 1),
    ("r-heron", "general", "Herons stand motionless in the shallows to fish", ["birds"], 0),
    ("r-otter", "general", "Otters hold hands while sleeping so they do not drift",
     ["animals"], 1),
]
PET = "what should the pet not eat"  # r-cat: no shared word
ADS = "how much money can advertising spend this summer"  # r-budget: no shared word


class Env:
    def __init__(self, node: NodeRunner, agents: list[Agent]) -> None:
        self.node = node
        self.agents = agents

    def client(self, i: int = 0) -> Client:
        return Client(self.node.api_url, key=self.agents[i])

    def search(self, q: str, mode: str | None = None, **params: Any) -> list[dict[str, Any]]:
        query: dict[str, Any] = {"q": q, "limit": 10, **params}
        if mode is not None:
            query["mode"] = mode
        resp = httpx.get(f"{self.node.api_url}/v1/memories", params=query, timeout=30)
        assert resp.status_code == 200, resp.text
        items: list[dict[str, Any]] = resp.json()["items"]
        return items

    def recall_status(self) -> dict[str, Any]:
        doc = httpx.get(f"{self.node.api_url}/v1/status", timeout=30).json()
        return dict(doc["embedder"])

    def wait_indexed(self) -> dict[str, Any]:
        def caught_up() -> bool:
            st = self.recall_status()
            height = httpx.get(f"{self.node.api_url}/v1/status", timeout=30).json()[
                "projection_height"]
            return bool(st["state"] == "following" and st["lag"] == 0
                        and st["indexed_height"] >= height)

        wait_until(caught_up, 90, 0.2, what="the vector index to catch up",
                   ignore=(httpx.HTTPError, KeyError, TypeError))
        return self.recall_status()

    def restart(self) -> None:
        self.node.stop()
        self.node.start()
        wait_api_ready(self.node.api_url)

    def snapshot(self) -> dict[str, list[str]]:
        """Ids (in order) for a fixed set of queries in every mode."""
        out = {}
        for q in (PET, ADS, "salmon", "which birds wait silently in water"):
            for mode in MODES:
                out[f"{mode}:{q}"] = [m["id"] for m in self.search(q, mode)]
        return out


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres",
                                                               marks=pytest.mark.postgres)])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        cometbft_bin: Path) -> Iterator[Env]:
    db_url, pg, dbname = "", "", ""
    if request.param == "postgres":
        pg = request.getfixturevalue("postgres_url")
        dbname = unique_db_name("recall")
        db_url = create_database(pg, dbname)
    root = tmp_path_factory.mktemp(f"recall-{request.param}")
    runner = NodeRunner(root / "home", chain_id="memledger-recall", db_url=db_url, voter=True)
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        env = Env(runner, [Agent.generate("recall-a"), Agent.generate("recall-b")])
        for mid, domain, content, tags, who in MEMORIES:
            with env.client(who) as ml:
                kind = "observation" if mid == "r-deploy" else "fact"
                assert ml.submit(mid, content, domain=domain, tags=tags, type=kind).committed
        with env.client() as ml:
            for mid, *_ in MEMORIES:
                def committed(m: str = mid) -> bool:
                    return ml.get_memory(m).status == "committed"

                wait_until(committed, 30, 0.2, what=f"the voter to commit {mid}")
        env.wait_indexed()
        yield env
    finally:
        runner.stop()
        if pg:
            drop_database(pg, dbname)


def test_paraphrase_with_no_shared_word(env: Env) -> None:
    for q, want in ((PET, "r-cat"), (ADS, "r-budget")):
        assert env.search(q, "text") == []  # no word in common: word search finds nothing
        for mode in ("semantic", "hybrid", None):  # None: the default, hybrid
            hits = env.search(q, mode)
            assert hits[0]["id"] == want, (q, mode, [h["id"] for h in hits])
            assert hits[0]["mode"] == (mode or "hybrid") and hits[0]["score"] > 0
    with env.client() as ml:
        recalled = ml.recall(PET, limit=3)
        assert recalled[0].id == "r-cat" and recalled[0].mode == "hybrid" and recalled[0].score
        assert [m.id for m in ml.recall(PET, mode="semantic", limit=1)] == ["r-cat"]
        assert list(ml.search(PET)) == []  # search() keeps its all-words meaning
    status = env.recall_status()
    assert status["name"] == "all-MiniLM-L6-v2-int8-128" and status["dim"] == 128
    assert status["vectors"] >= len(MEMORIES)
    metrics = httpx.get(f"{env.node.api_url}/metrics", timeout=30).text
    assert "memledger_recall_index_vectors" in metrics
    # The lag is reckoned from the projection's height now, so a block committed just
    # before the scrape shows as 1 until the follower's next poll: wait for it to clear.
    wait_until(lambda: "memledger_recall_lag_blocks 0.0" in httpx.get(
        f"{env.node.api_url}/metrics", timeout=30).text, 30, 0.2,
        what="the recall lag metric to read 0")


def test_filters_apply_before_top_k_in_every_mode(env: Env) -> None:
    author_b = env.agents[1].public_key_hex
    cases: list[tuple[dict[str, Any], Any]] = [
        ({"domain": "ops"}, lambda m: m["domain"] == "ops"),
        ({"tag": "birds"}, lambda m: "birds" in m["tags"]),
        ({"author": author_b}, lambda m: m["author"] == author_b),
        ({"type": "observation"}, lambda m: m["type"] == "observation"),
        ({"status": "committed"}, lambda m: m["status"] == "committed"),
    ]
    for params, ok in cases:
        for mode in MODES:
            for q in (PET, "salmon deploys herons"):
                hits = env.search(q, mode, **params)
                assert all(ok(m) for m in hits), (params, mode, q, hits)
        if "domain" in params or "author" in params:
            # the best match overall (r-cat) is filtered out, yet the filter's own
            # memories still fill the top-k: the cut came after the filter
            assert {m["id"] for m in env.search(PET, "semantic", **params)} >= {"r-deploy"}


def test_challenged_memory_leaves_default_results(env: Env) -> None:
    with env.client(1) as ml:
        assert ml.corroborate("r-heron").committed
    with env.client(0) as ml:
        assert ml.challenge("r-heron", "seen once").committed
        assert ml.get_memory("r-heron").status == "challenged"
    q = "which birds wait silently in water"
    for mode in MODES:
        words = "herons shallows" if mode == "text" else q
        assert "r-heron" not in [m["id"] for m in env.search(words, mode)], mode
        shown = env.search(words, mode, include_disputed="true")
        assert "r-heron" in [m["id"] for m in shown], mode
        assert [m["id"] for m in env.search(words, mode, status="challenged")] == ["r-heron"]


def test_restart_reindex_deleted_index_and_model_change(env: Env) -> None:
    env.wait_indexed()
    before = env.snapshot()
    assert before[f"semantic:{PET}"][0] == "r-cat"

    env.restart()  # loads the saved index, no rebuild
    status = env.wait_indexed()
    assert status["rebuilt_reason"] is None
    assert env.snapshot() == before
    # the static tail beside the transformer, covering what the index covers (and more)
    assert status["tail"]["name"] == "wordllama-l2_supercat-128", status
    # (a block may land between the wait and this read: never more behind than the index)
    assert status["covered_lag"] <= status["lag"]
    assert status["tail"]["covered_height"] >= status["indexed_height"]

    env.node.stop()  # reindex from the projection, node stopped
    out = memledger("projection", "reindex", "--home", str(env.node.home), "--json")
    report = json.loads(out.stdout)  # both indexes, rebuilt from every memory
    assert report["memories"] == report["words"]["documents"] >= len(MEMORIES), out.stderr
    assert report["words"]["indexed_height"] == report["indexed_height"] > 0
    env.node.start()
    wait_api_ready(env.node.api_url)
    assert env.wait_indexed()["rebuilt_reason"] is None
    assert env.snapshot() == before

    env.node.stop()  # the index deleted: rebuilt at start
    shutil.rmtree(env.node.home / "data" / "recall")
    env.node.start()
    wait_api_ready(env.node.api_url)
    assert env.wait_indexed()["rebuilt_reason"] == "missing"
    assert env.snapshot() == before

    config_file = env.node.home / "config.json"
    config = config_file.read_text()
    assert '"embedder": "minilm-int8:128"' in config
    env.node.stop()  # another model: the index says who built it, so it is rebuilt
    config_file.write_text(config.replace('"embedder": "minilm-int8:128"',
                                          '"embedder": "wordllama"'))
    try:
        env.node.start()
        wait_api_ready(env.node.api_url)
        status = env.wait_indexed()
        assert status["name"] == "wordllama-l2_supercat-128" and status["dim"] == 128
        assert status["tail"] is None  # a static model follows by itself
        assert "built by all-MiniLM-L6-v2-int8-128 " in status["rebuilt_reason"]
        assert status["vectors"] >= len(MEMORIES)
        assert env.search(PET, "semantic")[0]["id"] == "r-cat"
        assert env.search(ADS, "hybrid")[0]["id"] == "r-budget"
        other = env.snapshot()
        env.restart()  # the other model's index persists like any other
        assert env.wait_indexed()["rebuilt_reason"] is None
        assert env.snapshot() == other
    finally:
        env.node.stop()
        config_file.write_text(config)
        env.node.start()
        wait_api_ready(env.node.api_url)


@pytest.mark.parametrize("repair", ["start", "reindex"])
def test_a_damaged_key_map_is_rebuilt_at_start_and_by_reindex(env: Env, repair: str) -> None:
    """A key map SQLite cannot read stopped the node ("api exited with code 1: ...
    sqlite3.DatabaseError: file is not a database") and `projection reindex` failed the
    same way."""
    env.wait_indexed()
    before = env.snapshot()
    keys = env.node.home / "data" / "recall" / "keys.sqlite"
    env.node.stop()
    with contextlib.closing(sqlite3.connect(keys)) as db:  # all in the file, none in a WAL
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not keys.with_name("keys.sqlite-wal").exists()
    keys.write_bytes(b"x" * keys.stat().st_size)  # overwritten
    if repair == "reindex":
        out = memledger("projection", "reindex", "--home", str(env.node.home), "--json")
        assert json.loads(out.stdout)["memories"] >= len(MEMORIES), out.stderr
    env.node.start()
    wait_api_ready(env.node.api_url)
    reason = env.wait_indexed()["rebuilt_reason"]
    if repair == "start":
        assert reason == "unreadable key map: file is not a database"
    else:
        assert reason is None  # reindex healed and saved it: loaded as it was
    assert env.snapshot() == before


def test_an_embedder_that_cannot_load_stops_the_node_saying_why(
        tmp_path: Path, cometbft_bin: Path) -> None:
    """A node whose configured embedder cannot load (here a dimension the model has no
    axes for; equally a model wheel that is not installed) stops, and its one line says
    why, not only which log to read."""
    runner = NodeRunner(tmp_path / "home", chain_id="memledger-bad-embedder")
    config_file = runner.home / "config.json"
    config = config_file.read_text()
    assert '"embedder": "minilm-int8:128"' in config
    config_file.write_text(config.replace('"embedder": "minilm-int8:128"',
                                          '"embedder": "minilm:100"'))
    runner.start(wait=False)
    try:
        code = runner.wait_exit(timeout=120)
    finally:
        runner.stop()
    assert code != 0
    assert ("api exited with code 1: memledger.recall.embedder.EmbedderUnavailable: "
            "all-MiniLM-L6-v2 has no 100-dimensional axes") in runner.output, runner.output


def test_freshness_weighs_age_before_the_cut(env: Env) -> None:
    """r-otter was submitted blocks after r-heron: with a half-life of a tenth of a
    second it outranks the better match, even on a page of one (the cut comes after).
    r-heron is challenged once test_challenged_memory_leaves_default_results has run, so
    disputed memories are included."""
    q = "which birds wait motionless in shallow water to fish"
    plain = env.search(q, "semantic", domain="general", include_disputed=True)
    assert [m["id"] for m in plain] == ["r-heron", "r-otter"]
    for mode in MODES[1:]:
        fresh = env.search(q, mode, domain="general", include_disputed=True,
                           freshness=1e-6, limit=1)
        assert [m["id"] for m in fresh] == ["r-otter"], (mode, fresh)
    slow = env.search(q, "semantic", domain="general", include_disputed=True,
                      freshness=36_500)
    assert [m["id"] for m in slow] == ["r-heron", "r-otter"]
    with env.client() as ml:
        hits = ml.recall(q, domain="general", include_disputed=True, freshness=1e-6, limit=1)
        assert [m.id for m in hits] == ["r-otter"]
    for bad in ({"freshness": 0}, {"freshness": "soon"}, {"freshness": 36_501}):
        resp = httpx.get(f"{env.node.api_url}/v1/memories", timeout=30,
                         params={"q": q, **bad})
        assert resp.status_code == 422, (bad, resp.text)
        assert resp.headers["content-type"].startswith("application/problem+json")
