"""A projection database URL checked before it is stored or used, without connecting.

`init --db-url` took any string (a typo surfaced only when the node started), and
`projection rebuild --db-url` met an unknown backend or a driver that is not installed
as a traceback. Both now say in one line what is wrong and what to write instead.
"""

from __future__ import annotations

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

#: the backends the projection has a schema and full-text search for
BACKENDS = ("sqlite", "postgresql")
EXAMPLES = "sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST/DATABASE"


class DbUrlError(ValueError):
    """A database URL memledger cannot use; the message is one line for the user."""


def redact(url: str) -> str:
    """`url` with its password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def check_db_url(url: str) -> None:
    """Raise DbUrlError unless `url` parses, names a supported backend and its driver
    imports (SQLAlchemy's default PostgreSQL driver is psycopg2; memledger installs
    psycopg 3, spelled `postgresql+psycopg://`)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        # not echoed: what does not parse cannot have its password hidden
        raise DbUrlError(f"cannot parse the database URL: write {EXAMPLES}") from None
    backend = parsed.get_backend_name()
    if backend not in BACKENDS:
        raise DbUrlError(f"unsupported database {backend!r} in {redact(url)}: memledger "
                         f"projects into SQLite or PostgreSQL ({EXAMPLES})")
    _check_driver(parsed, url)


def _check_driver(parsed: URL, url: str) -> None:
    """The URL's driver is known to SQLAlchemy and installed (imported, not connected)."""
    driver = parsed.get_driver_name()
    try:
        parsed.get_dialect().import_dbapi()
    except (NoSuchModuleError, ImportError):
        hint = ("write postgresql+psycopg:// (the driver memledger installs)"
                if parsed.get_backend_name() == "postgresql" else f"write {EXAMPLES}")
        raise DbUrlError(f"the database driver {driver!r} of {redact(url)} is unknown or "
                         f"not installed: {hint}") from None
