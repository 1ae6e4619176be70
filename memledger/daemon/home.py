"""A node's home directory: layout and the small JSON config that ties the parts together.

    HOME/config.json      chain id, addresses, projection URL, voter switch; checked on
                          every load (NodeHome.load raises ConfigError), mode 0600: the
                          projection URL may hold a database password
    HOME/cometbft/        cometbft's own home (keys, genesis, config.toml, block store)
    HOME/data/state/      canonical state (LMDB)
    HOME/data/projection.db   default SQLite serving projection
    HOME/data/recall/     vector index for recall by meaning, derived from the projection
    HOME/data/snapshots/  state sync snapshots this node serves (docs/SNAPSHOTS.md)
    HOME/logs/            one log per child process (rotated by the supervisor, see
                          memledger.daemon.supervisor.LOG_MAX_BYTES)
    HOME/node.lock        held (flock) while a node runs on this home; names its supervisor
"""

from __future__ import annotations

import difflib
import errno
import fcntl
import json
import logging
import math
import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from memledger.consensus.retain import MIN_RETAIN_BLOCKS
from memledger.daemon.nearcopy import DEFAULT_NEAR_COPY_COSINE
from memledger.durable import write_atomic
from memledger.recall.defaults import DEFAULT_EMBEDDER

log = logging.getLogger("memledger.daemon")

DEFAULT_HOME = Path(os.path.expanduser("~/.memledger"))
DEFAULT_API_PORT = 26680
MAX_PORT = 65535
#: /ready reports the auto-voter dead when its heartbeat is older than this
#: (memledger.daemon.voter.is_alive); the voter beats once per pass
VOTER_HEARTBEAT_MAX_AGE_S = 10.0
#: the longest voter_interval_s config.json may set: half the heartbeat limit, so that a
#: slow pass (the RPC timeout is 10 s) on top of the sleep does not make /ready call a
#: healthy voter dead
VOTER_INTERVAL_MAX_S = VOTER_HEARTBEAT_MAX_AGE_S / 2
#: the largest state_max_gib config.json may set (1 PiB of LMDB map)
STATE_MAX_GIB = 1 << 20
_TCP_ADDRESS = re.compile(r"^tcp://(?P<host>[^\s/]+):(?P<port>[0-9]{1,5})$")


class ConfigError(ValueError):
    """A node's config.json cannot be used: not JSON, an unknown key, or a value of the
    wrong type or out of range. The message is one line naming the file and every
    problem found."""


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
    #: block pruning: keep CometBFT's last N blocks, never above the oldest snapshot
    #: (memledger.consensus.retain); 0 = keep every block. 0 by default: a pruned node
    #: cannot serve block 1 to a new light client trusting the genesis, nor old blocks
    #: to a node catching up without state sync (docs/OPERATIONS.md, "Block pruning")
    retain_blocks: int = 0
    #: the most the canonical state (LMDB) may grow to, GiB; raise it when the node halts
    #: with "canonical state is full" (~1.2 KB per memory: 64 GiB holds ~50M)
    state_max_gib: int = 64
    # recall by meaning (memledger.recall.embedder specs); "none" = text search only
    embedder: str = DEFAULT_EMBEDDER
    #: the auto-voter rejects a proposed memory this close (cosine, with the same numbers,
    #: names and negations) to a committed one of its domain; 0 = off. 0.92: no false
    #: rejection on bench/data/nearcopy_eval.json (BENCHMARKS.md, "Near-copy check")
    near_copy_cosine: float = DEFAULT_NEAR_COPY_COSINE
    extra: dict[str, str] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """What is wrong with these values, one phrase each (empty when all is well)."""
        found: list[str] = []

        def wrong(name: str, wanted: str) -> None:
            value = getattr(self, name)
            found.append(f"{name} must be {wanted}, got {_shown(value)}")

        for name in ("chain_id", "moniker", "api_host"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                wrong(name, "a non-empty string")
        for name in ("db_url", "embedder"):
            if not isinstance(getattr(self, name), str):
                wrong(name, "a string")
        for name in ("abci_address", "rpc_laddr", "p2p_laddr"):
            value = getattr(self, name)
            match = _TCP_ADDRESS.match(value) if isinstance(value, str) else None
            if match is None or not 1 <= int(match["port"]) <= MAX_PORT:
                wrong(name, f"an address tcp://HOST:PORT with PORT in 1..{MAX_PORT}")
        if not _is_int(self.api_port) or not 1 <= self.api_port <= MAX_PORT:
            wrong("api_port", f"an integer in 1..{MAX_PORT}")
        if not isinstance(self.voter, bool):
            wrong("voter", "true or false")
        interval = self.voter_interval_s
        if (not _is_number(interval) or not math.isfinite(interval)
                or not 0 < interval <= VOTER_INTERVAL_MAX_S):
            wrong("voter_interval_s",
                  f"a number of seconds above 0 and at most {VOTER_INTERVAL_MAX_S:g} (half the "
                  f"{VOTER_HEARTBEAT_MAX_AGE_S:g} s heartbeat limit of /ready)")
        near = self.near_copy_cosine
        if not _is_number(near) or not math.isfinite(near) or not 0 <= near <= 1:
            wrong("near_copy_cosine", "a cosine in 0..1 (0 = no near-copy check)")
        if not _is_int(self.snapshot_interval) or self.snapshot_interval < 0:
            wrong("snapshot_interval", "an integer number of blocks, 0 or more (0 = no "
                  "snapshots)")
        if not _is_int(self.snapshot_keep) or self.snapshot_keep < 1:
            wrong("snapshot_keep", "an integer, 1 or more")
        if not _is_int(self.retain_blocks) or not (
                self.retain_blocks == 0 or self.retain_blocks >= MIN_RETAIN_BLOCKS):
            wrong("retain_blocks", f"0 (keep every block) or an integer number of blocks, "
                  f"{MIN_RETAIN_BLOCKS} or more")
        if not _is_int(self.state_max_gib) or not 1 <= self.state_max_gib <= STATE_MAX_GIB:
            wrong("state_max_gib", f"an integer number of GiB in 1..{STATE_MAX_GIB}")
        if not isinstance(self.extra, dict):
            wrong("extra", "an object of strings")
        else:
            for key, value in self.extra.items():
                if not isinstance(value, str):
                    found.append(f"extra.{key} must be a string, got {_shown(value)}")
        return found


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shown(value: object) -> str:
    """A wrong value as the operator wrote it in JSON, with its JSON type."""
    kind = {bool: "a boolean", str: "a string", int: "an integer", float: "a number",
            list: "a list", dict: "an object", type(None): "null"}.get(type(value), "")
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    if isinstance(value, str):  # say it is a string only where it looks like something else
        try:
            json.loads(value)
        except ValueError:
            return text
    return f"{text} ({kind})" if kind and kind not in ("an integer", "a number") else text


_KNOWN_KEYS = tuple(f.name for f in fields(NodeConfig))


def _unknown_keys(keys: list[str]) -> str:
    parts = []
    for key in keys:
        close = difflib.get_close_matches(key, _KNOWN_KEYS, n=1, cutoff=0.75)
        parts.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    noun = "key" if len(keys) == 1 else "keys"
    text = f"unknown {noun} {', '.join(parts)}"
    if len(parts) > len([p for p in parts if "did you mean" in p]):
        text += f"; known keys: {', '.join(_KNOWN_KEYS)}"
    return text


def parse_config(text: str, source: str) -> NodeConfig:
    """A NodeConfig from the text of a config.json, or ConfigError naming ``source``."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source} is not valid JSON ({exc.msg} at line {exc.lineno}, "
                          f"column {exc.colno}); fix it, or `memledger init --force` to "
                          "write a fresh one") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must hold a JSON object of settings, got "
                          f"{_shown(data)}")
    problems = []
    unknown = [key for key in data if key not in _KNOWN_KEYS]
    if unknown:
        problems.append(_unknown_keys(unknown))
    config = NodeConfig(**{k: v for k, v in data.items() if k in _KNOWN_KEYS})
    problems += config.problems()
    if problems:
        raise ConfigError(f"invalid node config {source}: {'; '.join(problems)}")
    if isinstance(config.voter_interval_s, int):
        config.voter_interval_s = float(config.voter_interval_s)
    return config


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

    def create_root(self) -> None:
        """Create the home directory, for its owner only (0700), if it does not exist (an
        existing directory's mode is left as it is; config.json is 0600 either way).

        OSError when it cannot be made, also when the path is a file: found here, before
        cometbft is run on it (which would panic with a Go stack).
        """
        if self.root.exists():
            if not self.root.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR),
                                         str(self.root))
            return
        self.root.parent.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(mode=0o700, exist_ok=True)

    def exists(self) -> bool:
        return self.config_file.exists()

    def chain_data(self) -> Path | None:
        """A file showing that a chain has run on this home, or None.

        cometbft's state or block store (cometbft records the genesis' hash in its state
        at its first start and refuses any other genesis ever after), or the canonical
        state. Such a home's genesis must not change: `init --force` checks this.
        """
        data = self.cometbft / "data"
        for path in (data / "state.db", data / "blockstore.db", self.state_dir / "data.mdb"):
            if path.exists():
                return path
        return None

    def load(self) -> NodeConfig:
        """The node's config, checked: ConfigError (one line, naming the file and every
        problem) when it is not JSON, has an unknown key or a value of the wrong type or
        out of range."""
        if not self.exists():
            raise FileNotFoundError(f"no memledger node at {self.root} (run `memledger init`)")
        try:
            text = self.config_file.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {self.config_file}: {exc}") from None
        return parse_config(text, str(self.config_file))

    def save(self, config: NodeConfig) -> None:
        """Write config.json atomically, readable by its owner only (0600: db_url may hold
        a database password); a new home directory is created 0700. A config with a
        problem (NodeConfig.problems) is refused with ConfigError, nothing written."""
        problems = config.problems()
        if problems:
            raise ConfigError(f"refusing to write {self.config_file}: {'; '.join(problems)}")
        self.create_root()
        write_atomic(self.config_file, json.dumps(asdict(config), indent=2) + "\n", mode=0o600)

    def db_url(self, config: NodeConfig) -> str:
        if config.db_url:
            return config.db_url
        from memledger.sqlite_uri import sqlite_url  # sqlalchemy: a node's, not an agent's

        return sqlite_url(self.root / 'data' / 'projection.db')
