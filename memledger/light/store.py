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
from pathlib import Path

from memledger.light.errors import TrustError
from memledger.light.header import LightBlock, parse_light_block


class TrustedStore:
    """Verified light blocks by height; keeps the lowest (the root) and the newest ones."""

    def __init__(self, path: Path | None = None, *, keep: int = 64) -> None:
        self.path = path
        self.keep = max(2, keep)
        self._blocks: dict[int, LightBlock] = {}
        self._heights: list[int] = []
        #: the trust root the blocks were verified from (LightClient's root_identity)
        self.root: str | None = None
        if path is not None and path.exists():
            doc = json.loads(path.read_text())
            self.root = doc.get("root")
            for raw in doc.get("blocks", []):
                self._put(parse_light_block(raw["signed_header"], raw["validators"]))

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
        self._put(lb)
        if self.path is not None and lb.raw is not None:
            self._write()

    def _write(self) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"root": self.root, "blocks": [self._blocks[h].raw for h in self._heights
                          if self._blocks[h].raw is not None]}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, self.path)

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
