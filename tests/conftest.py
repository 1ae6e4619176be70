"""Session-wide fixtures for real external dependencies (CometBFT binary, PostgreSQL).

Missing dependencies fail loudly instead of skipping: a green run must mean the real
integration paths actually ran.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memledger.daemon.cometbft import CometBFTError, find_cometbft
from tests.support.postgres import create_database, drop_database, start_postgres, unique_db_name


@pytest.fixture(scope="session")
def cometbft_bin() -> Path:
    """Path to a verified cometbft v0.38.25 binary (`make cometbft` installs one)."""
    try:
        return find_cometbft()
    except CometBFTError as exc:
        pytest.fail(f"cometbft binary unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """SQLAlchemy URL of a PostgreSQL database for this session.

    Uses $MEMLEDGER_PG_URL if set, otherwise a private server started just for this run.
    """
    external = os.environ.get("MEMLEDGER_PG_URL")
    if external:
        yield external
        return
    server = start_postgres()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """A brand-new empty database on the session server, dropped after the test."""
    name = unique_db_name()
    url = create_database(postgres_url, name)
    try:
        yield url
    finally:
        drop_database(postgres_url, name)
