"""CPU seconds of local processes from /proc (Linux), for benches.

Why: on a shared machine, what a process costs per unit of work is its own CPU time
(utime + stime), not the wall clock its clients see. A process's live children count too
(the app's signature helper is one), read the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()  # fields from 3 (state) on


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (0.0 once it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK  # stat fields 14 and 15


def children(pid: int) -> list[int]:
    """Live direct children of `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and fields[1] == str(pid):  # stat field 4: ppid
                found.append(int(entry))
    return sorted(found)


def tree_cpu_seconds(pid: int) -> dict[int, float]:
    """pid -> CPU seconds for `pid` and its live descendants."""
    out: dict[int, float] = {}
    todo = [pid]
    while todo:
        current = todo.pop()
        out[current] = cpu_seconds(current)
        todo.extend(children(current))
    return out
