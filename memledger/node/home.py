"""A node's home directory: layout and the small JSON config that ties the parts together.

    HOME/config.json      chain id, addresses, projection URL, voter switch
    HOME/cometbft/        cometbft's own home (keys, genesis, config.toml, block store)
    HOME/data/state/      canonical state (LMDB)
    HOME/data/projection.db   default SQLite serving projection
    HOME/data/recall/     vector index for recall by meaning, derived from the projection
    HOME/data/snapshots/  state sync snapshots this node serves (docs/SNAPSHOTS.md)
    HOME/logs/            one log per child process
    HOME/node.lock        held (flock) while a node runs on this home; names its supervisor
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

from memledger.recall.embedder import DEFAULT_EMBEDDER

log = logging.getLogger("memledger.node")

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
    snapshot_interval: int = 1000  # blocks between state sync snapshots; 0 = none
    snapshot_keep: int = 2
    # recall by meaning (memledger.recall.embedder specs); "none" = text search only
    embedder: str = DEFAULT_EMBEDDER
    extra: dict[str, str] = field(default_factory=dict)


class HomeInUseError(RuntimeError):
    """Another node (or what is left of one) holds this home's lock."""

    def __init__(self, root: Path, holder: int | None) -> None:
        self.root, self.holder = root, holder
        if holder is None:
            who = "another memledger node"
        elif _pid_alive(holder):
            who = f"a running `memledger start` (pid {holder})"
        else:
            who = f"processes left by `memledger start` pid {holder}, which has exited"
        super().__init__(f"node home {root} is in use by {who}; stop it before starting "
                         f"another node on this home")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    def snapshots_dir(self) -> Path:
        return self.root / "data" / "snapshots"

    @property
    def recall_dir(self) -> Path:
        """The vector index derived from the projection (memledger.recall.index)."""
        return self.root / "data" / "recall"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def lock_file(self) -> Path:
        return self.root / "node.lock"

    def lock(self) -> IO[str] | None:
        """Take the home's exclusive lock for one node's life, or raise HomeInUseError.

        An flock, not a pid file: the kernel drops it when the last descriptor closes, so a
        SIGKILLed node never leaves a stale lock, and children that inherit the descriptor
        keep the home locked while any of them is alive. Returns None (with a warning) on
        a filesystem without flock rather than refusing to run there.
        """
        handle = open(self.lock_file, "a+")  # noqa: SIM115 - held for the node's life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            text = handle.read().strip()
            handle.close()
            raise HomeInUseError(self.root, int(text) if text.isdigit() else None) from None
        except OSError as exc:
            handle.close()
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                log.warning("cannot lock %s (%s): a second node on this home is not refused",
                            self.lock_file, exc)
                return None
            raise
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return handle

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
