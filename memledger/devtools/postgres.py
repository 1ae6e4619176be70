"""A throwaway private PostgreSQL server for tests and benchmarks.

Tests must exercise a real server (not SQLite), but CI has no Docker, so we run the distro
binaries directly: initdb into a temp dir, listen on 127.0.0.1 at a free port with trust
auth, and tear everything down afterwards. PostgreSQL refuses to run as root, so when we
are root every server command runs as the ``postgres`` system user via ``runuser``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from memledger.devtools.ports import free_port

DEFAULT_DB = "memledger_test"
_START_ATTEMPTS = 3


class PostgresError(RuntimeError):
    """The private server could not be found, initialised or started."""


def find_pg_bin() -> Path:
    """Directory holding initdb/pg_ctl: $PG_BIN, pg_config --bindir, newest
    /usr/lib/postgresql/*/bin, then PATH."""
    candidates: list[Path] = []
    if os.environ.get("PG_BIN"):
        candidates.append(Path(os.environ["PG_BIN"]))
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    versioned = glob.glob("/usr/lib/postgresql/*/bin")
    versioned.sort(key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0)
    candidates.extend(Path(p) for p in reversed(versioned))
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for cand in candidates:
        if (cand / "initdb").is_file() and (cand / "pg_ctl").is_file():
            return cand
    raise PostgresError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found; install postgresql, set "
        f"PG_BIN, or set MEMLEDGER_PG_URL to an existing server. Looked in: {candidates}"
    )


def libpq_url(url: str) -> str:
    """Strip the SQLAlchemy driver suffix so psycopg can connect to the same URL."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def with_database(url: str, dbname: str) -> str:
    """Same server URL, different database name."""
    base, _, _ = url.rpartition("/")
    return f"{base}/{dbname}"


def create_database(url: str, dbname: str) -> str:
    """CREATE DATABASE ``dbname`` on the server behind ``url``; return its URL."""
    with psycopg.connect(libpq_url(with_database(url, "postgres")), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    return with_database(url, dbname)


def drop_database(url: str, dbname: str) -> None:
    """DROP DATABASE ``dbname`` (forcing out leftover connections)."""
    with psycopg.connect(libpq_url(with_database(url, "postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def unique_db_name(prefix: str = "t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@dataclass
class PostgresServer:
    """A running private server; call ``stop()`` (idempotent) to shut down and delete it."""

    base_dir: Path
    bin_dir: Path
    port: int
    dbname: str = DEFAULT_DB
    _stopped: bool = field(default=False, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base_dir / "sock"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{self.dbname}"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if (self.data_dir / "postmaster.pid").exists():
            _pg(
                self.bin_dir,
                "pg_ctl",
                "stop",
                "-D",
                str(self.data_dir),
                "-m",
                "fast",
                "-w",
                cwd=self.base_dir,
                check=False,
            )
        shutil.rmtree(self.base_dir, ignore_errors=True)


def _as_postgres() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _pg(
    bin_dir: Path, tool: str, *args: str, cwd: Path, check: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [*_as_postgres(), str(bin_dir / tool), *args]
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise PostgresError(f"{tool} failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    return proc


def _make_base_dir() -> Path:
    # As root, use /tmp: pytest's tmp dirs are 0700 root and the postgres user can't enter.
    parent = "/tmp" if os.geteuid() == 0 else None
    base = Path(tempfile.mkdtemp(prefix="memledger-pg-", dir=parent))
    (base / "sock").mkdir()
    if os.geteuid() == 0:
        for path in (base, base / "sock"):
            shutil.chown(path, user="postgres", group="postgres")
    return base


def start_postgres(dbname: str = DEFAULT_DB) -> PostgresServer:
    """initdb + start a private server on a free port and create ``dbname``."""
    bin_dir = find_pg_bin()
    base = _make_base_dir()
    server = PostgresServer(base_dir=base, bin_dir=bin_dir, port=0, dbname=dbname)
    try:
        _pg(
            bin_dir,
            "initdb",
            "-D",
            str(server.data_dir),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
            cwd=base,
        )
        conf = server.data_dir / "postgresql.conf"
        base_conf = conf.read_text()
        for _ in range(_START_ATTEMPTS):
            server.port = free_port()
            conf.write_text(
                base_conf
                + "\n# memledger test overrides\n"
                + "listen_addresses = '127.0.0.1'\n"
                + f"port = {server.port}\n"
                + f"unix_socket_directories = '{server.socket_dir}'\n"
                + "fsync = on\n"
                + "max_connections = 200\n"
            )
            started = _pg(
                bin_dir,
                "pg_ctl",
                "start",
                "-D",
                str(server.data_dir),
                "-w",
                "-t",
                "60",
                "-l",
                str(server.log_file),
                cwd=base,
                check=False,
            )
            if started.returncode == 0:
                break
        else:
            raise PostgresError(f"postgres did not start:\n{server.log_tail()}")
        create_database(server.url, dbname)
    except BaseException:
        server.stop()
        raise
    return server
