"""`memledger recall --rerank --min-score`: passed to the SDK's recall as the node's
rerank and min_score; --min-score without --rerank is a usage error, before any request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memledger.cli import client as cli_client
from memledger.cli.main import main


class _Client:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def recall(self, query: str, **kwargs: Any) -> list[Any]:
        self.calls.append({"query": query, **kwargs})
        return []


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> _Client:
    made = _Client()
    monkeypatch.setattr(cli_client, "client", lambda *args, **kwargs: made)
    return made


def test_recall_passes_rerank_and_min_score(fake: _Client, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["recall", "which port", "--home", str(tmp_path), "--api", "http://node.invalid"]
    done = runner.invoke(main, [*args, "--rerank", "--min-score", "0.4"])
    assert done.exit_code == 0, done.output
    assert (fake.calls[-1]["rerank"], fake.calls[-1]["min_score"]) == (True, 0.4)
    assert runner.invoke(main, args).exit_code == 0
    assert (fake.calls[-1]["rerank"], fake.calls[-1]["min_score"]) == (False, None)
    alone = runner.invoke(main, [*args, "--min-score", "0.4"])
    assert alone.exit_code == 2 and "add --rerank" in alone.output and len(fake.calls) == 2
    assert runner.invoke(main, [*args, "--rerank", "--min-score", "1.5"]).exit_code == 2
