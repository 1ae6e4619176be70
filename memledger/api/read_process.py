"""Reads in a process of their own: the projection reads and the recall indexes run in a
child of the REST process, so that a search never holds the interpreter lock the event
loop needs for writes, `/health` and shedding.

With reads on threads of the REST process, 300 concurrent hybrid searches kept the GIL
busy enough that a write's p99 grew 2-6x and a shed read waited for the event loop
(BENCHMARKS.md §15, isolation). The index followers' embedding shared that lock too:
about half of the REST process's CPU under a write burst. Here the child holds the
vector and word indexes with their followers, opens its own projection connections, and
runs each read `func(conn, *args)` it is sent; the REST process keeps only the event
loop, the writes and the gate that sheds reads.

The child runs at background priority as a whole (memledger.priority). It is started
with `spawn` (no fork of a threaded process) and answers on one pipe per read slot, plus
one for control (status, metrics, stop). When it dies the read under way gets a 503
`reads_unavailable` and the next read starts a new child; when the REST process dies the
child sees its pipes close and exits.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from memledger.api.problems import Problem
from memledger.api.settings import ApiSettings

T = TypeVar("T")

log = logging.getLogger("memledger.api")

#: how long the REST process waits for a new child to open its indexes and say it is ready
START_TIMEOUT_S = 300.0
#: how long a new read process waits for an old one to let go of the word index
WORDS_BUSY_WAIT_S = 10.0
#: after a failed start, reads are answered 503 for this long before the next try
RETRY_START_S = 5.0


class ReadsUnavailable(Exception):
    """The read process could not be started (its own error is in the message)."""


@dataclass(frozen=True)
class Ready:
    """What the child tells the REST process once it serves."""

    has_recall: bool
    has_words: bool


class _StateMarker:
    """Stands for the child's own ApiState in a read's arguments (the REST process's
    state holds sockets and threads that do not cross a process boundary)."""

    def __reduce__(self) -> str:
        return "THE_STATE"


THE_STATE = _StateMarker()


class ReadProcess:
    """The REST process's handle on its read process: runs reads there, one per slot at
    a time, and starts a new child when the old one is gone."""

    def __init__(self, settings: ApiSettings, slots: int) -> None:
        self.settings = settings
        self.slots = max(1, slots)
        self.ready = Ready(False, False)
        self.restarts = 0
        self._start_lock = threading.Lock()
        self._control_lock = threading.Lock()
        self._proc: Any = None
        self._control: Connection | None = None
        self._pipes: queue.SimpleQueue[tuple[int, Connection]] = queue.SimpleQueue()
        self._generation = 0
        self._closed = False
        self._failed_at = 0.0
        self.start_error = ""
        self._start()

    # ------------------------------------------------------------------ lifecycle
    def _start(self) -> None:
        """Start a child and wait for it to serve; its startup error is raised here (an
        embedder that cannot load fails the REST process's start, as in-process)."""
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = zip(*(ctx.Pipe() for _ in range(self.slots + 1)), strict=True)
        proc = ctx.Process(target=serve, args=(self.settings, list(theirs)),
                           name="memledger-reads", daemon=True)
        proc.start()
        for conn in theirs:
            conn.close()
        control, *pipes = ours
        try:
            if not control.poll(START_TIMEOUT_S):
                raise ReadsUnavailable(f"the read process did not start within "
                                       f"{START_TIMEOUT_S:.0f} s")
            kind, value = control.recv()
        except (EOFError, OSError):
            kind, value = "failed", ReadsUnavailable(
                f"the read process exited while starting (code {proc.exitcode})")
        if kind != "ready":
            proc.join(5)
            if proc.is_alive():
                proc.kill()
            for conn in ours:
                conn.close()
            raise value
        self.ready = value
        self._proc, self._control = proc, control
        self._generation += 1
        for pipe in pipes:
            self._pipes.put((self._generation, pipe))

    def _restart(self, generation: int) -> None:
        """Start a new child unless another read already did (for `generation`), or a
        start failed less than RETRY_START_S ago. A failed start leaves no child; the
        reads meanwhile are answered 503 with its reason."""
        with self._start_lock:
            if self._closed or generation != self._generation:
                return
            if self._proc is None and time.monotonic() < self._failed_at + RETRY_START_S:
                return
            if self._proc is not None:
                log.error("the read process is gone (exit code %s); starting a new one",
                          self._proc.exitcode)
            self._stop_child()
            self.restarts += 1
            try:
                self._start()
            except Exception as exc:  # noqa: BLE001 - said on every read until one starts
                self._failed_at = time.monotonic()
                self.start_error = f"{type(exc).__name__}: {exc}"
                log.error("the read process cannot start: %s", self.start_error)

    def ensure_running(self) -> None:
        """Start a new child if the current one has exited (the readiness probe asks, so
        a node with no reads coming does not stay without one); raises when none runs."""
        proc = self._proc
        if proc is None or not proc.is_alive():
            self._restart(self._generation)
        if self._proc is None:
            raise ReadsUnavailable(self.start_error)

    def _stop_child(self) -> None:
        proc, control = self._proc, self._control
        if control is not None:
            try:
                with self._control_lock:
                    control.send(("stop", None))
            except (OSError, ValueError):
                pass
            control.close()
        if proc is not None:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        while True:
            try:
                _, pipe = self._pipes.get_nowait()
            except queue.Empty:
                break
            pipe.close()
        self._proc = self._control = None

    def close(self) -> None:
        with self._start_lock:
            self._closed = True
            self._generation += 1  # pipes out on reads now close as they come back
            self._stop_child()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else int(self._proc.pid)

    # ------------------------------------------------------------------ calls
    def run(self, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` in the child, with THE_STATE standing for its state. Blocking:
        call it from a read thread (it waits on a pipe, without the GIL)."""
        generation, pipe = self._pipe()
        try:
            pipe.send((func, args))
            kind, value = pipe.recv()
        except (EOFError, OSError) as exc:
            pipe.close()
            self._restart(generation)
            raise _unavailable("this node's read process exited during the read; a new "
                               "one is starting, retry") from exc
        if generation == self._generation:
            self._pipes.put((generation, pipe))
        else:
            pipe.close()
        if kind == "err":
            raise value
        return value  # type: ignore[no-any-return]

    def _pipe(self) -> tuple[int, Connection]:
        """A free pipe of the current child (pipes of an old one are closed on the way)."""
        while True:
            if self._closed:
                raise _unavailable("this node is shutting down")
            if self._proc is None:  # the last start failed: try again, or say why
                self._restart(self._generation)
                if self._proc is None:
                    raise _unavailable(f"this node's read process cannot start "
                                       f"({self.start_error}); retry")
            try:
                generation, pipe = self._pipes.get(timeout=1.0)
            except queue.Empty:
                continue
            if generation == self._generation:
                return generation, pipe
            pipe.close()

    def control(self, what: str, arg: Any = None) -> Any:
        """Ask the child's control thread (status, metrics): never queued behind reads."""
        with self._control_lock:
            if self._control is None:
                raise ReadsUnavailable("the read process is not running")
            try:
                self._control.send((what, arg))
                kind, value = self._control.recv()
            except (EOFError, OSError) as exc:
                raise ReadsUnavailable("the read process exited") from exc
        if kind == "err":
            raise value
        return value


def _unavailable(detail: str) -> Problem:
    problem = Problem(503, "reads_unavailable", detail, retry_after_s=1)
    problem.headers["Retry-After"] = "1"
    return problem


class RemoteCollector(Collector):
    """The child's recall and word-index metrics, fetched at scrape time."""

    def __init__(self, reads: ReadProcess) -> None:
        self.reads = reads

    def collect(self) -> list[Metric]:
        restarts = CounterMetricFamily(
            "memledger_api_read_process_restarts",
            "Read processes started after the first (one died, or could not start)")
        restarts.add_metric([], self.reads.restarts)
        try:
            families: list[Metric] = self.reads.control("metrics")
        except ReadsUnavailable as exc:
            log.warning("metrics: %s", exc)
            return [restarts]
        return [restarts, *families]


# ---------------------------------------------------------------------- the child
def serve(settings: ApiSettings, conns: list[Connection]) -> None:
    """The child's main: open the indexes and the projection, say ready, then answer
    reads on a thread per slot and control requests here until told to stop or the REST
    process's pipes close."""
    from memledger.priority import run_in_background

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the REST process stops us
    run_in_background()  # before any thread starts: they inherit it
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(levelname)s: %(name)s (reads): %(message)s")
    control, *pipes = conns
    try:
        state = _child_state(settings)
    except BaseException as exc:  # noqa: BLE001 - told to the REST process, then exit
        control.send(("failed", _portable(exc)))
        sys.exit(1)
    from memledger.api.app import freeze_startup_objects

    freeze_startup_objects()  # the indexes' startup objects too
    control.send(("ready", Ready(state.recall is not None, state.words is not None)))
    for i, pipe in enumerate(pipes):
        threading.Thread(target=_answer_reads, args=(state, pipe), daemon=True,
                         name=f"memledger-read-{i}").start()
    if _answer_control(state, control):
        state.close()
    else:  # the REST process is gone: go at once, as the indexes did when it died with
        os._exit(0)  # them in it (a new REST process's read process opens them next)


def _child_state(settings: ApiSettings) -> Any:
    from memledger.api.app import start_recall, start_words
    from memledger.api.db import readonly_engine
    from memledger.api.deps import ApiState
    from memledger.api.metrics import ApiMetrics
    from memledger.sdk.rpc import RpcClient

    engine = readonly_engine(settings.db_url)
    recall = start_recall(settings, engine)
    try:
        # the read process of a REST process that just died may hold it a moment longer
        words = start_words(settings, engine, busy_wait_s=WORDS_BUSY_WAIT_S)
    except BaseException:
        if recall is not None:
            recall.stop()
        raise
    return ApiState(settings=settings, engine=engine,
                    rpc=RpcClient(settings.rpc_url, timeout=settings.rpc_timeout_s),
                    probe=RpcClient(settings.rpc_url, timeout=2.0),
                    metrics=ApiMetrics(engine), recall=recall, words=words)


def _answer_reads(state: Any, pipe: Connection) -> None:
    while True:
        try:
            func, args = pipe.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[str, Any] = ("ok", func(*(state if a is THE_STATE else a
                                                    for a in args)))
        except Exception as exc:  # noqa: BLE001 - the REST process answers it
            answer = ("err", _portable(exc))
        try:
            pipe.send(answer)
        except (OSError, ValueError):
            return
        except Exception as exc:  # noqa: BLE001 - an answer that does not pickle
            pipe.send(("err", RuntimeError(f"unsendable read answer: {exc}")))


def _answer_control(state: Any, control: Connection) -> bool:
    """Answer status and metrics requests; True when told to stop, False when the REST
    process's end of the pipe closed."""
    from memledger.api.metrics import RecallCollector, WordsCollector

    collectors: list[Collector] = []
    if state.recall is not None:
        collectors.append(RecallCollector(state.recall))
    if state.words is not None:
        collectors.append(WordsCollector(state.words))
    while True:
        try:
            what, arg = control.recv()
        except (EOFError, OSError):
            return False
        if what == "stop":
            return True
        try:
            if what == "status":
                value: Any = (None if state.recall is None else state.recall.status(
                    state.recall.projection_height if arg is None else arg))
            elif what == "metrics":
                value = [family for c in collectors for family in c.collect()]
            else:
                raise ValueError(f"unknown control request {what!r}")
            answer: tuple[str, Any] = ("ok", value)
        except Exception as exc:  # noqa: BLE001 - the REST process answers it
            answer = ("err", _portable(exc))
        control.send(answer)


def _portable(exc: BaseException) -> BaseException:
    """The exception itself when it crosses a pipe intact, else a RuntimeError naming it
    (some library errors take constructor arguments pickle cannot give back)."""
    import pickle

    try:
        back = pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any failure means: send a plain stand-in
        back = None
    if isinstance(back, BaseException) and type(back) is type(exc):
        return exc
    return RuntimeError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")
