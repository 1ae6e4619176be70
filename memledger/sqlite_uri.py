"""SQLite URLs and URIs for paths under a node home, which may hold any character.

Two parsers stand between a path and the file SQLite opens, and each cuts at a `?`:
- SQLite decodes %XX escapes in a `file:` URI's path and ends the path at the first `?`
  or `#`, so `f"file:{path}?mode=ro"` names another file (or none) when the home holds
  `%`, `?` or `#`.
- SQLAlchemy ends a `sqlite:///` URL's path at the first `?` and drops the rest, so the
  writer of a home `/srv/a?b` opened the file `/srv/a`, outside the home.
`sqlite_url` writes such a path as a `file:` URI SQLAlchemy hands to SQLite whole, and
`sqlite_path` reads either form back to the path on disk.
"""

from __future__ import annotations

import os
from urllib.parse import quote, unquote

from sqlalchemy.engine import make_url


def _file_uri(text: str) -> str:
    """A `file:` URI naming exactly `text`. An absolute path gets the empty authority
    (`file:///...`), so one starting with `//` is not taken for a host name."""
    escaped = quote(text, safe="/")
    return f"file://{escaped}" if text.startswith("/") else f"file:{escaped}"


def readonly_uri(path: str | os.PathLike[str]) -> str:
    """A `mode=ro` URI naming exactly `path` (open it with `sqlite3.connect(..., uri=True)`)."""
    return f"{_file_uri(os.fspath(path))}?mode=ro"


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """A SQLAlchemy URL naming exactly the SQLite file `path`: the plain form when it
    parses back to `path`, a `file:` URI with `uri=true` when the path holds a `?`."""
    text = os.fspath(path)
    if "?" not in text:
        return f"sqlite:///{text}"
    return f"sqlite:///{_file_uri(text)}?uri=true"


def sqlite_path(url: str) -> str | None:
    """The file a SQLite URL names (either form of `sqlite_url`, or a user's own URL),
    or None when it names no file (another backend, an in-memory database)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if parsed.query.get("uri") == "true" and database.startswith("file:"):
        rest = database[len("file:"):].split("?", 1)[0].split("#", 1)[0]
        if rest.startswith("//"):
            rest = rest[2:]  # the authority: empty or `localhost`, the only ones SQLite takes
            rest = rest[len("localhost"):] if rest.startswith("localhost/") else rest
        database = unquote(rest)
        if database == ":memory:" or parsed.query.get("mode") == "memory":
            return None
    if not database or database == ":memory:":
        return None
    return database
