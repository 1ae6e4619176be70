"""Run one node: the ABCI app, cometbft, the REST API and the voter as child processes.

They are separate processes so that read load never delays consensus (one Python
process cannot serve both under the GIL). If any child dies the others are stopped and
the supervisor exits non-zero with a message naming the culprit; while cometbft and the
app still run, the mempool is first drained into blocks as at a clean stop (DRAIN_S).

The children never outlive the supervisor, even when it gets no chance to stop them
(SIGKILL, the OOM killer, a container runtime's timeout): on Linux each is started with
PR_SET_PDEATHSIG = SIGKILL, so the kernel kills it when the supervisor dies, and all of
them share one process group of their own (Ctrl-C reaches only the supervisor, which
stops them in order; leftovers of the group are killed at the end). The home's lock
(NodeHome.lock) is held by the supervisor and inherited by the children, so a second
`memledger start` on a home refuses at once while any process of the node is alive.

Each child writes HOME/logs/NAME.log. None grows without bound: a log larger than
LOG_MAX_BYTES is rotated to NAME.log.1 (one previous copy kept, replacing the older one)
when the node starts and, while it runs, within LOG_CHECK_INTERVAL_S of passing the
limit. A running child keeps writing through its own O_APPEND descriptor, so the running
rotation copies the log to NAME.log.1 and truncates it in place (copy-truncate) rather
than renaming it; lines written during the copy itself can be lost.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

import httpx

from memledger.daemon import cometbft
from memledger.daemon.home import HomeInUseError, NodeConfig, NodeHome
from memledger.daemon.ports import bindable
from memledger.sdk.rpc import RpcClient, RpcError, laddr_to_url
from memledger.sdk.waiting import wait_until

log = logging.getLogger("memledger.daemon")

#: a child's log above this size is rotated to NAME.log.1 (one previous copy is kept, so a
#: child's logs take at most about twice this)
LOG_MAX_BYTES = 64 * 1024 * 1024
#: how often a running node checks its children's log sizes
LOG_CHECK_INTERVAL_S = 10.0
#: how long a stop waits for cometbft's mempool to empty into blocks: cometbft does not
#: keep its mempool across a restart, so a tx the API acknowledged as in it (wait=sync)
#: would be lost by a clean stop on a node whose peers do not hold it
DRAIN_S = 10.0


#: how often a node whose app is still starting says so (there is no limit: see
#: Supervisor._wait_for_app)
APP_PATIENCE_S = 30.0


class StopRequested(RuntimeError):
    """A signal came while the node was still starting."""


class StartupError(RuntimeError):
    pass


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]
    log_start: int = 0  # where this run's lines begin in the log


def _python_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "memledger.cli.main", *args]


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGKILL when this process dies (Linux only).

    The death signal is tied to the *thread* that forks, so spawn from the main thread.
    It survives exec (cleared only for set-id binaries), so it covers cometbft as well.
    If the parent is already gone by the time the child runs this, the child kills
    itself: the signal would never come.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before fork, not in the child
    parent = os.getpid()

    def preexec() -> None:
        prctl(ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL),
              ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def wait_for_tcp(address: str, timeout: float, proc: subprocess.Popen[bytes] | None = None,
                 cancelled: Callable[[], bool] | None = None) -> None:
    """Wait until `tcp://host:port` accepts connections (or the process dies, or
    `cancelled` says a stop was asked for: StopRequested)."""
    host, _, port = address.removeprefix("tcp://").rpartition(":")

    def accepts() -> bool:
        if cancelled is not None and cancelled():
            raise StopRequested("stop requested during startup")
        if proc is not None and proc.poll() is not None:
            raise StartupError(f"exited with code {proc.returncode} during startup")
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True

    wait_until(accepts, timeout, 0.1, what=f"{address} to accept connections",
               ignore=(OSError,), error=StartupError)


class Supervisor:
    """Start, watch and stop the processes of one node."""

    def __init__(
        self,
        home: NodeHome,
        *,
        api: bool = True,
        voter: bool | None = None,
        app_args: list[str] | None = None,
    ) -> None:
        self.home = home
        self.config: NodeConfig = home.load()
        self.api = api
        self.voter = self.config.voter if voter is None else voter
        self.app_args = app_args or []
        self.children: list[Child] = []
        self._stopping = False
        self._lock: IO[str] | None = None
        self._pgid = 0  # the children's process group: the first child's pid
        self.log_max_bytes = LOG_MAX_BYTES

    def _spawn(self, name: str, cmd: list[str]) -> Child:
        self.home.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.home.logs / f"{name}.log"
        rotate_log(log_path, self.log_max_bytes, running=False)
        log_file = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        log_start = log_file.seek(0, os.SEEK_END)
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            process_group=self._pgid, preexec_fn=die_with_parent(),
            pass_fds=(self._lock.fileno(),) if self._lock is not None else ())
        self._pgid = self._pgid or proc.pid
        child = Child(name, proc, log_path, log_file, log_start)
        self.children.append(child)
        return child

    def start(self, cancelled: Callable[[], bool] | None = None) -> None:
        home = str(self.home.root)
        taken = busy_node_ports(self.config, rest=self.api)
        if taken:
            raise StartupError("ports already in use: " + ", ".join(taken) + " (another "
                               "node or program listens there; a cometbft started against "
                               "another node's app port would replay its blocks into it)")
        app = self._spawn("app", _python_cmd("app", "--home", home, *self.app_args))
        self._wait_for_app(app, cancelled)
        if cancelled is not None and cancelled():
            raise StopRequested("stop requested during startup")
        binary = cometbft.find_cometbft()
        self._spawn("cometbft", [str(binary), "start", "--home", str(self.home.cometbft)])
        if self.api:
            voter_flag = "--voter" if self.voter else "--no-voter"
            self._spawn("api", _python_cmd("api", "--home", home, voter_flag))
        if self.voter:
            self._spawn("voter", _python_cmd("voter", "--home", home))

    def _wait_for_app(self, app: Child, cancelled: Callable[[], bool] | None) -> None:
        """Wait for the app's ABCI socket as long as the app lives: before it listens it
        may rebuild a projection that fell behind, minutes at a million memories, and a
        fixed limit would kill that rebuild at every start. Says what it is doing every
        APP_PATIENCE_S; Ctrl-C stops the wait."""
        waited = 0.0
        while True:
            try:
                wait_for_tcp(self.config.abci_address, APP_PATIENCE_S, app.proc, cancelled)
                return
            except StartupError as exc:
                if app.proc.poll() is not None:
                    raise StartupError(startup_failure(app, str(exc))) from exc
            waited += APP_PATIENCE_S
            last = last_log_line(app.log_path, since=app.log_start)
            print(f"memledger: app still starting after {waited:.0f}s"
                  + (f": {last}" if last else ""), file=sys.stderr, flush=True)

    def rotate_logs(self) -> None:
        """Copy-truncate every running child's log that is over the size limit."""
        for child in self.children:
            rotate_log(child.log_path, self.log_max_bytes, running=True)

    def poll(self) -> Child | None:
        """The first child that has exited, if any."""
        for child in self.children:
            if child.proc.poll() is not None:
                return child
        return None

    def stop(self, timeout: float = 15.0, drain_s: float = 0.0) -> None:
        """Stop in dependency order: clients first, then cometbft, then the app. With
        `drain_s`, cometbft and the app keep making blocks until the mempool is empty
        (at most that long) once nothing new can come in through the API."""
        self._stopping = True
        order = {"voter": 0, "api": 1, "cometbft": 2, "app": 3}
        for child in sorted(self.children, key=lambda c: order.get(c.name, 9)):
            if child.name == "cometbft" and drain_s > 0 and self._all_running("cometbft",
                                                                               "app"):
                self._drain_mempool(drain_s)
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
                try:
                    child.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    log.warning("%s did not stop in %.0fs; killing", child.name, timeout)
                    child.proc.kill()
                    child.proc.wait()
            child.log_file.close()
        if self._pgid:  # anything the children started and left behind
            try:
                os.killpg(self._pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _all_running(self, *names: str) -> bool:
        running = {c.name for c in self.children if c.proc.poll() is None}
        return all(name in running for name in names)

    def _drain_mempool(self, timeout: float) -> None:
        """Let the node commit what its mempool holds now (see `drain_mempool`); says so
        when it could not in `timeout` (peers that hold those txs may still commit them)."""
        with RpcClient(laddr_to_url(self.config.rpc_laddr), timeout=2.0) as rpc:
            left = drain_mempool(rpc, timeout)
        if left:
            print(f"memledger: stopping with {left} txs still in the mempool after "
                  f"{timeout:.0f}s (no block took them; peers that hold them may still "
                  "commit them)", file=sys.stderr, flush=True)

    def run(self) -> int:
        """Supervise until a signal (exit 0) or a child dies (exit 1).

        Refuses at once (exit 1) if another node holds the home.
        """
        try:
            self._lock = self.home.lock()
        except HomeInUseError as exc:
            print(f"memledger: error: {exc}", file=sys.stderr, flush=True)
            return 1
        try:
            return self._run()
        finally:
            if self._lock is not None:
                self._lock.close()  # the children's copies are closed: they have exited

    def _run(self) -> int:
        received: list[int] = []

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            received.append(signum)

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGHUP, on_signal)  # terminal closed: stop in order, too
        try:
            self.start(cancelled=lambda: bool(received))
        except StopRequested:
            print("memledger: shutting down (during startup)", flush=True)
            self.stop()
            return 0
        except (StartupError, cometbft.CometBFTError) as exc:
            print(f"memledger: startup failed: {exc}", file=sys.stderr)
            self.stop()
            return 1
        print(f"memledger: node running (home {self.home.root}, REST "
              f"http://{self.config.api_host}:{self.config.api_port}, RPC "
              f"{self.config.rpc_laddr})", flush=True)
        next_log_check = time.monotonic() + LOG_CHECK_INTERVAL_S
        while not received:
            if time.monotonic() >= next_log_check:
                self.rotate_logs()
                next_log_check = time.monotonic() + LOG_CHECK_INTERVAL_S
            dead = self.poll()
            if dead is not None:
                code = dead.proc.returncode
                last = last_log_line(dead.log_path, since=dead.log_start)
                said = f": {last}" if last else ""
                print(f"memledger: {dead.name} exited with code {code}{said}; stopping the "
                      f"node (see {dead.log_path})", file=sys.stderr, flush=True)
                # drained as at a clean stop (when cometbft and the app still run): a dead
                # voter or API must not lose the txs the API acknowledged (wait=sync)
                self.stop(drain_s=DRAIN_S)
                return 1
            time.sleep(0.2)
        print("memledger: shutting down", flush=True)
        self.stop(drain_s=DRAIN_S)
        return 0


def last_log_line(path: Path, limit: int = 300, since: int = 0) -> str:
    """The last non-empty line of a child's log (where a Python child's traceback ends
    in the error itself, e.g. an embedder that cannot load), cut to `limit` characters:
    the operator sees why in the one line the node prints, not only where to look. Only
    lines from byte `since` on count: an earlier run's last words are not this one's.
    A Go panic (cometbft) ends in a goroutine dump: its `panic:` line is the one quoted.
    SQLAlchemy ends its errors in a link to its docs: the error line before it is quoted."""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            if end < since:  # rotated (copy-truncate) meanwhile: all of it is this run's
                since = 0
            f.seek(max(since, end - 65536))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if _says_something(line)]
    panics = [line for line in lines if line.startswith("panic:")]
    said = panics[-1] if panics else lines[-1] if lines else ""
    return said[:limit]


#: the line SQLAlchemy puts after each error it raises: a link, not the error
_SQLALCHEMY_LINK = "(Background on this error at: https://sqlalche.me/"


def _says_something(line: str) -> bool:
    """Whether a log line can be the one quoted (not blank, not SQLAlchemy's doc link)."""
    text = line.strip()
    return bool(text) and not text.startswith(_SQLALCHEMY_LINK)


def startup_failure(child: Child, what: str) -> str:
    """One line on a child that failed to start: its name, what happened, the last line of
    its log (usually the error itself) and where the log is."""
    last = last_log_line(child.log_path, since=child.log_start)
    said = f": {last}" if last else ""
    return f"{child.name} {what}{said} (see {child.log_path})"


def drain_mempool(rpc: RpcClient, timeout: float, poll: float = 0.2) -> int:
    """Wait until the txs in cometbft's mempool now are in blocks, at most `timeout`;
    how many of them may not be (0 when done, or when cometbft cannot tell).

    Done when the mempool is empty, or when the blocks since the start hold at least as
    many txs as it did: the mempool is first in, first out, so txs that arrive meanwhile
    (through the RPC or from peers) do not keep a stop waiting.
    """
    deadline = time.monotonic() + timeout
    try:
        waiting = _mempool_size(rpc)
        counted = rpc.latest_height()
    except (RpcError, httpx.HTTPError, KeyError, TypeError, ValueError):
        return 0
    committed = 0
    while waiting > committed:
        if time.monotonic() >= deadline:
            return waiting - committed
        time.sleep(poll)
        try:
            if _mempool_size(rpc) == 0:
                return 0
            latest = rpc.latest_height()
            while counted < latest:
                last = min(latest, counted + 20)  # /blockchain answers 20 blocks at most
                metas = rpc.call("blockchain", {"minHeight": str(counted + 1),
                                                "maxHeight": str(last)})["block_metas"]
                committed += sum(int(meta["num_txs"]) for meta in metas)
                counted = last
        except (RpcError, httpx.HTTPError, KeyError, TypeError, ValueError):
            return 0
    return 0


def _mempool_size(rpc: RpcClient) -> int:
    return int(rpc.call("num_unconfirmed_txs", {"limit": "1"})["n_txs"])


def busy_node_ports(config: NodeConfig, rest: bool = True) -> list[str]:
    """The node's listening addresses that something else already holds, as `name port`."""
    wanted = [("ABCI", config.abci_address), ("RPC", config.rpc_laddr),
              ("P2P", config.p2p_laddr)]
    if rest:
        wanted.append(("REST", f"tcp://{config.api_host}:{config.api_port}"))
    taken = []
    for name, address in wanted:
        host, _, port = address.removeprefix("tcp://").rpartition(":")
        if not bindable(int(port), host or "0.0.0.0"):
            taken.append(f"{name} {host}:{port}")
    return taken


def rotate_log(path: Path, max_bytes: int, *, running: bool) -> bool:
    """Rotate ``path`` to ``path.1`` if it is larger than ``max_bytes``; True if it did.

    Before its child starts (``running=False``) the log is renamed. While a child writes
    it (``running=True``) it is copied to ``path.1`` and truncated in place instead: the
    child's O_APPEND descriptor keeps writing to this file, which a rename would not
    change, and after the truncation its writes land at the new end (offset 0 on). Either
    way the previous ``path.1`` is replaced. A failed copy (a full disk) still truncates:
    the limit is what keeps the disk from filling.
    """
    try:
        if path.stat().st_size <= max_bytes:
            return False
    except FileNotFoundError:
        return False
    old = path.with_name(path.name + ".1")
    try:
        if not running:
            os.replace(path, old)
            return True
        tmp = path.with_name(path.name + ".1.tmp")
        try:
            shutil.copyfile(path, tmp)
            os.replace(tmp, old)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            log.warning("could not keep a copy of %s before truncating it: %s", path, exc)
        os.truncate(path, 0)
    except OSError as exc:
        log.warning("could not rotate %s: %s", path, exc)
        return False
    return True
