"""Fixtures for multi-node tests: one 4-validator local net per module, always torn down.

A failing test that uses any Testnet fixture gets the tail of every node's logs attached
to its report.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from memledger.testnet.net import Testnet


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[Testnet]:
    """Four equal validators, voters on, REST API off, started once per module."""
    testnet = Testnet.create(tmp_path_factory.mktemp("net"), 4, chain_id="memledger-e2e")
    try:
        testnet.up(api=False, voter=True)
        yield testnet
    finally:
        testnet.down(timeout=20)
        for node in testnet.nodes:  # belt and braces: nothing of this net may survive
            node.kill()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for value in getattr(item, "funcargs", {}).values():  # any Testnet fixture, not just `net`
        if isinstance(value, Testnet):
            report.sections.append((f"node logs of {value.root} (tails)", value.log_tails(40)))
