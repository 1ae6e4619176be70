"""Locate, initialise, configure and supervise a real CometBFT v0.38 node.

The app speaks ABCI 2.0 as defined by exactly one CometBFT release, so everything here pins
and verifies the binary version instead of trusting whatever ``cometbft`` is on PATH.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import httpx
import tomlkit
from nacl.signing import SigningKey

from memledger.durable import write_atomic
from memledger.sdk import rpc
from memledger.sdk.waiting import wait_until

COMETBFT_VERSION = "0.38.25"
REPO_ROOT = Path(__file__).resolve().parents[2]
_PUBKEY_TYPE = "tendermint/PubKeyEd25519"


class CometBFTError(RuntimeError):
    """Anything wrong with the cometbft binary, its home directory or its process."""


# --- binary discovery ---------------------------------------------------------------------


def binary_version(path: str | os.PathLike[str]) -> str:
    """Return the output of ``<path> version`` (stripped), or raise CometBFTError."""
    try:
        out = subprocess.run(
            [os.fspath(path), "version"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise CometBFTError(f"cannot run {path} version: {exc}") from exc
    return out.stdout.strip()


def _candidates() -> list[Path]:
    found: list[Path] = [REPO_ROOT / ".cache" / "bin" / "cometbft"]
    on_path = shutil.which("cometbft")
    if on_path:
        found.append(Path(on_path))
    found.append(Path.home() / "go" / "bin" / "cometbft")
    return found


@functools.cache
def find_cometbft() -> Path:
    """Find a cometbft binary of the pinned version.

    Order: $COMETBFT_BIN (must be right, no fallback), <repo>/.cache/bin, PATH, ~/go/bin.
    """
    env = os.environ.get("COMETBFT_BIN")
    if env:
        path = Path(env)
        if not path.is_file():
            raise CometBFTError(f"COMETBFT_BIN={env} does not exist; run `make cometbft`")
        version = binary_version(path)
        if not version.startswith(COMETBFT_VERSION):
            raise CometBFTError(
                f"COMETBFT_BIN={env} is version {version!r}, need {COMETBFT_VERSION}"
            )
        return path
    tried: list[str] = []
    for path in _candidates():
        if not path.is_file():
            tried.append(f"{path} (missing)")
            continue
        try:
            version = binary_version(path)
        except CometBFTError as exc:
            tried.append(f"{path} ({exc})")
            continue
        if version.startswith(COMETBFT_VERSION):
            return path
        tried.append(f"{path} (version {version!r})")
    raise CometBFTError(
        f"cometbft {COMETBFT_VERSION} not found; run `make cometbft` or set COMETBFT_BIN. "
        f"Tried: {'; '.join(tried)}"
    )


def _run(args: Sequence[str], *, binary: Path | None = None) -> str:
    exe = binary or find_cometbft()
    proc = subprocess.run(
        [os.fspath(exe), *args], capture_output=True, text=True, timeout=60, check=False
    )
    if proc.returncode != 0:
        raise CometBFTError(f"cometbft {' '.join(args)} failed ({proc.returncode}): "
                            f"{failure_line(proc.stderr)}")
    return proc.stdout


def failure_line(output: str, limit: int = 400) -> str:
    """The line of cometbft's stderr that says why it failed: the first naming an error
    or a panic, else the first line; never the goroutine dump that follows a panic (our
    errors are one line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    said = next((line for line in lines if _SAYS_WHY.search(line)), lines[0])
    return said if len(said) <= limit else said[:limit - 3] + "..."


#: "panic: ...", "Error: ..." (cobra), "ERROR: ...", "... error: ..."
_SAYS_WHY = re.compile(r"^(panic|error)\b|\berror:", re.IGNORECASE)


# --- home directory -----------------------------------------------------------------------


def config_path(home: str | os.PathLike[str]) -> Path:
    return Path(home) / "config" / "config.toml"


def genesis_path(home: str | os.PathLike[str]) -> Path:
    return Path(home) / "config" / "genesis.json"


def load_genesis(home: str | os.PathLike[str]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(genesis_path(home).read_text())
    return data


def write_genesis(home: str | os.PathLike[str], doc: dict[str, Any]) -> None:
    """Write genesis atomically; CometBFT reads it on every start."""
    write_atomic(genesis_path(home), json.dumps(doc, indent=2) + "\n")


def init_home(
    home: str | os.PathLike[str],
    chain_id: str,
    moniker: str,
    *,
    app_state: dict[str, Any] | None = None,
    vote_extensions_enable_height: int = 0,
    binary: Path | None = None,
    keep_genesis: bool = False,
) -> Path:
    """Run ``cometbft init`` and pin chain id, moniker, app_state and ABCI params.

    Without an app_state the chain starts at the newest app version this binary runs
    (a genesis app_state without ``app_version`` means version 1).
    Existing keys are kept (cometbft init never overwrites them), so re-running is safe.
    With ``keep_genesis`` an existing genesis is left byte for byte (a home that has run
    a chain: cometbft refuses to start on any other genesis); only the moniker is set.
    """
    from memledger.consensus.versions import LATEST_APP_VERSION

    home_path = Path(home)
    _run(["init", "--home", os.fspath(home_path)], binary=binary)
    if keep_genesis:
        set_moniker(home_path, moniker)
        return home_path
    doc = load_genesis(home_path)
    doc["chain_id"] = chain_id
    doc["app_state"] = {"app_version": LATEST_APP_VERSION} if app_state is None else app_state
    params = doc.setdefault("consensus_params", {})
    params.setdefault("abci", {})["vote_extensions_enable_height"] = str(
        vote_extensions_enable_height
    )
    write_genesis(home_path, doc)
    set_moniker(home_path, moniker)
    return home_path


def set_moniker(home: Path, moniker: str) -> None:
    """The node's name in config.toml (shown to peers; no part of the chain)."""

    def mutate(cfg: Any) -> None:
        cfg["moniker"] = moniker

    edit_config(home, mutate)


def edit_config(home: Path, mutate: Callable[[Any], None]) -> None:
    """Apply `mutate` to config.toml (comments and layout kept), replacing the file in one
    step: a failed write (a full disk) leaves the old config whole."""
    path = config_path(home)
    doc = tomlkit.parse(path.read_text())
    mutate(doc)
    write_atomic(path, tomlkit.dumps(doc))


def _duration(value: str | float) -> str:
    """Accept Go duration strings as-is; numbers are seconds."""
    if isinstance(value, str):
        return value
    return f"{round(value * 1000)}ms"


# Timeouts tuned for single-host test nets: blocks every ~0.3-0.5 s instead of ~1-3 s.
FAST_CONSENSUS = {
    "timeout_propose": "500ms",
    "timeout_propose_delta": "100ms",
    "timeout_prevote": "200ms",
    "timeout_prevote_delta": "100ms",
    "timeout_precommit": "200ms",
    "timeout_precommit_delta": "100ms",
    "timeout_commit": "300ms",
    "peer_gossip_sleep_duration": "20ms",
    "peer_query_maj23_sleep_duration": "500ms",
}

MAX_TX_BYTES = 1_572_864  # 1.5 MiB: a 1 MiB payload plus envelope/signature headroom
MAX_BODY_BYTES = 4 * 1024 * 1024  # base64 of a max tx (~2 MiB) plus JSON-RPC framing


def configure(
    home: str | os.PathLike[str],
    *,
    proxy_app: str,
    rpc_laddr: str,
    p2p_laddr: str,
    persistent_peers: str = "",
    fast_blocks: bool = True,
    log_level: str = "info",
    create_empty_blocks: bool = True,
    create_empty_blocks_interval: str | float = "0s",
    prometheus_laddr: str | None = None,
    timeout_broadcast_tx_commit: str | float = "30s",
) -> None:
    """Rewrite config.toml for a local node talking to our ABCI app over a socket.

    ``proxy_app`` is e.g. ``tcp://127.0.0.1:26658`` (or ``kvstore`` for the built-in app).
    Prometheus stays off unless ``prometheus_laddr`` (e.g. ``:26660``) is given.
    """

    def mutate(cfg: Any) -> None:
        cfg["proxy_app"] = proxy_app
        cfg["abci"] = "socket"
        cfg["log_level"] = log_level

        cfg["rpc"]["laddr"] = rpc_laddr
        cfg["rpc"]["max_body_bytes"] = MAX_BODY_BYTES
        cfg["rpc"]["timeout_broadcast_tx_commit"] = _duration(timeout_broadcast_tx_commit)

        p2p = cfg["p2p"]
        p2p["laddr"] = p2p_laddr
        p2p["persistent_peers"] = persistent_peers
        p2p["addr_book_strict"] = False
        p2p["allow_duplicate_ip"] = True

        mempool = cfg["mempool"]
        mempool["max_tx_bytes"] = MAX_TX_BYTES
        mempool["size"] = 10_000
        mempool["recheck"] = True

        consensus = cfg["consensus"]
        if fast_blocks:
            for key, value in FAST_CONSENSUS.items():
                consensus[key] = value
        consensus["create_empty_blocks"] = create_empty_blocks
        consensus["create_empty_blocks_interval"] = _duration(create_empty_blocks_interval)

        cfg["storage"]["discard_abci_responses"] = False  # block_results must keep working
        cfg["tx_index"]["indexer"] = "kv"

        inst = cfg["instrumentation"]
        inst["prometheus"] = prometheus_laddr is not None
        if prometheus_laddr is not None:
            inst["prometheus_listen_addr"] = prometheus_laddr

    edit_config(Path(home), mutate)


def configure_state_sync(home: str | os.PathLike[str], rpc_servers: list[str],
                         trust_height: int, trust_hash: str,
                         trust_period: str = "168h0m0s") -> None:
    """Fill config.toml's [statesync]: restore from a peer's snapshot instead of replaying.

    CometBFT's light client checks the snapshot's app hash against headers from
    ``rpc_servers`` (it wants two; one URL is listed twice), starting from the trusted
    ``trust_height``/``trust_hash``, which must be younger than ``trust_period``.
    """
    servers = list(rpc_servers) if len(rpc_servers) >= 2 else list(rpc_servers) * 2

    def mutate(cfg: Any) -> None:
        sync = cfg["statesync"]
        sync["enable"] = True
        sync["rpc_servers"] = ",".join(servers)
        sync["trust_height"] = int(trust_height)
        sync["trust_hash"] = trust_hash
        sync["trust_period"] = trust_period
        sync["discovery_time"] = "5s"
        sync["chunk_request_timeout"] = "15s"

    edit_config(Path(home), mutate)


def trust_point(rpc_url: str) -> tuple[int, str]:
    """A recent (height, block hash) from a live node, to start state sync's light client."""
    from memledger.sdk.rpc import RpcClient

    with RpcClient(rpc_url, timeout=10.0) as rpc:
        height = rpc.latest_height()
        block_id = rpc.block(height)["block_id"]
    return height, str(block_id["hash"])


# --- keys and validators ------------------------------------------------------------------


def node_id(home: str | os.PathLike[str], *, binary: Path | None = None) -> str:
    """P2P node id (hex), as used in ``id@host:port`` persistent_peers entries."""
    return _run(["show-node-id", "--home", os.fspath(home)], binary=binary).strip()


def _priv_validator_key(home: str | os.PathLike[str]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (Path(home) / "config" / "priv_validator_key.json").read_text()
    )
    return data


def validator_pubkey(home: str | os.PathLike[str]) -> bytes:
    """Raw 32-byte ed25519 consensus public key of this node's validator."""
    return base64.b64decode(_priv_validator_key(home)["pub_key"]["value"])


def validator_signing_key(home: str | os.PathLike[str]) -> SigningKey:
    """The validator key as a pynacl SigningKey.

    CometBFT stores the 64-byte Go ed25519 private key (seed || pubkey); pynacl wants the
    32-byte seed. We check the derived public key so a corrupt file fails loudly.
    """
    raw = base64.b64decode(_priv_validator_key(home)["priv_key"]["value"])
    if len(raw) != 64:
        raise CometBFTError(f"unexpected ed25519 private key length {len(raw)}")
    key = SigningKey(raw[:32])
    if bytes(key.verify_key) != raw[32:]:
        raise CometBFTError("priv_validator_key.json: seed does not match public key")
    return key


def validator_address(pubkey: bytes) -> str:
    """CometBFT address of an ed25519 key: first 20 bytes of sha256(pubkey), upper hex."""
    return hashlib.sha256(pubkey).digest()[:20].hex().upper()


def set_genesis_validators(
    home: str | os.PathLike[str], validators: Sequence[tuple[bytes, int, str]]
) -> None:
    """Replace genesis validators with ``(pubkey, power, name)`` entries (multi-node nets)."""
    doc = load_genesis(home)
    doc["validators"] = [
        {
            "address": validator_address(pub),
            "pub_key": {"type": _PUBKEY_TYPE, "value": base64.b64encode(pub).decode()},
            "power": str(power),
            "name": name,
        }
        for pub, power, name in validators
    ]
    write_genesis(home, doc)


# --- process supervision ------------------------------------------------------------------


class CometProcess:
    """A ``cometbft start`` child process with its log captured in a file."""

    def __init__(
        self,
        home: str | os.PathLike[str],
        *,
        log_path: str | os.PathLike[str] | None = None,
        binary: Path | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.home = Path(home)
        self.binary = binary or find_cometbft()
        self.log_path = Path(log_path) if log_path else self.home / "cometbft.log"
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        cfg: Any = tomlkit.parse(config_path(self.home).read_text())
        self.rpc_url = rpc.laddr_to_url(str(cfg["rpc"]["laddr"]))

    def start(self) -> CometProcess:
        if self.proc is not None and self.proc.poll() is None:
            raise CometBFTError("already running")
        self._log = open(self.log_path, "ab")  # closed in _reap
        self.proc = subprocess.Popen(
            [os.fspath(self.binary), "start", "--home", os.fspath(self.home), *self.extra_args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # keep terminal Ctrl-C from hitting it twice
        )
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def client(self, timeout: float = 30.0) -> rpc.RpcClient:
        return rpc.RpcClient(self.rpc_url, timeout=timeout)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        """Wait until RPC /status answers. Note the RPC only comes up after the ABCI
        handshake, so the app must already be listening on ``proxy_app``."""
        with self.client(timeout=2.0) as c:
            def status() -> dict[str, Any]:
                if self.proc is not None and self.proc.poll() is not None:
                    raise CometBFTError(
                        f"cometbft exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                return c.status()

            return wait_until(status, timeout, 0.1, what=f"cometbft RPC {self.rpc_url}",
                              ignore=(httpx.HTTPError, rpc.RpcError, ValueError, KeyError),
                              error=lambda msg: CometBFTError(f"{msg}:\n{self.log_tail()}"))

    def wait_for_height(self, height: int, timeout: float = 30.0) -> int:
        with self.client() as c:
            try:
                return c.wait_for_height(height, timeout)
            except TimeoutError as exc:
                raise CometBFTError(f"{exc}\n{self.log_tail()}") from exc

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        return self._reap()

    def kill(self) -> int | None:
        """SIGKILL immediately (crash simulation)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        return self._reap()

    def _reap(self) -> int | None:
        code = self.proc.returncode if self.proc else None
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def __enter__(self) -> CometProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
