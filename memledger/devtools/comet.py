"""CometBFT homes for tests and benchmarks: one node, or an n-validator local net."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memledger.daemon import cometbft
from memledger.devtools.ports import free_ports


@dataclass(frozen=True)
class NodeHome:
    """A configured home plus the addresses it was configured with."""

    home: Path
    moniker: str
    rpc_port: int
    p2p_port: int
    proxy_app: str

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.rpc_port}"

    @property
    def p2p_addr(self) -> str:
        return f"127.0.0.1:{self.p2p_port}"


def init_node(
    home: Path,
    *,
    proxy_app: str,
    chain_id: str = "memledger-test",
    moniker: str = "node0",
    app_state: dict[str, Any] | None = None,
    **configure_kwargs: Any,
) -> NodeHome:
    """``cometbft init`` + configure with fresh local RPC/P2P ports."""
    rpc_port, p2p_port = free_ports(2)
    cometbft.init_home(home, chain_id, moniker, app_state=app_state)
    cometbft.configure(
        home,
        proxy_app=proxy_app,
        rpc_laddr=f"tcp://127.0.0.1:{rpc_port}",
        p2p_laddr=f"tcp://127.0.0.1:{p2p_port}",
        **configure_kwargs,
    )
    return NodeHome(home, moniker, rpc_port, p2p_port, proxy_app)


def init_testnet(
    base: Path,
    proxy_apps: list[str],
    *,
    chain_id: str = "memledger-test",
    power: int = 10,
    app_state: dict[str, Any] | None = None,
    **configure_kwargs: Any,
) -> list[NodeHome]:
    """One validator per entry of ``proxy_apps``, sharing one genesis, fully meshed peers."""
    nodes = [
        init_node(
            base / f"node{i}",
            proxy_app=app,
            chain_id=chain_id,
            moniker=f"node{i}",
            app_state=app_state,
            **configure_kwargs,
        )
        for i, app in enumerate(proxy_apps)
    ]
    validators = [(cometbft.validator_pubkey(n.home), power, n.moniker) for n in nodes]
    cometbft.set_genesis_validators(nodes[0].home, validators)
    for n in nodes[1:]:
        shutil.copyfile(cometbft.genesis_path(nodes[0].home), cometbft.genesis_path(n.home))
    ids = [cometbft.node_id(n.home) for n in nodes]
    for i, n in enumerate(nodes):
        peers = ",".join(f"{ids[j]}@{m.p2p_addr}" for j, m in enumerate(nodes) if j != i)
        cometbft.configure(
            n.home,
            proxy_app=n.proxy_app,
            rpc_laddr=f"tcp://127.0.0.1:{n.rpc_port}",
            p2p_laddr=f"tcp://127.0.0.1:{n.p2p_port}",
            persistent_peers=peers,
            **configure_kwargs,
        )
    return nodes
