"""A small store of verified light blocks, so repeated reads do not refetch or re-verify.

Only blocks that passed verification go in. The optional file is the user's own trust
state (like a pinned hash), so it is trusted when loaded: keep it where only the user
can write. It holds the raw JSON and is re-parsed on load, and names the trust root its
blocks were verified from: a client with another root (another chain, a reset devnet,
another pin) must not take them as verified (`bind`).
"""

from __future__ import annotations

import bisect
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from memledger.sdk.light.errors import TrustError, VerificationError
from memledger.sdk.light.header import LightBlock, parse_light_block


class TrustedStore:
    """Verified light blocks by height; keeps the lowest (the root) and the newest ones."""

    def __init__(self, path: Path | None = None, *, keep: int = 64) -> None:
        self.path = path
        self.keep = max(2, keep)
        self._blocks: dict[int, LightBlock] = {}
        self._heights: list[int] = []
        #: the trust root the blocks were verified from (LightClient's root_identity)
        self.root: str | None = None
        #: verified reads run in worker threads: one save at a time keeps the blocks and
        #: the file whole
        self._saving = threading.Lock()
        if path is not None:
            self._load(path)

    def _load(self, path: Path) -> None:
        """Take the blocks of the store at `path`. A path that is no store (a key file,
        any other JSON) is refused, never overwritten later; a missing or empty file is a
        new store, whose directory must exist (a user's path is not created)."""
        if not path.parent.is_dir():
            raise TrustError("no_directory", f"the trust store {path}: its directory "
                                             f"{path.parent} does not exist")
        try:
            text = path.read_text()
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            raise _not_a_store(path, f"cannot read it ({exc})") from None
        if not text.strip():
            return
        root, blocks = _parse_store(path, text)
        self.root = root
        for raw in blocks:
            self._put(_parse_block(path, raw))

    def _put(self, lb: LightBlock) -> None:
        if lb.height not in self._blocks:
            bisect.insort(self._heights, lb.height)
        self._blocks[lb.height] = lb
        while len(self._heights) > self.keep:
            # Drop the second lowest: the lowest is the root, the top ones are recent.
            del self._blocks[self._heights.pop(1)]

    def bind(self, root: str) -> None:
        """Tie the store to the trust root its blocks are verified from: an empty store
        takes `root`; one that holds blocks of another root, or of a root it does not
        name (a file written before roots were recorded), is refused."""
        if self.root == root:
            return
        if not self._heights:
            self.root = root
            return
        where = f" {self.path}" if self.path is not None else ""
        raise TrustError("conflict", f"the trust store{where} holds headers verified from "
                                     "another trust root (another chain, or another pin); "
                                     "verify with another trust store, or delete it")

    def save(self, lb: LightBlock) -> None:
        with self._saving:
            self._put(lb)
            if self.path is not None and lb.raw is not None:
                self._write()

    def _write(self) -> None:
        """Replace the file whole (a temp file of its own beside it, only the user may
        read: other processes, e.g. several MCP servers, may share the store)."""
        assert self.path is not None
        doc = {"root": self.root, "blocks": [self._blocks[h].raw for h in self._heights
                          if self._blocks[h].raw is not None]}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".",
                                   suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as out:
                out.write(json.dumps(doc))
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, height: int) -> LightBlock | None:
        return self._blocks.get(height)

    def latest_at_or_below(self, height: int) -> LightBlock | None:
        i = bisect.bisect_right(self._heights, height)
        return self._blocks[self._heights[i - 1]] if i else None

    def lowest_above(self, height: int) -> LightBlock | None:
        i = bisect.bisect_right(self._heights, height)
        return self._blocks[self._heights[i]] if i < len(self._heights) else None

    def latest(self) -> LightBlock | None:
        return self._blocks[self._heights[-1]] if self._heights else None

    def __len__(self) -> int:
        return len(self._heights)


def _not_a_store(path: Path, why: str) -> TrustError:
    return TrustError("not_a_store", f"{path} is not a trust store: {why}; pass the path "
                                     "of a trust store, or of a file that does not exist")


def _parse_store(path: Path, text: str) -> tuple[str, list[Any]]:
    """The root and raw blocks of a store file: a JSON object with a string `root` (the
    store is bound before its first write) and a list `blocks`."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise _not_a_store(path, "it is not JSON") from None
    if not isinstance(doc, dict):
        raise _not_a_store(path, "it is not a JSON object")
    root, blocks = doc.get("root", ...), doc.get("blocks", ...)
    if not isinstance(root, str) or not isinstance(blocks, list):
        raise _not_a_store(path, "it has no string 'root' and list 'blocks'")
    return root, blocks


def _parse_block(path: Path, raw: Any) -> LightBlock:
    if not isinstance(raw, dict):
        raise _not_a_store(path, "a block in it is not a JSON object")
    try:
        return parse_light_block(raw.get("signed_header"), raw.get("validators"))
    except VerificationError as exc:
        raise _not_a_store(path, f"a block in it does not parse ({exc.message})") from None
