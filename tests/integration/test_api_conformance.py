"""The REST API against its own OpenAPI document: a property-based conformance run.

Schemathesis reads `/openapi.json` from a real node (cometbft + app + API, like
test_rest_api.py: the unit tests have no fake broadcast layer, and the write path's
answers come from CheckTx and blocks) and drives every operation with schema-valid and
schema-invalid requests in its examples, coverage, fuzzing and stateful phases, the last
following the document's links (list -> memory -> votes/co-commit/author, submit -> tx).
Every check is on, so the run fails on any 5xx, an undocumented status, content type or
header, a response that does not match its schema, a schema-valid request refused by
request validation, or a schema-invalid one accepted (conformance_checks.py says which two
built-in checks it replaces, and why). Settings are derandomized (`--generation-deterministic`,
a fixed example budget), so a failure reproduces with the command it prints.

Seeded state (memories in every status, a corroboration, a challenge, a co-commit, a
proposal) lets the stateful phase reach records that exist, not only 404s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memledger.daemon import cometbft
from memledger.sdk import Client
from memledger.sdk.txbuilder import TxBuilder, cocommit_core, param_proposal, sign_cocommit
from tests.support.chain import seeded_key
from tests.support.node import NodeRunner, wait_api_ready

pytestmark = pytest.mark.cometbft
CHAIN = "memledger-conformance"
AUTHOR = seeded_key("conformance-author")
OTHER = seeded_key("conformance-other")
CHECKS = Path(__file__).with_name("conformance_checks.py")
#: Replaced by the wire-exact versions in conformance_checks.py. ensure_resource_availability
#: is off because a 202 for a submitted tx is not a created resource: GET /v1/txs/{hash}
#: answers 404 until a block holds it, and a generated (unsigned) tx never gets there.
EXCLUDED = "positive_data_acceptance,negative_data_rejection,ensure_resource_availability"
MAX_EXAMPLES = 30


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[NodeRunner]:
    runner = NodeRunner(tmp_path_factory.mktemp("conformance") / "home", chain_id=CHAIN)
    config = json.loads((runner.home / "config.json").read_text())
    # one client sends thousands of requests in a minute: the limit is tested elsewhere
    config.setdefault("extra", {})["api_rate_limit_per_s"] = "0"
    (runner.home / "config.json").write_text(json.dumps(config))
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        _seed(runner)
        yield runner
    finally:
        runner.stop()


def _seed(node: NodeRunner) -> None:
    """One record of each kind the read operations serve."""
    validator = cometbft.validator_signing_key(node.home / "cometbft")
    with Client(node.api_url, key=AUTHOR, chain_id=CHAIN) as author, \
            Client(node.api_url, key=OTHER, chain_id=CHAIN) as other, \
            Client(node.api_url, key=validator, chain_id=CHAIN) as val:
        assert author.submit("conf/committed", "the staging DB listens on 5433",
                             tags=["infra", "db"]).committed
        assert val.vote("conf/committed").committed
        assert other.corroborate("conf/committed").committed
        assert author.submit("conf-proposed", "deploys freeze on Fridays",
                             type="observation", tags=["ops"]).committed
        assert author.submit("conf-disputed", "the cache is 3x faster").committed
        assert val.vote("conf-disputed").committed
        assert author.challenge("conf-disputed", "one machine only").committed
        keys = [bytes(AUTHOR.verify_key), bytes(OTHER.verify_key)]
        core = cocommit_core(CHAIN, "we agreed to freeze deploys", keys, tags=["agreement"])
        assert author.cocommit(core, [sign_cocommit(k, core) for k in (AUTHOR, OTHER)]).committed
        tx = TxBuilder(validator, CHAIN).propose(time.time_ns(), param_proposal(
            "gov_min_upgrade_delay", 4, title="conformance"))
        assert val.broadcast(tx).committed


def test_openapi_conformance(node: NodeRunner, tmp_path: Path) -> None:
    """Every operation, valid and invalid inputs, stateful links: no disagreement."""
    cmd = [
        str(Path(sys.executable).with_name("st")), "run", f"{node.api_url}/openapi.json",
        "--checks", "all", "--exclude-checks", EXCLUDED,
        "--phases", "examples,coverage,fuzzing,stateful",
        "--max-examples", str(MAX_EXAMPLES), "--generation-deterministic",
        # one worker: CPython 3.11's ast.parse is not thread-safe, and hypothesis parses
        # lambdas' source while describing strategies ("AST constructor recursion depth")
        "--workers", "1", "--continue-on-failure", "--no-color",
    ]
    env = dict(os.environ, SCHEMATHESIS_HOOKS=str(CHECKS))
    started = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    report = run.stdout + run.stderr
    elapsed = time.monotonic() - started
    assert run.returncode == 0, f"conformance run failed after {elapsed:.0f}s:\n{report}"
    spec = httpx.get(f"{node.api_url}/openapi.json", timeout=10).json()
    operations = sum(len(ops) for ops in spec["paths"].values())
    assert re.search(rf"Operations:\s+{operations} selected / {operations} total", report), report
    links = re.search(r"API Links:\s+(\d+) covered", report)
    assert links is not None and int(links.group(1)) > 0, report  # the stateful phase ran
