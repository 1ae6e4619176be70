"""Inbox cursors on disk: per agent key, the chain height up to which its inbox was shown.

Kept by the process that shows the inbox (the MCP server, or `memledger inbox`), so a
restart neither shows an event again nor skips one. Written atomically (temporary file,
fsync, rename): a crash leaves the old cursor or the new one, never a torn file.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
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

    @asynccontextmanager
    async def lock(self, key_hex: str) -> AsyncIterator[None]:
        """One inbox read at a time per key, in this process and across processes (two
        servers for one key, a server and the CLI): two at once would show the same
        events. An asyncio lock, then an flock on `<cursor>.lock` taken off the loop."""
        async with self._locks.setdefault(key_hex, asyncio.Lock()):
            try:
                make_private_dirs(self.directory)
                fd = os.open(self.path(key_hex).with_suffix(".lock"),
                             os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                raise CursorError(f"cannot lock inbox cursor {self.path(key_hex)}: "
                                  f"{exc}") from None
            try:
                await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the flock

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
