"""Writes that survive a power cut, for every layer that keeps files of its own.

A file is durable once its bytes are fsynced; a new name for it (a create, a rename into
a directory) once the directory is fsynced too. Config files, snapshots and the recall
indexes' commit points all need the same few steps, so they are written once, here.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_synced(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` and fsync it (its directory entry is the caller's to sync)."""
    with open(path, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a directory's entries (new files, a rename into it) survive a power cut."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int | None = None) -> None:
    """Replace the file at ``path`` with ``data`` in one step: written to a temporary file
    in the same directory, fsynced, then renamed over the old one. A failed write (a full
    disk) leaves the old file whole and no temporary behind.

    ``mode``: the new file's permission bits; by default the old file's, or 0644.
    """
    path = Path(path)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable (best effort)
        fsync_dir(path.parent)
