"""Join a running net from one live node: its genesis, it as a peer, and state sync.

`memledger init --join <rpc url>` uses this, so a new node (a replacement disk, a new
validator-to-be) needs nothing but the address of one node it trusts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memledger.daemon import cometbft
from memledger.sdk.rpc import RpcClient


class JoinError(RuntimeError):
    """The live node could not be asked, or answered something unusable."""


def _peer_address(rpc_url: str, node_info: dict[str, Any]) -> str:
    """`id@host:port` of the node behind `rpc_url` (its p2p listen port, the RPC's host)."""
    listen = str(node_info["listen_addr"]).removeprefix("tcp://")
    host, _, port = listen.rpartition(":")
    if host in ("", "0.0.0.0", "[::]", "::"):
        host = urlsplit(rpc_url).hostname or "127.0.0.1"
    return f"{node_info['id']}@{host}:{port}"


def join(cometbft_home: str | os.PathLike[str], rpc_url: str, *, state_sync: bool = True,
         ) -> str:
    """Point a freshly initialised cometbft home at the net behind `rpc_url`.

    Writes the net's genesis, makes the node a persistent peer, and (with `state_sync`)
    fills [statesync] with a trust point taken from it. Returns the chain id.
    """
    try:  # everything asked of the net first: a failure leaves the home as it was
        with RpcClient(rpc_url, timeout=15.0) as rpc:
            genesis = rpc.call("genesis")["genesis"]
            status = rpc.status()
        trust = cometbft.trust_point(rpc_url) if state_sync else None
    except Exception as exc:  # noqa: BLE001 - any failure to ask is one clear error
        raise JoinError(f"cannot read genesis, status and a trust point from {rpc_url}: "
                        f"{exc}") from None
    cometbft.write_genesis(cometbft_home, genesis)
    peer = _peer_address(rpc_url, status["node_info"])

    def add_peer(cfg: Any) -> None:
        cfg["p2p"]["persistent_peers"] = peer

    cometbft.edit_config(Path(cometbft_home), add_peer)
    if trust is not None:
        height, block_hash = trust
        cometbft.configure_state_sync(cometbft_home, [rpc_url], height, block_hash)
    return str(genesis["chain_id"])
