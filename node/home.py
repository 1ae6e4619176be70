"""A node's home directory: layout and the small JSON config that ties the parts together.

    HOME/config.json      chain id, addresses, projection URL, voter switch
    HOME/cometbft/        cometbft's own home (keys, genesis, config.toml, block store)
    HOME/data/state/      canonical state (LMDB)
    HOME/data/projection.db   default SQLite serving projection
    HOME/logs/            one log per child process
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_HOME = Path(os.path.expanduser("~/.memledger"))
DEFAULT_API_PORT = 26680


@dataclass
class NodeConfig:
    chain_id: str = "memledger-local"
    moniker: str = "node0"
    abci_address: str = "tcp://127.0.0.1:26658"
    rpc_laddr: str = "tcp://127.0.0.1:26657"
    p2p_laddr: str = "tcp://127.0.0.1:26656"
    api_host: str = "127.0.0.1"
    api_port: int = DEFAULT_API_PORT
    db_url: str = ""  # empty = SQLite under HOME/data
    voter: bool = True
    voter_interval_s: float = 0.5
    extra: dict[str, str] = field(default_factory=dict)


class NodeHome:
    """Paths of one node home and its config."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().resolve()

    @property
    def config_file(self) -> Path:
        return self.root / "config.json"

    @property
    def cometbft(self) -> Path:
        return self.root / "cometbft"

    @property
    def state_dir(self) -> Path:
        return self.root / "data" / "state"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def exists(self) -> bool:
        return self.config_file.exists()

    def load(self) -> NodeConfig:
        if not self.exists():
            raise FileNotFoundError(f"no memledger node at {self.root} (run `memledger init`)")
        data = json.loads(self.config_file.read_text())
        return NodeConfig(**data)

    def save(self, config: NodeConfig) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(json.dumps(asdict(config), indent=2) + "\n")

    def db_url(self, config: NodeConfig) -> str:
        if config.db_url:
            return config.db_url
        return f"sqlite:///{self.root / 'data' / 'projection.db'}"
