"""The supervisor's startup error and its children's logs, with stand-in children (no node).

- a child that dies during startup is named in the error, with the last line of its log
  and the log's path;
- a child's log over the size limit is rotated to NAME.log.1 when the node starts, and
  copy-truncated while it runs (the child keeps writing through its O_APPEND descriptor).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memledger.daemon import supervisor
from memledger.daemon.home import NodeConfig, NodeHome
from memledger.daemon.supervisor import StartupError, Supervisor, rotate_log
from memledger.sdk.waiting import wait_until
from tests.support.ports import free_port

# prints lines as fast as a chatty child would, until killed
CHATTY = ("import itertools, sys, time\n"
          "for i in itertools.count():\n"
          "    print(f'line {i:08d} ' + 'x' * 100, flush=True)\n"
          "    time.sleep(0.0005)\n")


@pytest.fixture()
def home(tmp_path: Path) -> NodeHome:
    node_home = NodeHome(tmp_path / "home")
    node_home.save(NodeConfig(abci_address=f"tcp://127.0.0.1:{free_port()}",
                              rpc_laddr=f"tcp://127.0.0.1:{free_port()}",
                              p2p_laddr=f"tcp://127.0.0.1:{free_port()}"))
    return node_home


@pytest.fixture()
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The Python children the supervisor starts run this script instead."""
    script: list[str] = []
    monkeypatch.setattr(supervisor, "_python_cmd",
                        lambda *args: [sys.executable, "-c", script[0]])
    yield script


def test_startup_error_names_the_child_its_last_log_line_and_log(
        home: NodeHome, stand_in: list[str]) -> None:
    stand_in.append("import sys\nprint('starting')\n"
                    "sys.exit('OverflowError: bind(): port must be 0-65535.')")
    sup = Supervisor(home, api=False, voter=False)
    try:
        with pytest.raises(StartupError) as info:
            sup.start()
    finally:
        sup.stop()
    log_path = home.logs / "app.log"
    assert str(info.value) == (f"app exited with code 1 during startup: OverflowError: "
                               f"bind(): port must be 0-65535. (see {log_path})")


def test_run_prints_the_startup_error_in_one_line(home: NodeHome, stand_in: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    stand_in.append("raise SystemExit('cannot open the state: disk full')")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        assert Supervisor(home, api=False, voter=False).run() == 1
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    err = capsys.readouterr().err.strip()
    assert err == ("memledger: startup failed: app exited with code 1 during startup: cannot "
                   f"open the state: disk full (see {home.logs / 'app.log'})")


def test_rotate_log_before_start_renames_and_keeps_one_copy(tmp_path: Path) -> None:
    log = tmp_path / "cometbft.log"
    log.write_bytes(b"a" * 100)
    assert not rotate_log(log, 100, running=False)  # at the limit: left alone
    log.write_bytes(b"b" * 101)
    (tmp_path / "cometbft.log.1").write_bytes(b"older")
    assert rotate_log(log, 100, running=False)
    assert not log.exists() and (tmp_path / "cometbft.log.1").read_bytes() == b"b" * 101
    assert not rotate_log(tmp_path / "missing.log", 100, running=False)


def test_copy_truncate_while_a_child_appends(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    with open(log, "ab") as out:
        child = subprocess.Popen([sys.executable, "-c", CHATTY], stdout=out)
    try:
        wait_until(lambda: log.stat().st_size > 200_000, 20, what="the child to write")
        assert rotate_log(log, 100_000, running=True)
        # the child goes on writing (a hole at its old offset would show at once)
        wait_until(lambda: log.stat().st_size >= 1000, 20, 0.01,
                   what="the child to write after the rotation")
    finally:
        child.kill()
        child.wait()
    old = (tmp_path / "app.log.1").read_bytes()
    new = log.read_bytes()
    assert len(old) > 200_000 and old.startswith(b"line 00000000")
    # the child's next writes landed at the start of the emptied file, not at its old
    # offset (which would leave a hole of NUL bytes and keep the size)
    assert b"\0" not in new[:1000] and new.startswith(b"line ")
    assert len(new) < len(old)
    first_new = int(new.split(b" ")[1])
    last_old = int(old.rstrip(b"\n").rsplit(b"\n", 1)[-1].split(b" ")[1])
    assert first_new > last_old


def test_supervisor_rotates_an_oversized_log_at_start_and_while_running(
        home: NodeHome, stand_in: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The real run loop: start (an old oversized app.log is rotated before the child
    starts), then the loop copy-truncates the growing log; SIGINT stops it."""
    home.logs.mkdir(parents=True)
    (home.logs / "app.log").write_bytes(b"from an earlier run\n" + b"x" * 300_000)
    monkeypatch.setattr(supervisor, "LOG_CHECK_INTERVAL_S", 0.2)
    stand_in.append(CHATTY)
    sup = Supervisor(home, api=False, voter=False)
    sup.log_max_bytes = 100_000
    spawn = sup._spawn

    def start(cancelled: object = None) -> None:  # the chatty child only: no cometbft,
        # no port to wait for
        spawn("app", supervisor._python_cmd("app"))
        rotated = (home.logs / "app.log.1").read_bytes()
        assert rotated.startswith(b"from an earlier run")
        started.set()

    monkeypatch.setattr(sup, "start", start)
    sizes: list[int] = []
    started = threading.Event()

    def watch_then_interrupt() -> None:
        started.wait(30)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            sizes.append((home.logs / "app.log").stat().st_size)
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    watcher = threading.Thread(target=watch_then_interrupt)
    watcher.start()
    try:
        assert sup._run() == 0
    finally:
        watcher.join()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert (home.logs / "app.log.1").read_bytes().startswith(b"line ")  # rotated running
    # the child writes ~200 KB/s: without rotation the log would pass 500 KB in 4 s
    assert max(sizes) < 100_000 + 200_000, max(sizes)
    assert (home.logs / "app.log").stat().st_size < 300_000


def test_an_app_that_takes_long_to_listen_is_waited_for_while_it_lives(
        home: NodeHome, stand_in: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A projection rebuild before the app listens can take minutes: no fixed limit
    kills it, and the operator is told what it is doing meanwhile."""
    port = int(home.load().abci_address.rsplit(":", 1)[1])
    stand_in.append("import socket, time\n"
                    "print('rebuilding the projection', flush=True)\n"
                    "time.sleep(1.5)\n"
                    f"s = socket.create_server(('127.0.0.1', {port}))\n"
                    "time.sleep(60)\n")
    monkeypatch.setattr(supervisor, "APP_PATIENCE_S", 0.5)
    monkeypatch.setattr(supervisor.cometbft, "find_cometbft", lambda: Path("/bin/true"))
    sup = Supervisor(home, api=False, voter=False)
    try:
        sup.start()  # no StartupError: the app listened after 1.5 s
    finally:
        sup.stop()
    said = [line for line in capsys.readouterr().err.splitlines()
            if line.startswith("memledger: app still starting after ")]
    # Until the child's interpreter is up and has printed (slow on a loaded machine) the
    # note has no reason; from its first line on, every note carries it.
    told = [i for i, line in enumerate(said) if line.endswith(": rebuilding the projection")]
    assert told, said
    assert all(line.endswith(": rebuilding the projection") for line in said[told[0]:]), said


def test_a_go_panic_is_quoted_by_its_panic_line_not_the_goroutine_dump(
        tmp_path: Path) -> None:
    log = tmp_path / "cometbft.log"
    earlier = b"panic: an earlier run's panic\n"
    dump = "".join(f"\tgithub.com/cometbft/cometbft/node.go:{i} +0x{i:x}\n"
                   for i in range(500))  # ~24 KB: more than the last 8 KiB
    log.write_bytes(earlier + b"I[...] starting\npanic: leveldb: corrupted manifest\n\n"
                    b"goroutine 1 [running]:\n" + dump.encode())
    said = supervisor.last_log_line(log, since=len(earlier))
    assert said == "panic: leveldb: corrupted manifest"
    assert supervisor.last_log_line(log, since=log.stat().st_size - 30).endswith("+0x1f3")


def test_a_sqlalchemy_error_is_quoted_by_its_error_not_its_doc_link(tmp_path: Path) -> None:
    log = tmp_path / "api.log"
    log.write_text("Traceback (most recent call last):\n  ...\n"
                   "sqlalchemy.exc.DatabaseError: (sqlite3.DatabaseError) database disk "
                   "image is malformed\n"
                   "(Background on this error at: https://sqlalche.me/e/20/4xp6)\n\n")
    assert supervisor.last_log_line(log) == ("sqlalchemy.exc.DatabaseError: (sqlite3."
                                             "DatabaseError) database disk image is malformed")
