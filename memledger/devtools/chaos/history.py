"""The history of a campaign: every client operation and every fault, with its times.

An operation is recorded when it ends: its process (agent), node, kind, arguments, start
and end (seconds since the campaign began, monotonic), outcome and what it returned.
Outcomes: ``ok``; ``fail`` (the ledger refused it, with its result code name: it did not
happen); ``unknown`` (no answer, a timeout, a 5xx: it may or may not have happened).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

OK, FAIL, UNKNOWN = "ok", "fail", "unknown"


@dataclass
class Op:
    process: str
    node: int
    kind: str  # submit | vote | challenge | read | verified_read | status | fault
    args: dict[str, Any]
    start: float
    end: float = 0.0
    outcome: str = UNKNOWN
    code: str = ""
    result: dict[str, Any] = field(default_factory=dict)


class History:
    """Thread-safe, append-only list of operations."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self._ops: list[Op] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    @contextmanager
    def op(self, process: str, node: int, kind: str, **args: Any) -> Iterator[Op]:
        """Time an operation; the body sets outcome/code/result. An exception escaping the
        body leaves the outcome ``unknown`` (and is re-raised)."""
        rec = Op(process, node, kind, args, self.now())
        try:
            yield rec
        finally:
            rec.end = self.now()
            with self._lock:
                self._ops.append(rec)

    def add(self, rec: Op) -> None:
        with self._lock:
            self._ops.append(rec)

    @property
    def ops(self) -> list[Op]:
        with self._lock:
            return sorted(self._ops, key=lambda o: (o.start, o.end))

    def dump(self, path: Path) -> None:
        with open(path, "w") as f:
            for rec in self.ops:
                f.write(json.dumps(asdict(rec), sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: Path) -> History:
        out = cls()
        for line in path.read_text().splitlines():
            if line.strip():
                out.add(Op(**json.loads(line)))
        return out
