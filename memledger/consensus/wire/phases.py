"""CPU time the app spends per ABCI method, for benches to divide by committed txs.

Why: on a shared 2-core machine wall-clock latencies mostly measure the neighbours; the
CPU seconds the app's own thread spent in CheckTx, RECHECK, FinalizeBlock and Commit do
not. The server charges each request's thread CPU time (`time.thread_time_ns`, two clock
reads per request) to its method; a RECHECK is charged apart from a new CheckTx. Nothing
here is consensus: the figures are answered on the query connection (`PHASES_PATH`)
and never reach a block.
"""

from __future__ import annotations

import json

#: ABCI query path answering `snapshot()` as JSON (no data; never proven)
PHASES_PATH = "/debug/phase_cpu"


class PhaseCpu:
    """method -> [calls, CPU ns], accumulated since the process started."""

    def __init__(self) -> None:
        self._totals: dict[str, list[int]] = {}

    def add(self, phase: str, cpu_ns: int) -> None:
        entry = self._totals.get(phase)
        if entry is None:
            self._totals[phase] = [1, cpu_ns]
        else:
            entry[0] += 1
            entry[1] += cpu_ns

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {phase: {"calls": calls, "cpu_ns": ns}
                for phase, (calls, ns) in sorted(self._totals.items())}

    def to_json(self) -> bytes:
        return json.dumps(self.snapshot(), sort_keys=True).encode()
