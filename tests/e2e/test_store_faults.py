"""Store faults: disk full and read-only databases halt the node loudly, never a wrong Commit.

Every scenario fails one of the two stores (LMDB canonical state, SQL projection) at a
known height, then checks: the app halted with a one-line HALT message naming the store
and the cause; nothing past the last good height was committed (LMDB height, projection
receipts, and — for real nodes — cometbft's headers agree); after the fault is removed
a restart replays the failed block and converges to exactly the state of a chain that
never failed.

How each fault is made real (tests run as root, so chmod cannot make anything
read-only):
- SQLite read-only: the projection URL opens the file with SQLite's `mode=ro` URI
  parameter — every write fails with "attempt to write a readonly database".
- SQLite disk full: `PRAGMA max_page_count` pinned to the current size on the app's
  connections — SQLite's own SQLITE_FULL path ("database or disk is full").
- LMDB disk full: a canonical store opened with a small `map_size` — LMDB's own
  MDB_MAP_FULL path. (The map size is not configurable from outside, hence in-process.)
- ENOSPC / EROFS / EIO inside either store's commit transaction: raised from the
  in-transaction hooks, which aborts the transaction exactly where a failed write would.
- A real node on a full disk: RLIMIT_FSIZE lowered on the running app process only
  (prlimit); CPython ignores SIGXFSZ, so writes past the limit fail with EFBIG in
  whichever store grows first, as on a full file system.
- PostgreSQL read-only: privileges revoked from the app's role (the table owner) while
  the node runs; at startup, `default_transaction_read_only` on the role.
LMDB cannot be made read-only for a root process from outside (it ignores file modes and
the app keeps its own environment open); the in-process EROFS hook covers that path.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from memledger.consensus.app import MemLedgerApp
from memledger.consensus.faults import FaultPlan
from memledger.consensus.store.state import DEFAULT_MAP_SIZE, CanonicalStore
from memledger.projection.writer import Projection, ProjectionUnavailable
from memledger.sdk.rpc import RpcClient
from memledger.sdk.txbuilder import TxBuilder
from memledger.sdk.waiting import wait_until
from tests.support.chain import HaltCalled, LocalChain, seeded_key
from tests.support.node import NodeRunner, memledger
from tests.support.postgres import (
    create_database,
    drop_database,
    libpq_url,
    unique_db_name,
    with_database,
)

AGENT = seeded_key("store-faults-agent")
BIG = 60_000  # bytes of content per memory: stores grow fast


def plan(blocks: int = 12) -> list[list[bytes]]:
    """Deterministic blocks of large memories (the same for every chain that replays it)."""
    builder = TxBuilder(AGENT, "memledger-test")
    return [[builder.submit(i + 1, f"big-{i}", f"{i:04d}" * (BIG // 4))] for i in range(blocks)]


def reference(tmp_path: Path, txs: list[list[bytes]]) -> LocalChain:
    ref = LocalChain(tmp_path / "reference")
    for block in txs:
        assert [r.code for r in ref.block(block)] == [0] * len(block)
    return ref


def assert_same(chain: LocalChain, ref: LocalChain) -> None:
    assert chain.app.store.last_height == ref.app.store.last_height
    assert chain.app.store.last_app_hash == ref.app.store.last_app_hash
    assert list(chain.app.store.iter_prefix(b"")) == list(ref.app.store.iter_prefix(b""))
    assert chain.app.projection.dump() == ref.app.projection.dump()


def run_until_halt(chain: LocalChain, txs: list[list[bytes]]) -> int:
    """Apply blocks until the app halts; returns the failed height."""
    for block in txs:
        try:
            chain.block(block)
        except HaltCalled:
            return chain.height + 1
    pytest.fail("the fault never fired")


def replay_from_store(chain: LocalChain, txs: list[list[bytes]]) -> None:
    """What CometBFT's handshake does after a restart: replay from the app's height."""
    chain.reopen()
    for block in txs[chain.height:]:
        chain.block(block)


def receipt_height(chain: LocalChain) -> int:
    found = chain.app.projection.last_receipt()
    return 0 if found is None else found[0]


# ------------------------------------------------------------------ in-process faults
class SizedChain(LocalChain):
    """A LocalChain whose canonical store has a chosen LMDB map size."""

    map_size = DEFAULT_MAP_SIZE

    def _open(self) -> MemLedgerApp[Projection]:
        store = CanonicalStore(str(self.home / "state"), map_size=self.map_size)
        return MemLedgerApp(store, Projection(self.db_url), on_halt=self._halt)


def test_lmdb_map_full_halts_then_restart_converges(tmp_path: Path) -> None:
    txs = plan(40)
    SizedChain.map_size = 1 << 20
    try:
        chain = SizedChain(tmp_path / "node")
        failed = run_until_halt(chain, txs)
    finally:
        SizedChain.map_size = DEFAULT_MAP_SIZE
    assert chain.halts == [
        f"canonical state is full at height {failed} (LMDB map of 1 MiB): raise "
        "state_max_gib in the node's config.json and start it again"], chain.halts
    assert chain.app.store.last_height == failed - 1  # nothing of the failed block
    assert receipt_height(chain) == failed  # the projection flushed first, by design
    replay_from_store(chain, txs[:failed + 2])  # a bigger map: the operator's fix
    assert_same(chain, reference(tmp_path, txs[:failed + 2]))


class FailingStores(FaultPlan):
    """Raise an OSError inside a store's commit transaction at one point and height."""

    def __init__(self, point: str, height: int, error: int) -> None:
        super().__init__()
        self.fail_point, self.fail_height, self.error = point, height, error

    def maybe_kill(self, point: str, height: int) -> None:
        if (point, height) == (self.fail_point, self.fail_height):
            raise OSError(self.error, os.strerror(self.error))


@pytest.mark.parametrize(("point", "error"), [
    ("in_flush", errno.ENOSPC), ("in_flush", errno.EROFS), ("in_flush", errno.EIO),
    ("in_lmdb", errno.ENOSPC), ("in_lmdb", errno.EROFS), ("in_lmdb", errno.EIO),
])
def test_os_error_inside_a_commit_transaction_halts(tmp_path: Path, point: str,
                                                    error: int) -> None:
    txs = plan(6)
    chain = LocalChain(tmp_path / "node")
    chain.app.faults = FailingStores(point, 4, error)
    assert run_until_halt(chain, txs) == 4
    store = "projection flush" if point == "in_flush" else "canonical store commit"
    assert chain.halts[0] == (f"{store} failed at height 4: "
                              f"OSError({error}, {os.strerror(error)!r})"), chain.halts
    assert chain.app.store.last_height == 3
    assert receipt_height(chain) == (3 if point == "in_flush" else 4)
    replay_from_store(chain, txs)
    assert_same(chain, reference(tmp_path, txs))


def test_sqlite_disk_full_halts_then_restart_converges(tmp_path: Path) -> None:
    txs = plan(12)
    chain = LocalChain(tmp_path / "node")
    for block in txs[:3]:
        chain.block(block)
    engine = chain.app.projection.engine
    with engine.connect() as conn:
        pages = int(conn.exec_driver_sql("PRAGMA page_count").scalar() or 0)

    @sa.event.listens_for(engine, "connect")
    def _full_disk(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute(f"PRAGMA max_page_count = {pages}")

    engine.dispose()  # every new connection sees a disk with no room left
    failed = run_until_halt(chain, txs[3:])
    assert chain.halts[0] == (f"projection flush failed at height {failed}: OperationalError("
                              "'(sqlite3.OperationalError) database or disk is full')")
    assert chain.app.store.last_height == failed - 1
    assert receipt_height(chain) == failed - 1
    replay_from_store(chain, txs)  # a fresh engine: the disk has room again
    assert_same(chain, reference(tmp_path, txs))


def test_read_only_sqlite_projection_halts_then_restart_converges(tmp_path: Path) -> None:
    txs = plan(5)
    chain = LocalChain(tmp_path / "node")
    for block in txs[:2]:
        chain.block(block)
    chain.close()
    path = tmp_path / "node" / "projection.db"
    read_only = LocalChain(tmp_path / "node", db_url=f"sqlite:///file:{path}?mode=ro&uri=true")
    read_only.nonces = dict(chain.nonces)
    assert run_until_halt(read_only, txs[2:]) == 3
    assert read_only.halts[0] == ("projection flush failed at height 3: OperationalError("
                                  "'(sqlite3.OperationalError) attempt to write a readonly "
                                  "database')")
    assert read_only.app.store.last_height == 2
    read_only.close()
    writable = LocalChain(tmp_path / "node")
    for block in txs[writable.height:]:
        writable.block(block)
    assert_same(writable, reference(tmp_path, txs))


# ------------------------------------------------------------------ PostgreSQL
class PgRole:
    """A login role owning its own database: the shape a production node runs as."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.role = unique_db_name("ml_role")
        self.db = unique_db_name("ml")
        with psycopg.connect(libpq_url(with_database(server_url, "postgres")),
                             autocommit=True) as conn:
            conn.execute(f'CREATE ROLE "{self.role}" LOGIN')
            conn.execute(f'CREATE DATABASE "{self.db}" OWNER "{self.role}"')
        url = sa.engine.make_url(with_database(server_url, self.db))
        self.url = url.set(username=self.role, password=None).render_as_string(
            hide_password=False)
        try:
            with psycopg.connect(libpq_url(self.url)):
                pass
        except psycopg.OperationalError as exc:
            self.drop()
            pytest.skip(f"cannot log in as a fresh role on this PostgreSQL server: {exc}")

    def admin(self, sql: str) -> None:
        """Run `sql` as the server's superuser, inside the role's database."""
        with psycopg.connect(libpq_url(with_database(self.server_url, self.db)),
                             autocommit=True) as conn:
            conn.execute(sql)

    def revoke_writes(self) -> None:
        self.admin(f'REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA public '
                   f'FROM "{self.role}"')

    def grant_writes(self) -> None:
        self.admin(f'GRANT INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA public '
                   f'TO "{self.role}"')

    def drop(self) -> None:
        drop_database(self.server_url, self.db)
        with psycopg.connect(libpq_url(with_database(self.server_url, "postgres")),
                             autocommit=True) as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{self.role}"')


@pytest.fixture()
def pg_role(postgres_url: str) -> Iterator[PgRole]:
    role = PgRole(postgres_url)
    yield role
    role.drop()


def rebuilt_dump(store: CanonicalStore, url: str) -> dict[str, Any]:
    proj = Projection(url)
    try:
        proj.rebuild(store, store.last_height, store.last_app_hash)
        return proj.dump()
    finally:
        proj.close()


@pytest.mark.postgres
def test_postgres_privileges_revoked_halts_then_restart_converges(
        tmp_path: Path, pg_role: PgRole, postgres_url: str) -> None:
    txs = plan(6)
    chain = LocalChain(tmp_path / "node", db_url=pg_role.url)
    for block in txs[:2]:
        chain.block(block)
    pg_role.revoke_writes()
    assert run_until_halt(chain, txs[2:]) == 3
    assert chain.halts[0].startswith("projection flush failed at height 3: ProgrammingError(")
    assert "permission denied for table" in chain.halts[0]
    assert chain.app.store.last_height == 2 and receipt_height(chain) == 2
    pg_role.grant_writes()
    replay_from_store(chain, txs)
    ref = reference(tmp_path, txs)
    assert chain.app.store.last_app_hash == ref.app.store.last_app_hash
    assert list(chain.app.store.iter_prefix(b"")) == list(ref.app.store.iter_prefix(b""))
    other = unique_db_name("ml_rebuild")
    other_url = create_database(postgres_url, other)
    try:
        assert chain.app.projection.dump() == rebuilt_dump(chain.app.store, other_url)
    finally:
        drop_database(postgres_url, other)
    chain.close()


@pytest.mark.postgres
def test_postgres_read_only_role_at_startup_refuses_to_serve(tmp_path: Path,
                                                             pg_role: PgRole) -> None:
    txs = plan(3)
    chain = LocalChain(tmp_path / "node", db_url=pg_role.url)
    chain.block(txs[0])
    chain.close()
    pg_role.admin(f'ALTER ROLE "{pg_role.role}" SET default_transaction_read_only = on')
    # The app process opens the projection at startup (memledger/daemon/appproc.py
    # open_projection); on a read-only database that fails before the ABCI socket is
    # served, in one line that says the node never replaces a PostgreSQL projection.
    with pytest.raises(ProjectionUnavailable, match="read-only transaction") as refused:
        Projection(pg_role.url)
    assert "never replaced" in str(refused.value) and "\n" not in str(refused.value)
    store = CanonicalStore(str(tmp_path / "node" / "state"), readonly=True)
    assert store.last_height == 1  # nothing was committed by the refused start
    store.close()
    pg_role.admin(f'ALTER ROLE "{pg_role.role}" RESET default_transaction_read_only')
    chain = LocalChain(tmp_path / "node", db_url=pg_role.url)
    for block in txs[chain.height:]:
        chain.block(block)
    assert chain.app.store.last_app_hash == reference(tmp_path, txs).app.store.last_app_hash
    chain.close()


# ------------------------------------------------------------------ real nodes
REAL_CHAIN = "memledger-faults"


def _commit(rpc: RpcClient, builder: TxBuilder, memory_id: str, content: str) -> int:
    result = rpc.broadcast_tx_commit(builder.submit(time.time_ns(), memory_id, content))
    assert result.code == 0, result
    return result.height


def _halted(runner: NodeRunner, timeout: float = 90) -> str:
    """Wait for the node to stop by itself; return the app log's HALT line."""
    code = runner.wait_exit(timeout=timeout)
    assert code != 0
    assert "app exited with code 3" in runner.output, runner.output[-2000:]
    log = (runner.home / "logs" / "app.log").read_text(errors="replace")
    halts = [line for line in log.splitlines() if "memledger: HALT:" in line]
    assert halts, log[-3000:]
    return halts[-1]


def _stored_height(runner: NodeRunner) -> int:
    store = CanonicalStore(str(runner.home / "data" / "state"), readonly=True)
    try:
        return store.last_height
    finally:
        store.close()


def _converges(runner: NodeRunner, tmp_path: Path, memory_ids: list[str],
               projection_url: str | None = None) -> None:
    """Restart, check cometbft agrees with the app, write once more, stop, check state."""
    builder = TxBuilder(AGENT, REAL_CHAIN)
    runner.start("--no-api")
    with runner.rpc() as rpc:
        info = rpc.abci_info()["response"]
        last = int(info["last_block_height"])
        rpc.wait_for_height(last + 1, timeout=60)
        header = rpc.block(last + 1)["block"]["header"]["app_hash"]
        assert base64.b64decode(info["last_block_app_hash"]).hex() == header.lower()
        _commit(rpc, builder, "after-fault", "the node writes again")
    assert runner.stop() == 0
    store = CanonicalStore(str(runner.home / "data" / "state"), readonly=True)
    live = Projection(projection_url or f"sqlite:///{runner.home / 'data' / 'projection.db'}")
    try:
        for mid in [*memory_ids, "after-fault"]:
            assert store.get(b"mem/" + mid.encode()) is not None, mid
        assert live.last_receipt() == (store.last_height, store.last_app_hash.hex())
        if projection_url is None:
            target = tmp_path / "rebuilt.db"
            target.unlink(missing_ok=True)
            memledger("projection", "rebuild", "--home", str(runner.home), "--db-url",
                      f"sqlite:///{target}")
            assert live.dump() == Projection(f"sqlite:///{target}").dump()
    finally:
        live.close()
        store.close()


def _set_db_url(runner: NodeRunner, url: str) -> None:
    config = runner.config
    config["db_url"] = url
    (runner.home / "config.json").write_text(json.dumps(config, indent=2) + "\n")


@pytest.mark.cometbft
def test_node_with_read_only_sqlite_projection_halts_cleanly(tmp_path: Path,
                                                             cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id=REAL_CHAIN)
    runner.start("--no-api")
    with runner.rpc() as rpc:
        _commit(rpc, TxBuilder(AGENT, REAL_CHAIN), "before-fault", "written normally")
    runner.stop()
    path = runner.home / "data" / "projection.db"
    _set_db_url(runner, f"sqlite:///file:{path}?mode=ro&uri=true")
    start_height = _stored_height(runner)
    runner.start("--no-api", wait=False)
    halt = _halted(runner)
    failed = _stored_height(runner) + 1
    assert f"projection flush failed at height {failed}: " in halt
    assert "attempt to write a readonly database" in halt
    assert failed == start_height + 1  # the very first block after the restart
    _set_db_url(runner, "")
    _converges(runner, tmp_path, ["before-fault"])


def _app_pid(runner: NodeRunner, timeout: float = 30) -> int:
    """The pid of the node's ABCI app process (a child of the supervisor)."""
    assert runner.proc is not None
    supervisor = runner.proc.pid

    def app_pid() -> int | None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == supervisor and b"app" in cmdline and b"memledger.cli.main" in cmdline:
                return int(entry.name)
        return None

    return wait_until(app_pid, timeout, 0.1, what="the node's app process")


def _fill_until_halt(runner: NodeRunner) -> tuple[str, list[str]]:
    """Cap the app's file sizes just above their current size, write until it halts."""
    builder = TxBuilder(AGENT, REAL_CHAIN)
    runner.start("--no-api")
    acked: list[str] = []
    with runner.rpc() as rpc:
        _commit(rpc, builder, "before-fault", "written normally")
        acked.append("before-fault")
    data = runner.home / "data"
    written = [p for p in data.rglob("*") if p.is_file()] + [runner.home / "logs" / "app.log"]
    limit = max(p.stat().st_size for p in written) + (256 << 10)
    resource.prlimit(_app_pid(runner), resource.RLIMIT_FSIZE, (limit, limit))
    content = "f" * 200_000
    with RpcClient(runner.rpc_url, timeout=30) as rpc:
        for i in range(200):
            if runner.proc is not None and runner.proc.poll() is not None:
                break
            try:
                result = rpc.broadcast_tx_commit(builder.submit(time.time_ns(), f"fill-{i}",
                                                                f"{i}:{content}"))
            except Exception:  # noqa: BLE001 - the node is going down under us
                break
            if result.code == 0:
                acked.append(f"fill-{i}")
    halt = _halted(runner)
    failed = int(halt.split("at height ")[1].split(":")[0])
    assert _stored_height(runner) == failed - 1, halt  # the failed block never committed
    return halt, acked


@pytest.mark.cometbft
def test_node_on_a_full_disk_halts_cleanly(tmp_path: Path, cometbft_bin: Path) -> None:
    """SQLite projection: its WAL is the app's largest file, so SQLite fills first."""
    runner = NodeRunner(tmp_path / "home", chain_id=REAL_CHAIN)
    halt, acked = _fill_until_halt(runner)
    # SQLite reports EFBIG as "disk I/O error" (WAL) or "database or disk is full".
    assert "projection flush failed at height" in halt, halt
    assert any(s in halt for s in ("disk is full", "disk I/O error")), halt
    _converges(runner, tmp_path, acked)


@pytest.mark.cometbft
@pytest.mark.postgres
def test_node_with_full_lmdb_disk_halts_cleanly(tmp_path: Path, cometbft_bin: Path,
                                                pg_role: PgRole) -> None:
    """PostgreSQL projection: the app's only growing files are LMDB's, so LMDB fills."""
    runner = NodeRunner(tmp_path / "home", chain_id=REAL_CHAIN, db_url=pg_role.url)
    halt, acked = _fill_until_halt(runner)
    assert "canonical store commit failed at height" in halt, halt
    # LMDB turns the short write (EFBIG) into EIO or reports EFBIG itself.
    assert "mdb_txn_commit" in halt and any(
        s in halt for s in ("Input/output error", "File too large")), halt
    _converges(runner, tmp_path, acked, projection_url=pg_role.url)


@pytest.mark.cometbft
@pytest.mark.postgres
def test_node_with_revoked_postgres_privileges_halts_cleanly(
        tmp_path: Path, cometbft_bin: Path, pg_role: PgRole) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id=REAL_CHAIN, db_url=pg_role.url)
    runner.start("--no-api")
    with runner.rpc() as rpc:
        _commit(rpc, TxBuilder(AGENT, REAL_CHAIN), "before-fault", "written normally")
    pg_role.revoke_writes()  # while it runs: the next Commit's flush is refused
    halt = _halted(runner)
    assert "projection flush failed at height" in halt and "permission denied" in halt, halt
    failed = int(halt.split("at height ")[1].split(":")[0])
    assert _stored_height(runner) == failed - 1
    pg_role.grant_writes()
    _converges(runner, tmp_path, ["before-fault"], projection_url=pg_role.url)

