"""The private PostgreSQL fixture yields a real, writable server."""

from __future__ import annotations

import psycopg
import pytest

from tests.support.postgres import libpq_url

pytestmark = pytest.mark.postgres


def test_select_create_insert_read(postgres_url: str) -> None:
    assert postgres_url.startswith("postgresql+psycopg://")
    with psycopg.connect(libpq_url(postgres_url)) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.execute("CREATE TABLE fixture_check (id int primary key, body text)")
        conn.execute("INSERT INTO fixture_check VALUES (1, 'hello')")
        conn.commit()
    with psycopg.connect(libpq_url(postgres_url)) as conn:
        assert conn.execute("SELECT body FROM fixture_check WHERE id = 1").fetchone() == ("hello",)
        conn.execute("DROP TABLE fixture_check")
        conn.commit()


def test_fresh_database_is_isolated(fresh_postgres_url: str) -> None:
    with psycopg.connect(libpq_url(fresh_postgres_url)) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
        assert tables == (0,)
