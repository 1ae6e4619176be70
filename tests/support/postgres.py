"""Re-exported from memledger.devtools.postgres (shared with bench/)."""

from memledger.devtools.postgres import (
    DEFAULT_DB,
    PostgresError,
    PostgresServer,
    create_database,
    drop_database,
    find_pg_bin,
    libpq_url,
    start_postgres,
    unique_db_name,
    with_database,
)

__all__ = ["DEFAULT_DB", "PostgresError", "PostgresServer", "create_database", "drop_database",
           "find_pg_bin", "libpq_url", "start_postgres", "unique_db_name", "with_database"]
