"""What the REST process needs to know, resolved once from a node home (or given directly).

Kept separate from the node config so tests and benchmarks can point an app at any
projection database and any cometbft RPC without a node home.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from memledger.daemon.home import VOTER_HEARTBEAT_MAX_AGE_S, NodeConfig, NodeHome
from memledger.sdk.rpc import laddr_to_url

MAX_BODY_BYTES = 2 * 1024 * 1024  # a 1 MiB tx is ~1.4 MiB as base64 JSON


def default_read_slots() -> int:
    """One read thread per two cores this process may run on, at least one. Reads hold the
    GIL for most of their work, so each extra thread mostly takes it from the event loop
    that serves writes and probes: on two cores one slot served more reads under 300
    readers than four did, and writes waited less (BENCHMARKS.md §15, "Isolation against
    the read gate's size")."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 2
    return max(1, cores // 2)


@dataclass(frozen=True)
class ApiSettings:
    """Read-side wiring of one REST process.

    CORS stays off unless origins are listed (node config: extra.api_cors_origins,
    comma-separated); the bind address is the node config's api_host (loopback).
    """

    db_url: str
    rpc_url: str
    chain_id: str = ""
    home: Path | None = None
    voter_required: bool = False
    max_body_bytes: int = MAX_BODY_BYTES
    commit_timeout_s: float = 20.0
    rpc_timeout_s: float = 10.0
    voter_max_age_s: float = VOTER_HEARTBEAT_MAX_AGE_S
    cors_origins: tuple[str, ...] = field(default_factory=tuple)
    rate_limit_per_s: float = 200.0  # per client address; 0 disables
    rate_limit_burst: int = 400
    request_timeout_s: float = 60.0
    # reads served at once (their own threads; api/readgate.py): one per two cores
    read_slots: int = field(default_factory=default_read_slots)
    read_backlog: int = 16  # reads waiting for a slot; beyond, 503 + Retry-After
    embedder: str = ""  # memledger.recall.embedder spec; "" or "none": text search only
    index_dir: Path | None = None  # where the vector index lives (needed with an embedder)
    #: the index follower stores every memory's rerank token rows (memledger.recall.rerank)
    #: from the pass that makes its vector: ~0.05 ms beside ~1.7 ms, where a search that
    #: lacks them pays a pass of its own per candidate. Agents rerank by default (the MCP
    #: tools and hook), so on by default; `extra.recall_token_states: "off"` keeps only
    #: the rows reranked searches compute, for a node that wants the disk (~2.5-8 KB a
    #: memory) more than fresh memories' rerank latency
    store_token_states: bool = True
    #: memories the index's follower has not reached are embedded by a static model as
    #: they commit, so searches find them by meaning however far behind it is
    #: (memledger.recall.tail: ~30 µs a memory, ~95 MB of RAM for the model, 512 B a
    #: memory held); `extra.recall_tail: "off"` gives that back
    recall_tail: bool = True
    #: projection reads and the recall indexes run in a child process (api/read_process.py)
    #: instead of on threads here, so searches never hold the GIL the event loop needs for
    #: writes and probes. A node runs it (`extra.api_read_process: "off"` to keep reads
    #: in-process); an app built from ApiSettings directly (tests, embedding) does not,
    #: unless asked
    read_process: bool = False

    @classmethod
    def from_home(cls, home: NodeHome | str | os.PathLike[str]) -> ApiSettings:
        node_home = home if isinstance(home, NodeHome) else NodeHome(home)
        config: NodeConfig = node_home.load()
        return cls(
            db_url=node_home.db_url(config),
            rpc_url=laddr_to_url(config.rpc_laddr),
            chain_id=config.chain_id,
            home=node_home.root,
            voter_required=config.voter,
            cors_origins=tuple(o.strip() for o in config.extra.get("api_cors_origins", "")
                               .split(",") if o.strip()),
            rate_limit_per_s=float(config.extra.get("api_rate_limit_per_s", "200")),
            rate_limit_burst=int(config.extra.get("api_rate_limit_burst", "400")),
            read_slots=int(config.extra.get("api_read_slots", default_read_slots())),
            read_backlog=int(config.extra.get("api_read_backlog", "16")),
            embedder=config.embedder,
            index_dir=node_home.recall_dir,
            store_token_states=_on_off(config.extra.get("recall_token_states", "on"),
                                       "recall_token_states"),
            recall_tail=_on_off(config.extra.get("recall_tail", "on"), "recall_tail"),
            read_process=_on_off(config.extra.get("api_read_process", "on"),
                                 "api_read_process"),
        )


def _on_off(value: str, name: str) -> bool:
    """An `extra` switch: "on" or "off", anything else is a configuration error."""
    if value not in ("on", "off"):
        raise ValueError(f"config extra.{name} must be \"on\" or \"off\", not {value!r}")
    return value == "on"
