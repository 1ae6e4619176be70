"""Route every P2P link of a generated (not yet started) test net through Toxiproxy.

Node i reaches node j only at proxy ``n{i}-n{j}`` (port ``block(i) + 4 + j``: offsets 3-23
of a node's port block are unused), so cutting a link is disabling one proxy and the
peers' config is the same `persistent_peers` list with other ports. PEX is off: a node
that learnt another's real address over PEX would dial it around the proxy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memledger.daemon import cometbft
from memledger.testnet.layout import PORT_BLOCK
from memledger.testnet.net import Testnet

PROXY_OFFSET = 4
API_PORT_OFFSET = 8  # in the first spare port block (after the last node's)


@dataclass(frozen=True)
class Link:
    """The proxy through which node ``src`` dials node ``dst``."""

    src: int
    dst: int
    port: int
    upstream: int

    @property
    def name(self) -> str:
        return f"n{self.src}-n{self.dst}"


def links(net: Testnet) -> list[Link]:
    out = []
    for a in net.nodes:
        for b in net.nodes:
            if a.index != b.index:
                out.append(Link(a.index, b.index, a.spec.base_port + PROXY_OFFSET + b.index,
                                b.spec.p2p_port))
    return out


def api_port(net: Testnet) -> int:
    """Toxiproxy's own API port: a spare block's, so no node can have it."""
    return net.spec.base_port + net.size * PORT_BLOCK + API_PORT_OFFSET


def rewire(net: Testnet) -> list[Link]:
    """Point every node's persistent peers at the proxies; PEX off. Returns the links."""
    all_links = links(net)
    for node in net.nodes:
        peers = ",".join(f"{net.node(ln.dst).node_id}@127.0.0.1:{ln.port}"
                         for ln in all_links if ln.src == node.index)

        def edit(cfg: Any, peers: str = peers) -> None:
            cfg["p2p"]["persistent_peers"] = peers
            cfg["p2p"]["pex"] = False
            cfg["p2p"]["seeds"] = ""
            # redial a healed link soon, not after cometbft's back-off of minutes
            cfg["p2p"]["persistent_peers_max_dial_period"] = "3s"

        cometbft.edit_config(node.node_home.cometbft, edit)
    return all_links
