"""Inbox cursors on disk: per agent key, the chain height up to which its inbox was shown.

Kept by the process that shows the inbox (the MCP server, or `memledger inbox`), so a
restart neither shows an event again nor skips one. Written atomically (temporary file,
fsync, rename): a crash leaves the old cursor or the new one, never a torn file.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from memledger.sdk.keys import make_private_dirs


class CursorError(RuntimeError):
    """A cursor file that cannot be read or written."""


class CursorStore:
    """`<dir>/<consumer>-<key hex>.json` holding `{"height": H}`."""

    def __init__(self, directory: Path, consumer: str) -> None:
        self.directory = directory
        self.consumer = consumer
        self._locks: dict[str, asyncio.Lock] = {}

    def path(self, key_hex: str) -> Path:
        return self.directory / f"{self.consumer}-{key_hex}.json"

    def lock(self, key_hex: str) -> asyncio.Lock:
        """One inbox read at a time per key: two at once would both show the same events."""
        return self._locks.setdefault(key_hex, asyncio.Lock())

    def load(self, key_hex: str) -> int:
        path = self.path(key_hex)
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as exc:
            raise CursorError(f"cannot read inbox cursor {path}: {exc}") from None
        height = doc.get("height") if isinstance(doc, dict) else None
        if not isinstance(height, int) or isinstance(height, bool) or height < 0:
            raise CursorError(f"inbox cursor {path} holds no height")
        return height

    def save(self, key_hex: str, height: int) -> None:
        path = self.path(key_hex)
        try:
            make_private_dirs(self.directory)
            tmp = path.with_suffix(".tmp")
            with open(tmp, "w") as fh:
                json.dump({"height": height}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            raise CursorError(f"cannot write inbox cursor {path}: {exc}") from None
