"""Read-only access to the SQL serving projection.

The REST process never writes: SQLite is opened with `mode=ro` and `query_only`, and
PostgreSQL sessions default to read-only transactions, so a bug here cannot corrupt what
the ABCI app flushes.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url

from memledger.recall.follow import projection_height
from memledger.sqlite_uri import readonly_uri, sqlite_path

__all__ = ["projection_height", "readonly_engine"]


def readonly_engine(url: str) -> Engine:
    """An engine that can only read the projection at `url`."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = sqlite_path(url)
        if path is None:
            raise ValueError("the REST API needs a file-backed SQLite projection")

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(readonly_uri(path), uri=True, timeout=30,
                                   check_same_thread=False)
            conn.execute("PRAGMA query_only=1")
            return conn

        return sa.create_engine("sqlite://", creator=connect, poolclass=sa.pool.QueuePool,
                                pool_size=8, max_overflow=16)
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        connect_args["options"] = "-c default_transaction_read_only=on"
    # No pre-ping: it would double the round trips of every read. A dropped server
    # connection fails one request (a 503) and SQLAlchemy then invalidates the pool.
    return sa.create_engine(url, pool_size=8, max_overflow=16, pool_recycle=600,
                            connect_args=connect_args)
