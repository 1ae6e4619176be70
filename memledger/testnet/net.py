"""N-validator test nets on one machine: generate homes, run them, break them, check them.

    net = Testnet.create(tmp / "net", 4)      # homes DIR/node0..3 + DIR/testnet.json
    net.up(voter=True)                         # every node via `memledger start`
    net.node(2).kill()                         # SIGKILL supervisor, app, cometbft, voter
    net.node(2).start()
    report = net.check()                       # headers + projections agree?
    net.down()

Each node is a normal `memledger start` supervisor in its own session (stdout in
HOME/logs/supervisor.log, children's logs beside it). Its processes are found through
their command lines (see memledger.testnet.procs), so another process can stop a net it did
not start (`memledger testnet down`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import httpx

from memledger.daemon import cometbft
from memledger.daemon.home import NodeConfig, NodeHome
from memledger.sdk.rpc import RpcClient, RpcError, laddr_to_url
from memledger.sdk.waiting import WaitTimeout, wait_until
from memledger.testnet import procs as testnet_procs
from memledger.testnet.consistency import CheckReport, NodeTarget, check
from memledger.testnet.gen import generate, generate_extra_node
from memledger.testnet.layout import (
    DEFAULT_CHAIN_ID,
    LOCAL,
    NodeSpec,
    TestnetSpec,
    busy_ports,
    free_base_port,
    node_specs,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SPARE_BLOCKS = 4  # port blocks kept free for nodes added later (add_node)
#: how long a node's supervisor may take to finish exiting once its processes are gone
REAP_TIMEOUT_S = 30.0


class NodeError(RuntimeError):
    """A node did not start, stop or reach a height; the message carries its log tails."""


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class TestnetNode:
    """One node home of a net and the processes running it."""

    __test__ = False

    def __init__(self, root: Path, spec: NodeSpec) -> None:
        self.spec = spec
        self.node_home = NodeHome(root / spec.name)
        self.home: Path = self.node_home.root
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # --- identity ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def index(self) -> int:
        return self.spec.index

    @property
    def is_validator(self) -> bool:
        return self.spec.is_validator

    @property
    def config(self) -> NodeConfig:
        return self.node_home.load()

    @property
    def rpc_url(self) -> str:
        return laddr_to_url(self.config.rpc_laddr)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.spec.api_port}"

    @property
    def db_url(self) -> str:
        return self.node_home.db_url(self.config)

    @property
    def validator_pubkey(self) -> bytes:
        return cometbft.validator_pubkey(self.node_home.cometbft)

    @property
    def node_id(self) -> str:
        return cometbft.node_id(self.node_home.cometbft)

    def target(self) -> NodeTarget:
        return NodeTarget(self.name, self.rpc_url, self.db_url)

    def rpc(self, timeout: float = 10.0) -> RpcClient:
        return RpcClient(self.rpc_url, timeout=timeout)

    # --- processes --------------------------------------------------------------------

    def processes(self) -> dict[str, list[int]]:
        return testnet_procs.node_processes(self.home)

    @property
    def running(self) -> bool:
        self._reap(block=False)
        return bool(self.processes())

    def start(self, *, api: bool = False, voter: bool | None = None,
              app_args: Sequence[str] = (), wait: bool = True,
              timeout: float = 60.0) -> TestnetNode:
        """`memledger start` for this home; ``app_args`` go to the app (fault hooks)."""
        if self.running:
            raise NodeError(f"{self.name} is already running: {self.processes()}")
        self._wait_ports_free()
        cmd = [sys.executable, "-m", "memledger.cli.main", "start", "--home", str(self.home)]
        if not api:
            cmd.append("--no-api")
        if voter is False:
            cmd.append("--no-voter")
        cmd += [f"--app-arg={a}" for a in app_args]
        self.node_home.logs.mkdir(parents=True, exist_ok=True)
        self._log = open(self.node_home.logs / "supervisor.log", "ab")  # noqa: SIM115
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env=env, cwd=self.home,
                                      start_new_session=True)
        if wait:
            self.wait_ready(timeout)
        return self

    def _wait_ports_free(self, timeout: float = 10.0) -> None:
        wait_until(lambda: not busy_ports([self.spec]), timeout, 0.2,
                   what=f"{self.name}'s ports to be free (another net running?)",
                   error=NodeError)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM the supervisor (it stops its children in order); SIGKILL leftovers."""
        procs = self.processes()
        first = procs.get("supervisor") or [p for pids in procs.values() for p in pids]
        testnet_procs.signal_pids(first, signal.SIGTERM)
        testnet_procs.wait_gone(first, timeout)
        rest = [p for pids in self.processes().values() for p in pids]
        testnet_procs.signal_pids(rest, signal.SIGTERM)
        testnet_procs.wait_gone(rest, 10.0)
        testnet_procs.kill_node(self.home)
        return self._reap()

    def kill(self) -> None:
        """SIGKILL every process of the node (crash: no shutdown code runs anywhere)."""
        testnet_procs.kill_node(self.home)
        self._reap()

    def kill_app(self) -> int:
        """SIGKILL only the ABCI app; cometbft then exits and the supervisor stops the rest."""
        pids = self.processes().get("app", [])
        if not pids:
            raise NodeError(f"{self.name}: no app process to kill")
        testnet_procs.signal_pids(pids, signal.SIGKILL)
        return pids[0]

    def wait_exit(self, timeout: float = 60.0) -> int | None:
        """Wait until no process of the node is left; the supervisor's code if we own it."""
        wait_until(lambda: not self.processes(), timeout, 0.1,
                   what=f"every process of {self.name} to exit",
                   error=lambda msg: NodeError(f"{msg}: {self.processes()}\n{self.log_tail()}"))
        return self._reap()

    def _reap(self, block: bool = True) -> int | None:
        """The supervisor's exit code, once it has exited. Blocking, it is given
        REAP_TIMEOUT_S: its processes are counted gone by their command lines, which a
        process loses early in its exit, and on a loaded machine the rest of an exit
        has taken over 5 s (CI, session 31)."""
        if self._proc is None:
            return None
        code = self._proc.wait(REAP_TIMEOUT_S) if block else self._proc.poll()
        if code is not None and self._log is not None:
            self._log.close()
            self._log = None
        return code

    # --- chain ------------------------------------------------------------------------

    def height(self) -> int | None:
        """Latest block height, or None if the RPC does not answer."""
        try:
            with self.rpc(timeout=3) as c:
                return c.latest_height()
        except (httpx.HTTPError, RpcError, OSError, KeyError):
            return None

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the RPC answers (it only does after the ABCI handshake)."""
        def answers() -> bool:
            if self._proc is not None and self._proc.poll() is not None:
                raise NodeError(f"{self.name} exited with {self._proc.returncode} while "
                                f"starting\n{self.log_tail()}")
            return self.height() is not None

        wait_until(answers, timeout, 0.2, what=f"{self.name}'s RPC",
                   error=lambda msg: NodeError(f"{msg}\n{self.log_tail()}"))

    def wait_height(self, height: int, timeout: float = 60.0) -> int:
        def reached() -> tuple[int] | None:  # a tuple: height 0 is an answer too
            current = self.height()
            return (current,) if current is not None and current >= height else None

        return wait_until(reached, timeout, 0.2, what=f"{self.name} to reach height {height}",
                          error=lambda msg: NodeError(f"{msg} (at {self.height()})\n"
                                                      f"{self.log_tail()}"))[0]

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for path in sorted(self.node_home.logs.glob("*.log")):
            out.append(f"--- {self.name}/{path.name}\n{_tail(path, lines)}")
        return "\n".join(out)


class Testnet:
    """A generated net (DIR/testnet.json + DIR/nodeI homes) and its nodes."""

    __test__ = False

    def __init__(self, root: Path, spec: TestnetSpec) -> None:
        self.root = Path(root).resolve()
        self.spec = spec
        self.nodes = [TestnetNode(self.root, n) for n in spec.nodes]

    @classmethod
    def create(cls, root: str | os.PathLike[str], validators: int = 4, *,
               chain_id: str = DEFAULT_CHAIN_ID, base_port: int | None = None,
               powers: list[int] | None = None, db_url_template: str = "",
               voter: bool = True, app_state: dict[str, Any] | None = None,
               flavour: str = LOCAL, postgres: bool = False) -> Testnet:
        """Generate homes for ``validators`` nodes; a free base port is picked if none."""
        path = Path(root).resolve()
        if base_port is None:
            base_port = free_base_port(validators + SPARE_BLOCKS)
        spec = TestnetSpec(chain_id=chain_id, base_port=base_port,
                           nodes=node_specs(validators, base_port, powers), flavour=flavour,
                           db_url_template=db_url_template, voter=voter, postgres=postgres)
        generate(path, spec, app_state)
        return cls(path, spec)

    @classmethod
    def load(cls, root: str | os.PathLike[str]) -> Testnet:
        path = Path(root).resolve()
        return cls(path, TestnetSpec.load(path))

    # --- access -----------------------------------------------------------------------

    @property
    def chain_id(self) -> str:
        return self.spec.chain_id

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def validators(self) -> list[TestnetNode]:
        return [n for n in self.nodes if n.is_validator]

    def node(self, i: int) -> TestnetNode:
        return self.nodes[i]

    def __iter__(self) -> Iterator[TestnetNode]:
        return iter(self.nodes)

    def rpc_urls(self, nodes: Sequence[TestnetNode] | None = None) -> list[str]:
        return [n.rpc_url for n in (nodes if nodes is not None else self.nodes)]

    def targets(self, nodes: Sequence[TestnetNode] | None = None) -> list[NodeTarget]:
        return [n.target() for n in (nodes if nodes is not None else self.nodes)]

    # --- lifecycle --------------------------------------------------------------------

    def _require_local(self) -> None:
        if self.spec.flavour != LOCAL:
            raise NodeError(f"{self.root} was generated for docker-compose; run it with "
                            "`docker compose up`, or generate a local net")

    def up(self, *, api: bool = False, voter: bool | None = None, timeout: float = 120.0,
           progress: Callable[[str], None] | None = None) -> Testnet:
        """Start every stopped node; wait (``timeout`` in all) until all answer and the
        chain has a block. ``progress`` is told each step.

        On failure only the nodes this call started are stopped again: a node that was
        already running is someone else's (a healthy validator beside the one that failed
        to restart), and stopping it would turn one broken node into a stopped net.
        """
        self._require_local()
        say = progress or (lambda _message: None)
        deadline = time.monotonic() + timeout
        started: list[TestnetNode] = []
        try:
            for n in [n for n in self.nodes if not n.running]:
                say(f"starting {n.name} (rpc {n.rpc_url})")
                n.start(api=api, voter=voter, wait=False)
                started.append(n)
            for n in started:
                n.wait_ready(max(1.0, deadline - time.monotonic()))
                say(f"{n.name} answers on {n.rpc_url}")
            say("waiting for the first block")
            self.wait_height(1, timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.down(nodes=started)
            raise
        return self

    def down(self, timeout: float = 30.0, nodes: Sequence[TestnetNode] | None = None) -> None:
        """Stop the given nodes (default: every node): SIGTERM all their supervisors at
        once, then SIGKILL what is left."""
        group = list(nodes if nodes is not None else self.nodes)
        for n in group:
            procs = n.processes()
            testnet_procs.signal_pids(procs.get("supervisor", []), signal.SIGTERM)
        with contextlib.suppress(WaitTimeout):
            wait_until(lambda: not any(n.processes() for n in group), timeout, 0.1,
                       what="every supervisor to stop")
        for n in group:
            n.stop(timeout=5)

    def __enter__(self) -> Testnet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def add_node(self, *, state_sync: bool = False) -> bytes:
        """Generate a non-validator home that joins this net; returns its validator pubkey.

        The node is ``net.nodes[-1]`` (not started); a validator-add governance proposal
        with this key promotes it. With ``state_sync`` it restores a recent snapshot from
        its peers (trusting a header of a running node) instead of replaying every block.
        """
        sources = [n for n in self.nodes if n.running][:2] if state_sync else []
        if state_sync and not sources:
            raise NodeError("state sync needs a running node to take its trust point from")
        trust = None
        if sources:  # asked before the home is made: a failure leaves no half-made node
            try:
                trust = cometbft.trust_point(sources[0].rpc_url)
            except Exception as exc:  # noqa: BLE001 - any failure to ask is one clear error
                raise NodeError(f"cannot take a trust point from {sources[0].name}: "
                                f"{exc}") from None
        node = generate_extra_node(self.root, self.spec)
        added = TestnetNode(self.root, node)
        self.nodes.append(added)
        if trust is not None:
            height, block_hash = trust
            cometbft.configure_state_sync(added.node_home.cometbft,
                                          [n.rpc_url for n in sources], height, block_hash)
        return added.validator_pubkey

    # --- chain ------------------------------------------------------------------------

    def heights(self) -> dict[str, int | None]:
        return {n.name: n.height() for n in self.nodes}

    def wait_height(self, height: int, nodes: Sequence[TestnetNode] | None = None,
                    timeout: float = 60.0) -> None:
        """Until every given node (default: all) reports at least ``height``."""
        deadline = time.monotonic() + timeout
        for n in nodes if nodes is not None else self.nodes:
            n.wait_height(height, max(0.1, deadline - time.monotonic()))

    def wait_caught_up(self, nodes: Sequence[TestnetNode] | None = None,
                       timeout: float = 90.0) -> int:
        """Until the given nodes reach the height the others had when we started waiting."""
        group = list(nodes if nodes is not None else self.nodes)
        tops = [h for h in self.heights().values() if h is not None]
        if not tops:
            raise NodeError(f"no node answers\n{self.log_tails()}")
        self.wait_height(max(tops), group, timeout)
        return max(tops)

    def check(self, nodes: Sequence[TestnetNode] | None = None, *,
              projections: bool = True, timeout: float = 30.0) -> CheckReport:
        return check(self.targets(nodes), projections=projections, timeout=timeout)

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(n.log_tail(lines) for n in self.nodes)
