"""Generate the node homes of a test net: one shared genesis, full-mesh persistent peers.

Each home is a complete memledger node home (config.json + cometbft/), so any one of them
can also be run by hand with `memledger start --home DIR/nodeI`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from memledger.daemon import cometbft
from memledger.daemon.home import NodeHome
from memledger.testnet.layout import SPEC_FILE, NodeSpec, TestnetSpec, node_config


def _init_home(spec: TestnetSpec, node: NodeSpec, root: Path,
               app_state: dict[str, Any] | None) -> NodeHome:
    home = NodeHome(root / node.name)
    if home.root.exists() and any(home.root.iterdir()):
        raise FileExistsError(f"{home.root} already exists and is not empty")
    home.save(node_config(spec, node, home.root))
    cometbft.init_home(home.cometbft, spec.chain_id, node.name, app_state=app_state)
    home.state_dir.mkdir(parents=True, exist_ok=True)
    home.logs.mkdir(parents=True, exist_ok=True)
    return home


def _configure(spec: TestnetSpec, node: NodeSpec, home: NodeHome, peers: str) -> None:
    """Addresses, peers and fast blocks; empty blocks on so heights advance when idle."""
    config = home.load()
    cometbft.configure(
        home.cometbft, proxy_app=config.abci_address, rpc_laddr=config.rpc_laddr,
        p2p_laddr=config.p2p_laddr, persistent_peers=peers, fast_blocks=True,
        create_empty_blocks=True,
    )

    def advertise(cfg: Any) -> None:
        cfg["p2p"]["external_address"] = spec.topology.external_address(node)

    cometbft.edit_config(home.cometbft, advertise)


def _peers(spec: TestnetSpec, ids: dict[str, str], exclude: NodeSpec) -> str:
    return ",".join(spec.topology.peer_address(n, ids[n.name])
                    for n in spec.nodes if n.name != exclude.name and n.name in ids)


def generate(root: Path, spec: TestnetSpec, app_state: dict[str, Any] | None = None) -> None:
    """Write DIR/nodeI homes for every node in ``spec`` and DIR/testnet.json."""
    if (root / SPEC_FILE).exists():
        raise FileExistsError(f"{root} already holds a test net ({SPEC_FILE})")
    root.mkdir(parents=True, exist_ok=True)
    homes = {n.name: _init_home(spec, n, root, app_state) for n in spec.nodes}
    first = homes[spec.nodes[0].name]
    cometbft.set_genesis_validators(first.cometbft, [
        (cometbft.validator_pubkey(homes[n.name].cometbft), n.power, n.name)
        for n in spec.validators
    ])
    for home in homes.values():
        if home is not first:
            shutil.copyfile(cometbft.genesis_path(first.cometbft),
                            cometbft.genesis_path(home.cometbft))
    ids = {name: cometbft.node_id(home.cometbft) for name, home in homes.items()}
    for node in spec.nodes:
        _configure(spec, node, homes[node.name], _peers(spec, ids, node))
    spec.save(root)


def generate_extra_node(root: Path, spec: TestnetSpec) -> NodeSpec:
    """A non-validator home that joins the net: shared genesis, peers = every other node.

    The existing nodes' configs are left alone: the new node dials them. Returns the
    new node's spec (already appended to ``spec`` and saved).
    """
    node = spec.next_node(power=0)
    home = _init_home(spec, node, root, None)
    first = NodeHome(root / spec.nodes[0].name)
    shutil.copyfile(cometbft.genesis_path(first.cometbft), cometbft.genesis_path(home.cometbft))
    ids = {n.name: cometbft.node_id(NodeHome(root / n.name).cometbft) for n in spec.nodes}
    spec.nodes.append(node)
    _configure(spec, node, home, _peers(spec, ids, node))
    spec.save(root)
    return node
