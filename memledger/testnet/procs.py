"""Find and signal the processes of one node home (Linux /proc).

The supervisor starts every child with ``start_new_session=True`` and keeps their pids to
itself, so a SIGKILL of the supervisor alone would orphan app, cometbft and voter. Every
one of those processes names the node home on its command line (``--home HOME`` or
``--home HOME/cometbft``), which is how we find them, whoever started them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from memledger.sdk.waiting import WaitTimeout, wait_until

#: role -> the ``memledger.cli.main`` subcommand that runs it
PY_ROLES = {"start": "supervisor", "app": "app", "voter": "voter", "api": "api"}


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def alive(pid: int) -> bool:
    """Running and not a zombie (a killed child we have not reaped yet counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _home_arg(argv: list[str]) -> str | None:
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == "--home":
            return os.path.realpath(value)
    for arg in argv:
        if arg.startswith("--home="):
            return os.path.realpath(arg.split("=", 1)[1])
    return None


def role_of(argv: list[str], home: Path) -> str | None:
    """Which part of the node at ``home`` this command line is, if any."""
    target = _home_arg(argv)
    if target is None:
        return None
    root = os.path.realpath(home)
    if target == os.path.join(root, "cometbft"):
        if argv and os.path.basename(argv[0]) == "cometbft" and "start" in argv:
            return "cometbft"
        return None
    if target != root:
        return None
    # `python -m memledger.cli.main ROLE` or the `memledger ROLE` script
    for i, arg in enumerate(argv):
        if arg == "memledger.cli.main" or (i > 0 and os.path.basename(arg) == "memledger"):
            after = argv[i + 1:]
            return PY_ROLES.get(after[0]) if after else None
    return None


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[-1].split()[1])


def _is_spawned_child(argv: list[str]) -> bool:
    """A multiprocessing `spawn` child (the REST process's read process)."""
    return any("multiprocessing.spawn import spawn_main" in a for a in argv)


def node_processes(home: Path) -> dict[str, list[int]]:
    """role -> live pids of the node at ``home`` (normally one pid per role). The REST
    process's read process names no home; it is found as the api's spawned child
    ("reads")."""
    found: dict[str, list[int]] = {}
    spawned: list[int] = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        argv = _cmdline(pid)
        role = role_of(argv, home)
        if role is not None and alive(pid):
            found.setdefault(role, []).append(pid)
        elif _is_spawned_child(argv):
            spawned.append(pid)
    apis = set(found.get("api", []))
    for pid in spawned:
        if _parent(pid) in apis and alive(pid):
            found.setdefault("reads", []).append(pid)
    return found


def signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait for ``pids`` to exit; returns those still alive at the deadline."""
    with contextlib.suppress(WaitTimeout):
        wait_until(lambda: not any(alive(p) for p in pids), timeout, 0.05,
                   what=f"pids {pids} to exit")
    return [p for p in pids if alive(p)]


def kill_node(home: Path, timeout: float = 10.0) -> None:
    """SIGKILL the supervisor first (so it cannot react), then every child, until none."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs = node_processes(home)
        if not procs:
            return
        signal_pids(procs.get("supervisor", []), signal.SIGKILL)
        rest = [p for role, pids in procs.items() if role != "supervisor" for p in pids]
        signal_pids(rest, signal.SIGKILL)
        wait_gone([p for pids in procs.values() for p in pids], 2.0)
    left = node_processes(home)
    if left:
        raise RuntimeError(f"processes of {home} survived SIGKILL: {left}")
