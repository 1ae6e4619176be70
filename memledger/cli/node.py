"""The node's own commands: `init`, `start`, the hidden `app`, and `projection`.

They run a validator, so they need `memledger[node]`; importing this module adds them to
the root group (`memledger.cli.main` does it where the node's packages are installed)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

import click
from click.core import ParameterSource

from memledger.cli.root import (
    cannot_create,
    fail,
    home_option,
    main,
    one_line,
)
from memledger.consensus.versions import LATEST_APP_VERSION, SUPPORTED_APP_VERSIONS
from memledger.daemon.home import MAX_PORT, ConfigError, NodeConfig, NodeHome

if TYPE_CHECKING:
    from memledger.consensus.store.state import CanonicalStore
    from memledger.projection.rebuild import RecordSource


#: the highest port `init` derives from --base-port is base + this (REST)
INIT_PORT_SPAN = 24


def _fail(message: str) -> NoReturn:
    fail(message)


def _emit(data: Any, as_json: bool, human: str) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True) if as_json else human)


@main.command()
@home_option
@click.option("--chain-id", default="memledger-local", show_default=True)
@click.option("--moniker", default="node0", show_default=True)
@click.option("--db-url", default="", help="Projection database URL (default: SQLite in home).")
@click.option("--base-port", type=click.IntRange(1, MAX_PORT - INIT_PORT_SPAN), default=26656,
              show_default=True,
              help="p2p port; RPC = base+1, ABCI = base+2, REST = base+24 (so at most "
                   f"{MAX_PORT - INIT_PORT_SPAN}).")
@click.option("--voter/--no-voter", default=True, show_default=True,
              help="Run the auto-voter (it votes with the node's validator key).")
@click.option("--force", is_flag=True,
              help="Rewrite an existing home's config: options given replace its values, the "
                   "others keep them. A home that has run a chain keeps its genesis (another "
                   "--chain-id or --app-version, or --join, is refused).")
@click.option("--app-version", type=click.Choice([str(v) for v in sorted(SUPPORTED_APP_VERSIONS)]),
              default=str(LATEST_APP_VERSION), show_default=True,
              help="Consensus rules the new chain starts with (older ones: to rehearse an "
                   "upgrade).")
@click.option("--join", "join_url", default="", metavar="RPC_URL",
              help="Join the running net behind this CometBFT RPC URL instead of starting a "
                   "chain: its genesis, it as a peer, no auto-voter unless --voter is given (it "
                   "votes once governance makes this node a validator).")
@click.option("--state-sync/--no-state-sync", default=True, show_default=True,
              help="With --join: restore a recent snapshot instead of replaying every block.")
def init(home: Path, chain_id: str, moniker: str, db_url: str, base_port: int, voter: bool,
         force: bool, app_version: str, join_url: str, state_sync: bool) -> None:
    """Create a node home on embedded defaults: a one-validator chain, or (--join) a node of
    a running net.

    With --force on an existing home, an option left out keeps the home's value
    (config.json; the genesis' app version), not the default shown here.
    """
    from memledger.daemon import cometbft
    from memledger.daemon.join import JoinError, join

    ctx = click.get_current_context()

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)

    node_home = NodeHome(home)
    if node_home.exists() and not force:
        _fail(f"{node_home.root} is already initialised (use --force to rewrite its config)")
    if db_url:
        _check_db_url(db_url)
    old = _old_config(node_home)
    genesis = _old_genesis(node_home)
    if not given("chain_id"):
        if old is not None:
            chain_id = old.chain_id
        elif genesis is not None and isinstance(genesis.get("chain_id"), str):
            chain_id = genesis["chain_id"]
    app_state: dict[str, Any] = {"app_version": int(app_version)}
    if not given("app_version") and genesis is not None and isinstance(
            genesis.get("app_state"), dict):
        app_state = genesis["app_state"]
    chain = node_home.chain_data()
    if chain is not None:
        _refuse_another_genesis(node_home, chain, genesis, chain_id, app_state, join_url)
    ports: dict[str, Any] = {"p2p_laddr": f"tcp://127.0.0.1:{base_port}",
             "rpc_laddr": f"tcp://127.0.0.1:{base_port + 1}",
             "abci_address": f"tcp://127.0.0.1:{base_port + 2}",
             "api_port": base_port + INIT_PORT_SPAN}
    if old is None:
        config = NodeConfig(chain_id=chain_id, moniker=moniker, db_url=db_url, voter=voter,
                            **ports)
    else:  # options left out keep the home's values, and so do the settings no option sets
        config = dataclasses.replace(old, chain_id=chain_id)
        if given("moniker"):
            config.moniker = moniker
        if given("db_url"):
            config.db_url = db_url
        if given("voter"):
            config.voter = voter
        if given("base_port"):
            config = dataclasses.replace(config, **ports)
    try:
        node_home.create_root()
    except OSError as exc:
        _fail(cannot_create(node_home.root, exc))
    try:
        cometbft.init_home(node_home.cometbft, chain_id, config.moniker, app_state=app_state,
                           keep_genesis=chain is not None)
        cometbft.configure(node_home.cometbft, proxy_app=config.abci_address,
                           rpc_laddr=config.rpc_laddr, p2p_laddr=config.p2p_laddr)
        if join_url:
            config.chain_id = chain_id = join(node_home.cometbft, join_url,
                                              state_sync=state_sync)
            if not given("voter"):  # not a validator yet; --voter: it votes once it is one
                config.voter = False
        node_home.save(config)
        node_home.state_dir.mkdir(parents=True, exist_ok=True)
    except (cometbft.CometBFTError, JoinError) as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot write the node home {node_home.root}: {exc}")
    click.echo(f"initialised {node_home.root} (chain {chain_id}); start it with "
               f"`memledger start --home {node_home.root}`")


def _old_config(node_home: NodeHome) -> NodeConfig | None:
    """The home's config.json, or None when it has none or it cannot be read (`init
    --force` is how a broken one is replaced)."""
    if not node_home.exists():
        return None
    try:
        return node_home.load()
    except ConfigError:
        return None


def _old_genesis(node_home: NodeHome) -> dict[str, Any] | None:
    """The home's genesis, or None when it has none (or it is not a JSON object)."""
    from memledger.daemon import cometbft

    try:
        doc = cometbft.load_genesis(node_home.cometbft)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _refuse_another_genesis(node_home: NodeHome, chain: Path, genesis: dict[str, Any] | None,
                            chain_id: str, app_state: dict[str, Any], join_url: str) -> None:
    """Fail if init would give a home that has run a chain another genesis: cometbft keeps
    the genesis' hash and never starts on another one, and the voter would sign for a
    chain the node does not run."""
    changes = []
    if join_url:
        changes.append(f"--join takes the genesis of the net at {join_url}")
    elif genesis is None:
        changes.append("it has no readable cometbft/config/genesis.json, so a new one "
                       "would be made")
    else:
        if genesis.get("chain_id") != chain_id:
            changes.append(f"chain id {genesis.get('chain_id')!r} -> {chain_id!r}")
        if genesis.get("app_state") != app_state:
            before = genesis.get("app_state")
            was = before.get("app_version", 1) if isinstance(before, dict) else before
            changes.append(f"app version {was} -> {app_state.get('app_version', 1)}")
    if changes:
        _fail(f"{node_home.root} has run a chain ({chain.relative_to(node_home.root)}); init "
              f"would change its genesis ({'; '.join(changes)}) and its node could not run "
              "that chain: leave --chain-id, --app-version and --join out to keep the chain, "
              "or init a new --home")


@main.command()
@home_option
@click.option("--no-api", is_flag=True, help="Do not start the REST API.")
@click.option("--no-voter", is_flag=True, help="Do not start the auto-voter.")
@click.option("--app-arg", "app_args", multiple=True, hidden=True,
              help="Extra argument for the app process (test fault hooks).")
def start(home: Path, no_api: bool, no_voter: bool, app_args: tuple[str, ...]) -> None:
    """Run the node (app, cometbft, REST API, voter) until Ctrl-C."""
    from memledger.daemon.supervisor import Supervisor

    node_home = NodeHome(home)
    if not node_home.exists():
        _fail(f"no memledger node at {node_home.root} (run `memledger init` first)")
    supervisor = Supervisor(node_home, api=not no_api, voter=False if no_voter else None,
                            app_args=list(app_args))
    sys.exit(supervisor.run())


@main.command(hidden=True)
@home_option
@click.option("--exit-before-commit-height", type=int, default=0, help="Test fault hook.")
@click.option("--fail-flush-height", type=int, default=0, help="Test fault hook.")
@click.option("--max-app-version", type=int, default=0,
              help="Test hook: behave like an older binary supporting versions up to N.")
@click.option("--kill-at", default="", help="Test hook: POINT:HEIGHT to SIGKILL the app.")
@click.option("--verify-helper", type=click.Choice(["auto", "on", "off"]), default="auto",
              show_default=True,
              help="Check uncached block signatures on a helper process (auto: if >1 CPU).")
@click.option("--corrupt-snapshot-chunks", is_flag=True,
              help="Test hook: serve every state sync chunk with a flipped byte.")
@click.option("--diverge-at", type=int, default=0,
              help="Test hook: from HEIGHT on, skip every tx (a state machine that differs).")
def app(home: Path, exit_before_commit_height: int, fail_flush_height: int,
        max_app_version: int, kill_at: str, verify_helper: str,
        corrupt_snapshot_chunks: bool, diverge_at: int) -> None:
    """Serve the ABCI application (started by `memledger start`)."""
    from memledger.consensus.faults import FaultPlan
    from memledger.consensus.versions import SUPPORTED_APP_VERSIONS
    from memledger.daemon.appproc import serve

    node_home = NodeHome(home)
    config = node_home.load()
    supported = SUPPORTED_APP_VERSIONS
    if max_app_version:
        supported = frozenset(v for v in supported if v <= max_app_version)
    point, _, height = kill_at.partition(":")
    faults = FaultPlan(exit_before_commit_height, fail_flush_height, point,
                       int(height) if height else 0, corrupt_snapshot_chunks, diverge_at)
    helper = verify_helper == "on" or (verify_helper == "auto" and (os.cpu_count() or 1) > 1)
    serve(node_home.state_dir, node_home.db_url(config), config.abci_address, faults, supported,
          verify_helper=helper, snapshots_dir=node_home.snapshots_dir,
          snapshot_interval=config.snapshot_interval, snapshot_keep=config.snapshot_keep,
          retain_blocks=config.retain_blocks, state_map_bytes=config.state_max_gib << 30)


@main.command(hidden=True)
@home_option
def voter(home: Path) -> None:
    """Run the auto-voter (started by `memledger start`)."""
    import signal

    from memledger.daemon import cometbft
    from memledger.daemon.nearcopy import NeighbourSource
    from memledger.daemon.voter import Voter
    from memledger.sdk.rpc import laddr_to_url

    node_home = NodeHome(home)
    config = node_home.load()
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda s, f: stop.append(s))
    signal.signal(signal.SIGINT, lambda s, f: stop.append(s))
    key = cometbft.validator_signing_key(node_home.cometbft)
    near = config.near_copy_cosine > 0 and config.embedder != "none"
    host = "127.0.0.1" if config.api_host in ("0.0.0.0", "") else config.api_host
    neighbours = NeighbourSource(f"http://{host}:{config.api_port}") if near else None
    Voter(key, config.chain_id, node_home.db_url(config), laddr_to_url(config.rpc_laddr),
          node_home.root, neighbours=neighbours,
          near_copy_cosine=config.near_copy_cosine).run(config.voter_interval_s, stop)


@main.group()
def projection() -> None:
    """Manage the SQL serving projection."""


@projection.command("rebuild")
@home_option
@click.option("--db-url", default="", help="Target database (default: the node's).")
@click.option("--json", "as_json", is_flag=True)
def projection_rebuild(home: Path, db_url: str, as_json: bool) -> None:
    """Recreate the projection from canonical state.

    Into the node's own database only while the node is stopped (refused otherwise: the
    running app writes that projection every block). Into another database (--db-url)
    at any time, e.g. to move to PostgreSQL.
    """
    from memledger.daemon.db_identity import same_database
    from memledger.daemon.home import HomeInUseError

    node_home = NodeHome(home)
    if not node_home.exists():
        _fail(f"no memledger node at {node_home.root} (run `memledger init` first)")
    config = node_home.load()
    own = node_home.db_url(config)
    target = db_url or own
    _check_db_url(target)
    lock = None
    if same_database(target, own):
        try:
            lock = node_home.lock()  # held until we exit: the node cannot start meanwhile
        except HomeInUseError as exc:
            pid = f" (pid {exc.holder})" if exc.holder else ""
            _fail(f"the node at {node_home.root} is running{pid} and writes this projection "
                  "every block: stop it first (Ctrl-C), or rebuild into another database "
                  "with --db-url")
    try:
        store = _open_state(node_home, lock)
        try:
            result = _rebuild_into(target, store)
        finally:
            store.close()
    finally:
        if lock is not None:
            lock.close()
    _emit(result, as_json, f"rebuilt projection from {result['records']} records at height "
          f"{result['height']}")


def _rebuild_into(target: str, store: CanonicalStore) -> dict[str, Any]:
    """Rebuild the projection at `target` from `store`. A database that cannot be opened
    (a missing directory, a server that does not answer) is one line naming it, before
    any "rebuilding" line."""
    from sqlalchemy.exc import SQLAlchemyError

    from memledger.projection.writer import Projection, ProjectionUnavailable

    try:
        proj = Projection(target)  # a damaged SQLite file is moved aside for a new one
    except ProjectionUnavailable as exc:
        _fail(str(exc))
    except (SQLAlchemyError, ImportError) as exc:
        _fail(f"cannot open the projection database {_redact(target)}: "
              f"{one_line(str(getattr(exc, 'orig', None) or exc))}")
    try:
        _progress(f"rebuilding {_redact(target)} from canonical state at height "
                  f"{store.last_height}")
        with store.snapshot() as view:  # rows and receipt from one read (a running node
            # may commit a block meanwhile: the receipt must name the rows' height)
            count = proj.rebuild(_Counted(view), view.last_height, view.last_app_hash)
            return {"records": count, "height": view.last_height, "db_url": target}
    finally:
        proj.close()


def _check_db_url(url: str) -> None:
    """A database URL memledger cannot use is one line, before anything is written."""
    from memledger.daemon.db_url import DbUrlError, check_db_url

    try:
        check_db_url(url)
    except DbUrlError as exc:
        _fail(str(exc))


def _open_state(node_home: NodeHome, lock: IO[str] | None) -> CanonicalStore:
    """The node's canonical state, read-only; a one-line error when it has none yet (the
    app creates it at the node's first start) or it cannot be opened."""
    import lmdb

    from memledger.consensus.store.state import CanonicalStore, StoreError

    problem = ""
    if not (node_home.state_dir / "data.mdb").is_file():
        problem = (f"this node has no state yet (start it once: `memledger start --home "
                   f"{node_home.root}`); nothing to rebuild from in {node_home.state_dir}")
    else:
        try:
            return CanonicalStore(str(node_home.state_dir), readonly=True)
        except (StoreError, lmdb.Error) as exc:
            problem = f"cannot open the canonical state in {node_home.state_dir}: {exc}"
    if lock is not None:
        lock.close()
    _fail(problem)


@projection.command("reindex")
@home_option
@click.option("--json", "as_json", is_flag=True)
def projection_reindex(home: Path, as_json: bool) -> None:
    """Rebuild the search indexes from the projection: the word index (ranked text) and,
    with an embedder configured, the vector index (recall by meaning).

    Into HOME/data/recall. Only while the node is stopped: its REST process owns the
    indexes while it runs (and rebuilds one by itself at start when it is missing, stale
    or, for vectors, from another model).
    """
    import time

    from memledger.api.db import readonly_engine
    from memledger.daemon.home import HomeInUseError
    from memledger.recall.embedder import make_embedder
    from memledger.recall.index import VectorIndex
    from memledger.recall.indexer import Indexer
    from memledger.recall.text_index import TextIndex
    from memledger.recall.text_indexer import TextIndexer

    node_home = NodeHome(home)
    if not node_home.exists():
        _fail(f"no memledger node at {node_home.root} (run `memledger init` first)")
    config = node_home.load()
    embedder = make_embedder(config.embedder)
    try:
        lock = node_home.lock()
    except HomeInUseError as exc:
        pid = f" (pid {exc.holder})" if exc.holder else ""
        _fail(f"the node at {node_home.root} is running{pid} and owns its search indexes: "
              "stop it first (it also rebuilds a missing or stale index by itself at start)")
    engine = readonly_engine(node_home.db_url(config))
    result: dict[str, Any] = {}
    try:
        started = time.monotonic()
        words = TextIndex(node_home.recall_dir / "text")
        words.open()
        try:
            _progress("rebuilding the word index")
            words.reset()
            documents = TextIndexer(engine, words).catch_up()
            result["words"] = {"documents": documents, "indexed_height": words.indexed_height,
                               "seconds": round(time.monotonic() - started, 2)}
        finally:
            words.close()
        if embedder is not None:
            started = time.monotonic()
            index = VectorIndex(node_home.recall_dir, embedder)
            index.open()
            indexer = Indexer(engine, index)  # with the rerank's token rows, when it has them
            try:
                _progress(f"reindexing vectors with {embedder.name} {embedder.version}")
                count = indexer.rebuild()
                result.update(memories=count, indexed_height=index.meta.indexed_height,
                              embedder=embedder.name, embedder_version=embedder.version,
                              seconds=round(time.monotonic() - started, 2))
            finally:
                index.close()
                if indexer.late is not None:
                    indexer.late.close()
    finally:
        engine.dispose()
        if lock is not None:
            lock.close()
    text = (f"word index: {result['words']['documents']} memories up to height "
            f"{result['words']['indexed_height']} in {result['words']['seconds']} s")
    if embedder is None:
        text += "\nvector index: none (no embedder configured in config.json `embedder`)"
    else:
        text += (f"\nindexed {result['memories']} memories up to height "
                 f"{result['indexed_height']} with {embedder.name} in {result['seconds']} s")
    _emit(result, as_json, text)


def _progress(message: str) -> None:
    """Progress of long work goes to stderr, so --json output on stdout stays clean."""
    click.echo(message, err=True)


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - only for display
        return url


class _Counted:
    """A record source that prints how many records were read every `every_s` seconds."""

    def __init__(self, source: RecordSource, every_s: float = 2.0) -> None:
        self.source, self.every_s = source, every_s

    def get(self, key: bytes) -> bytes | None:
        return self.source.get(key)

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        import time

        count = 0
        last = time.monotonic()
        for item in self.source.iter_prefix(prefix):
            count += 1
            if time.monotonic() - last >= self.every_s:
                last = time.monotonic()
                _progress(f"  {count} records read")
            yield item
        _progress(f"  {count} records read; building the full-text index")
