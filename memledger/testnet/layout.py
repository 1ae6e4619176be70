"""Pure description of a test net: node names, port blocks, addresses, the testnet.json file.

One function decides every address of every node, parameterised only by the topology
(local processes on loopback, or docker-compose services). Both the local homes and the
compose homes come from here, so the two topologies cannot drift apart.

Port block of node i: ``base + i*32`` holds p2p (+0), RPC (+1), ABCI (+2) and REST (+24),
the same offsets `memledger init --base-port` uses for a single node.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memledger.daemon.home import MAX_PORT, ConfigError, NodeConfig
from memledger.daemon.ports import bindable
from memledger.durable import write_atomic

PORT_BLOCK = 32
P2P_OFFSET, RPC_OFFSET, ABCI_OFFSET, API_OFFSET = 0, 1, 2, 24
PORT_OFFSETS = (P2P_OFFSET, RPC_OFFSET, ABCI_OFFSET, API_OFFSET)
DEFAULT_POWER = 10
DEFAULT_CHAIN_ID = "memledger-testnet"
SPEC_FILE = "testnet.json"
LOCAL, COMPOSE = "local", "compose"
CONTAINER_HOME = "/home/memledger"
POSTGRES_SERVICE = "postgres"
POSTGRES_TEMPLATE = "postgresql+psycopg://memledger:memledger@postgres:5432/memledger_{name}"


@dataclass(frozen=True)
class NodeSpec:
    """One node of the net: its name, port block and voting power (0 = not a validator)."""

    index: int
    name: str
    base_port: int
    power: int

    @property
    def is_validator(self) -> bool:
        return self.power > 0

    @property
    def p2p_port(self) -> int:
        return self.base_port + P2P_OFFSET

    @property
    def rpc_port(self) -> int:
        return self.base_port + RPC_OFFSET

    @property
    def abci_port(self) -> int:
        return self.base_port + ABCI_OFFSET

    @property
    def api_port(self) -> int:
        return self.base_port + API_OFFSET

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(self.base_port + off for off in PORT_OFFSETS)


@dataclass(frozen=True)
class Topology:
    """Where nodes listen and how they find each other."""

    flavour: str = LOCAL

    def __post_init__(self) -> None:
        if self.flavour not in (LOCAL, COMPOSE):
            raise ValueError(f"unknown topology {self.flavour!r}")

    @property
    def listen_host(self) -> str:
        """Containers must listen on all interfaces for the port mappings to work."""
        return "127.0.0.1" if self.flavour == LOCAL else "0.0.0.0"

    def peer_host(self, node: NodeSpec) -> str:
        return "127.0.0.1" if self.flavour == LOCAL else node.name

    def peer_address(self, node: NodeSpec, node_id: str) -> str:
        return f"{node_id}@{self.peer_host(node)}:{node.p2p_port}"

    def external_address(self, node: NodeSpec) -> str:
        """What a node advertises over PEX; empty lets cometbft use its listen address."""
        return "" if self.flavour == LOCAL else f"{node.name}:{node.p2p_port}"


@dataclass
class TestnetSpec:
    """Everything needed to reload a generated net (stored as DIR/testnet.json)."""

    __test__ = False  # not a pytest test class

    chain_id: str
    base_port: int
    nodes: list[NodeSpec]
    flavour: str = LOCAL
    db_url_template: str = ""
    voter: bool = True
    postgres: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def topology(self) -> Topology:
        return Topology(self.flavour)

    @property
    def validators(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.is_validator]

    def next_node(self, power: int = 0) -> NodeSpec:
        index = len(self.nodes)
        check_ports(self.base_port, index + 1)
        return NodeSpec(index, f"node{index}", port_block(self.base_port, index), power)

    def save(self, root: Path) -> None:
        data = asdict(self)
        write_atomic(root / SPEC_FILE, json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, root: Path) -> TestnetSpec:
        path = root / SPEC_FILE
        if not path.exists():
            raise FileNotFoundError(f"no test net at {root} (missing {SPEC_FILE})")
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        data = _spec_fields(text, path)
        data["nodes"] = [_node_spec(n, path) for n in data["nodes"]]
        return cls(**data)


#: the type of each field of testnet.json and of each of its nodes
_SPEC_TYPES: dict[str, type] = {"chain_id": str, "base_port": int, "nodes": list,
                                "flavour": str, "db_url_template": str, "voter": bool,
                                "postgres": bool, "extra": dict}
_NODE_TYPES: dict[str, type] = {"index": int, "name": str, "base_port": int, "power": int}


def _spec_fields(text: str, path: Path) -> dict[str, Any]:
    """testnet.json's fields, checked like config.json's: a damaged file (truncated, not an
    object, a field missing or of the wrong type) is one ConfigError naming it."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, "
                          f"column {exc.colno}); restore it, or create the net again") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object describing the test net, got "
                          f"{type(data).__name__}")
    problems = _field_problems(data, _SPEC_TYPES, {"chain_id", "base_port", "nodes"})
    if not problems and data.get("flavour", LOCAL) not in (LOCAL, COMPOSE):
        problems.append(f"flavour must be {LOCAL!r} or {COMPOSE!r}")
    if problems:
        raise ConfigError(f"invalid test net description {path}: {'; '.join(problems)}")
    return dict(data)


def _node_spec(raw: Any, path: Path) -> NodeSpec:
    """One entry of testnet.json's `nodes`, or ConfigError naming the file."""
    if not isinstance(raw, dict):
        raise ConfigError(f"invalid test net description {path}: each of nodes must be a "
                          f"JSON object, got {type(raw).__name__}")
    problems = _field_problems(raw, _NODE_TYPES, set(_NODE_TYPES))
    if problems:
        raise ConfigError(f"invalid test net description {path}: a node: "
                          f"{'; '.join(problems)}")
    return NodeSpec(**raw)


def _field_problems(data: dict[str, Any], types: dict[str, type],
                    required: set[str]) -> list[str]:
    """What is wrong with `data`'s keys and value types, one phrase each."""
    problems = [f"unknown key {k!r}" for k in data if k not in types]
    problems += [f"missing {k}" for k in sorted(required) if k not in data]
    for key, want in types.items():
        if key in data and (not isinstance(data[key], want)
                            or (want is int and isinstance(data[key], bool))):
            problems.append(f"{key} must be {want.__name__}, got "
                            f"{type(data[key]).__name__}")
    return problems


def port_block(base_port: int, index: int) -> int:
    return base_port + index * PORT_BLOCK


def highest_port(base_port: int, nodes: int) -> int:
    """The highest port the first ``nodes`` port blocks from ``base_port`` use."""
    return port_block(base_port, nodes - 1) + max(PORT_OFFSETS)


def check_ports(base_port: int, nodes: int) -> None:
    """ValueError unless every port of ``nodes`` nodes from ``base_port`` is a TCP port."""
    top = highest_port(base_port, nodes)
    if base_port < 1 or top > MAX_PORT:
        highest_base = MAX_PORT - (top - base_port)
        count = f"{nodes} node{'s' if nodes != 1 else ''}"
        raise ValueError(
            f"base port {base_port} with {count} needs ports {base_port}..{top}, outside "
            f"1..{MAX_PORT} (node i uses base+{PORT_BLOCK}*i up to +{max(PORT_OFFSETS)}); "
            f"the highest base port for {count} is {highest_base}")


def node_specs(n: int, base_port: int, powers: list[int] | None = None) -> list[NodeSpec]:
    """N validators with equal power unless ``powers`` says otherwise."""
    if n < 1:
        raise ValueError("a test net needs at least one validator")
    powers = powers or [DEFAULT_POWER] * n
    if len(powers) != n:
        raise ValueError(f"{len(powers)} powers given for {n} validators")
    if any(p <= 0 for p in powers):
        raise ValueError("validator powers must be positive integers")
    check_ports(base_port, n)
    return [NodeSpec(i, f"node{i}", port_block(base_port, i), p) for i, p in enumerate(powers)]


def render_db_url(template: str, node: NodeSpec, home: Path) -> str:
    """``{index}``, ``{name}`` and ``{home}`` placeholders; empty = SQLite in the home."""
    return template.format(index=node.index, name=node.name, home=home) if template else ""


TESTNET_SNAPSHOT_INTERVAL = 25
TESTNET_SNAPSHOT_KEEP = 10


def node_config(spec: TestnetSpec, node: NodeSpec, home: Path) -> NodeConfig:
    """The memledger NodeConfig of one node under the net's topology."""
    topo = spec.topology
    listen = topo.listen_host
    return NodeConfig(
        chain_id=spec.chain_id,
        moniker=node.name,
        abci_address=f"tcp://127.0.0.1:{node.abci_port}",  # app and cometbft share a host
        rpc_laddr=f"tcp://{listen}:{node.rpc_port}",
        p2p_laddr=f"tcp://{listen}:{node.p2p_port}",
        api_host=listen,
        api_port=node.api_port,
        db_url=render_db_url(spec.db_url_template, node, home),
        voter=spec.voter,
        # A test net is young: with a node's defaults (every 1,000 blocks) it served no
        # snapshot for its first 1,000 blocks, and `testnet add-node --state-sync` then
        # never joined. 25 x 10 keeps 250 blocks' worth (docs/SNAPSHOTS.md).
        snapshot_interval=TESTNET_SNAPSHOT_INTERVAL,
        snapshot_keep=TESTNET_SNAPSHOT_KEEP,
    )


# --- free ports ---------------------------------------------------------------------------


def busy_ports(nodes: list[NodeSpec]) -> list[int]:
    return [p for n in nodes for p in n.ports if not bindable(p)]


def free_base_port(blocks: int, low: int = 20000, high: int = 32000) -> int:
    """A base port whose first ``blocks`` port blocks are all free right now.

    Below Linux's ephemeral range (32768+): a port picked there can be taken by any
    outgoing connection between this check and the node's bind.
    """
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(500):
        base = rng.randrange(low, high - blocks * PORT_BLOCK, PORT_BLOCK)
        if all(bindable(port_block(base, i) + off)
               for i in range(blocks) for off in PORT_OFFSETS):
            return base
    raise RuntimeError(f"no free range of {blocks} port blocks in [{low}, {high})")
