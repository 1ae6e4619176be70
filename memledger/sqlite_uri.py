"""Read-only SQLite `file:` URIs for paths under a node home, which may hold any character.

SQLite decodes %XX escapes in a URI's path and ends the path at the first `?` or `#`, so
`f"file:{path}?mode=ro"` names another file (or none) when the home holds `%`, `?` or
`#`: every read of it then failed while the writer, which opens the plain path, worked.
"""

from __future__ import annotations

import os
from urllib.parse import quote


def readonly_uri(path: str | os.PathLike[str]) -> str:
    """A `mode=ro` URI naming exactly `path` (open it with `sqlite3.connect(..., uri=True)`).

    An absolute path gets the empty authority (`file:///...`), so one starting with `//`
    is not taken for a host name."""
    text = os.fspath(path)
    escaped = quote(text, safe="/")
    prefix = "file://" if text.startswith("/") else "file:"
    return f"{prefix}{escaped}?mode=ro"
