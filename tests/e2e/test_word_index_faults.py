"""The word index on a full disk: the read process's writes fail for a while, then the
disk has room again and every memory is found by ranked text search, also after a
restart. The fault is made as in test_store_faults.py: RLIMIT_FSIZE lowered on the
running read process only (prlimit); CPython ignores SIGXFSZ, so its writes past the
limit fail with EFBIG, as on a full file system. A failed tantivy write used to leave
the index's writer dead: its later commits stored nothing, the watermark moved past
them, and those memories were left out of the index for good.
"""

from __future__ import annotations

import json
import re
import resource
from pathlib import Path

import httpx
import pytest

from memledger.sdk import Client
from memledger.sdk.keys import Agent
from memledger.sdk.waiting import wait_until
from memledger.testnet.procs import node_processes
from tests.support.node import NodeRunner, wait_api_ready

pytestmark = pytest.mark.cometbft


def _text_hits(runner: NodeRunner, word: str) -> list[str]:
    resp = httpx.get(f"{runner.api_url}/v1/memories",
                     params={"q": word, "mode": "text", "limit": 50,
                             "status": "proposed"},  # no voter here: none is decided
                     timeout=30)
    resp.raise_for_status()
    return sorted(item["id"] for item in resp.json()["items"])


def _words_indexed_height(runner: NodeRunner) -> int:
    metrics = httpx.get(f"{runner.api_url}/metrics", timeout=30).text
    found = re.search(r"^memledger_words_indexed_height (\S+)", metrics, re.M)
    assert found, metrics[-2000:]
    return int(float(found.group(1)))


def _submit(ml: Client, prefix: str, text: str, n: int) -> int:
    """n memories; the height of the last one's block."""
    height: int | None = 0
    for i in range(n):
        height = ml.submit(f"{prefix}-{i}", f"{text}, note {i}").height
        assert height
    assert height
    return height


def _found_by_text(runner: NodeRunner, expected: dict[str, list[str]]) -> None:
    wait_until(lambda: all(_text_hits(runner, w) == ids for w, ids in expected.items()),
               30, 0.2, what="every memory in ranked text search",
               error=lambda msg: AssertionError(
                   f"{msg}: {({w: _text_hits(runner, w) for w in expected})}"))


def test_word_index_after_a_full_disk_finds_every_memory(tmp_path: Path,
                                                         cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id="memledger-word-faults")
    config = runner.config
    config["embedder"] = "none"  # the word index only
    (runner.home / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        with Client(runner.api_url, key=Agent.generate("words")) as ml:
            _submit(ml, "kestrel", "Kestrels hover into the wind", 2)
            _found_by_text(runner, {"kestrel": ["kestrel-0", "kestrel-1"]})
            # the word index lives in the REST process's read process
            (reads,) = node_processes(runner.home)["reads"]
            resource.prlimit(reads, resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
            try:
                full_at = _submit(ml, "osprey", "Ospreys dive feet first for fish", 3)
                # the follower's commits fail meanwhile; searches still rank the
                # memories above its watermark themselves
                _found_by_text(runner, {"osprey": [f"osprey-{i}" for i in range(3)]})
                assert _words_indexed_height(runner) < full_at
            finally:
                resource.prlimit(reads, resource.RLIMIT_FSIZE,
                                 (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            last = _submit(ml, "heron", "Herons stand still in the shallows", 2)
            wait_until(lambda: _words_indexed_height(runner) >= last, 30, 0.2,
                       what="the word index at the projection's height")
        expected = {"osprey": [f"osprey-{i}" for i in range(3)],
                    "heron": ["heron-0", "heron-1"]}
        _found_by_text(runner, expected)
        assert runner.stop() == 0
        runner.start()  # from the persisted index: nothing left out
        wait_api_ready(runner.api_url)
        _found_by_text(runner, expected)
    finally:
        runner.stop()
