"""Reads in a process of their own (memledger/api/read_process.py): searches, status and
metrics answered by the child that holds the indexes, its errors crossing whole, a new
child after the old one dies, and a child that cannot start failing the app's start."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memledger.api import ApiSettings, create_app
from memledger.api.deps import ApiState
from memledger.api.read_process import ReadProcess
from memledger.devtools.chain import LocalChain, seeded_key
from memledger.recall.embedder import EmbedderUnavailable
from memledger.recall.text_index import TextIndex
from memledger.sdk.waiting import wait_until

#: the memories here are never voted on: searches ask for proposed ones
PROPOSED = {"status": "proposed"}


def _chain(tmp_path: Path) -> LocalChain:
    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("read-process")
    b = chain.builder(key)
    chain.block([b.submit(chain.next_nonce(key), f"z-{i}", f"zebra note number {i}")
                 for i in range(5)] +
                [b.submit(chain.next_nonce(key), "cat", "Our cat is allergic to chicken")])
    return chain


def _settings(chain: LocalChain, tmp_path: Path, **kw: object) -> ApiSettings:
    fields: dict[str, object] = {"embedder": "wordllama", "read_slots": 2, **kw}
    return ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9", chain_id="x",
                       index_dir=tmp_path / "recall", read_process=True,
                       **fields)  # type: ignore[arg-type]


def _caught_up(reads: ReadProcess) -> bool:
    """The child's vector index has every memory (its status, asked over control; the
    status route would also ask cometbft, which these tests do not run)."""
    status = reads.control("status")
    return bool(status) and status.lag == 0 and status.state == "following"


def test_searches_status_and_metrics_come_from_the_read_process(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    app = create_app(_settings(chain, tmp_path))
    state: ApiState = app.state.memledger
    reads = state.read_process
    assert reads is not None and reads.pid not in (None, os.getpid())
    assert state.recall is None and state.words is None  # the indexes live in the child
    with TestClient(app, raise_server_exceptions=False) as api:
        wait_until(lambda: _caught_up(reads), 60, 0.1, what="the child's index")
        found = api.get("/v1/memories", params={**PROPOSED, "q": "what should a pet not eat",
                                                "mode": "semantic", "limit": 1}).json()
        assert [m["id"] for m in found["items"]] == ["cat"]
        hybrid = api.get("/v1/memories", params={**PROPOSED, "q": "zebra", "limit": 3}).json()
        assert all(m["mode"] == "hybrid" for m in hybrid["items"])  # the default: meaning
        assert api.get("/v1/memories/cat").json()["id"] == "cat"
        assert api.get("/v1/memories/nope").status_code == 404
        # a Problem raised in the child reaches the client whole
        bad = api.get("/v1/memories", params={"q": "zebra", "rerank": "true"})
        assert bad.status_code == 422 and bad.json()["name"] == "rerank_unsupported"
        metrics = api.get("/metrics").text
        assert "memledger_recall_index_vectors 6.0" in metrics
        assert "memledger_words_index_documents 6.0" in metrics
    assert not reads._proc  # the app's shutdown stopped the child
    chain.close()


def test_a_dead_read_process_is_replaced(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    app = create_app(_settings(chain, tmp_path))
    reads = app.state.memledger.read_process
    first = reads.pid
    with TestClient(app, raise_server_exceptions=False) as api:
        wait_until(lambda: _caught_up(reads), 60, 0.1, what="the child's index")
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: not reads._proc.is_alive(), 10, 0.05, what="the child to die")
        answers = [api.get("/v1/memories", params={**PROPOSED, "q": "zebra note 2",
                                                         "mode": "text"})
                   for _ in range(2 * reads.slots + 1)]
        # each slot's pipe finds the old child gone once at most; then a new one answers
        assert {a.status_code for a in answers} <= {200, 503}
        lost = [a.json() for a in answers if a.status_code == 503]
        assert all(p["name"] == "reads_unavailable" for p in lost)
        assert all(a.headers["retry-after"] == "1" for a in answers if a.status_code == 503)
        assert answers[-1].status_code == 200
        assert answers[-1].json()["items"][0]["id"] == "z-2"
        assert reads.restarts == 1 and reads.pid not in (None, first)
        assert "memledger_api_read_process_restarts_total 1.0" in api.get("/metrics").text
        assert api.get("/health").status_code == 200
        # with no read coming, the readiness probe replaces a dead child
        os.kill(reads.pid, signal.SIGKILL)
        wait_until(lambda: not reads._proc.is_alive(), 10, 0.05, what="the child to die")
        checks = api.get("/ready").json()["checks"]  # 503: no cometbft in this test
        assert checks["reads"]["ok"] and reads.restarts == 2
    chain.close()


def test_a_read_process_that_cannot_start_fails_the_app_as_in_process(tmp_path: Path) -> None:
    """An embedder that cannot load fails create_app with its own error, as it does when
    the indexes live in the REST process (the node then stops saying why)."""
    chain = _chain(tmp_path)
    with pytest.raises(EmbedderUnavailable, match="no 100-dimensional axes"):
        create_app(_settings(chain, tmp_path, embedder="minilm:100"))
    chain.close()


def test_while_no_read_process_can_start_reads_say_why_and_a_later_one_serves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = _chain(tmp_path)
    app = create_app(_settings(chain, tmp_path))
    reads = app.state.memledger.read_process
    good = reads.settings
    with TestClient(app, raise_server_exceptions=False) as api:
        reads.settings = dataclasses.replace(good, embedder="minilm:100")  # will not load
        os.kill(reads.pid, signal.SIGKILL)
        wait_until(lambda: not reads._proc.is_alive(), 10, 0.05, what="the child to die")
        search = {**PROPOSED, "q": "zebra note 2", "mode": "text"}
        answers = [api.get("/v1/memories", params=search) for _ in range(reads.slots + 1)]
        last = answers[-1].json()
        assert answers[-1].status_code == 503 and last["name"] == "reads_unavailable"
        assert "no 100-dimensional axes" in last["detail"]
        checks = api.get("/ready").json()["checks"]
        assert not checks["reads"]["ok"] and "cannot start" in checks["reads"]["detail"]
        reads.settings = good
        monkeypatch.setattr("memledger.api.read_process.RETRY_START_S", 0.0)
        assert api.get("/v1/memories", params=search).json()["items"][0]["id"] == "z-2"
    chain.close()


def test_a_new_read_process_waits_for_an_old_one_to_let_go_of_the_word_index(
        tmp_path: Path) -> None:
    """The read process of a REST process that just died may hold the word index's
    folder lock a moment longer; the next one waits for it instead of serving ranked
    text from the projection until its own restart."""
    chain = _chain(tmp_path)
    folder = tmp_path / "recall" / "text"
    folder.mkdir(parents=True)
    held = TextIndex(folder)
    held._take_folder_lock()  # as an old read process would
    threading.Timer(1.5, held._release_folder_lock).start()
    app = create_app(_settings(chain, tmp_path))
    with TestClient(app, raise_server_exceptions=False) as api:
        assert "memledger_words_index_documents" in api.get("/metrics").text
    chain.close()


def test_a_read_process_whose_rest_process_is_gone_exits(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    reads = ReadProcess(_settings(chain, tmp_path), slots=1)
    proc = reads._proc
    assert reads._control is not None
    reads._control.close()  # as when the REST process dies: its ends close
    while not reads._pipes.empty():
        reads._pipes.get()[1].close()
    proc.join(10)
    assert proc.exitcode == 0
    chain.close()
