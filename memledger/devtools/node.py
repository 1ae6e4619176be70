"""A real single memledger node (app + cometbft [+ API, voter]) run by `memledger start`,
for tests and benchmarks."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from memledger.sdk.rpc import RpcClient, RpcError
from memledger.sdk.waiting import wait_until

REPO = Path(__file__).parents[2]
PORT_OFFSETS = (0, 1, 2, 24)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_base_port() -> int:
    """A base port whose node ports (base, +1, +2, +24) are all free."""
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        base = rng.randrange(20000, 32000, 32)  # below the ephemeral range (32768+)
        if all(_bindable(base + off) for off in PORT_OFFSETS):
            return base
    raise RuntimeError("no free port range")


def memledger(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "memledger.cli.main", *args], capture_output=True,
                          text=True, check=check, timeout=timeout, env=env, cwd=REPO)


class NodeRunner:
    """Init once, start/stop many times; exposes RPC and REST URLs."""

    def __init__(self, home: Path, *, chain_id: str = "memledger-it", db_url: str = "",
                 voter: bool = False, app_version: int | None = None) -> None:
        self.home = home
        self.base = free_base_port()
        args = ["init", "--home", str(home), "--chain-id", chain_id,
                "--base-port", str(self.base)]
        if app_version is not None:
            args += ["--app-version", str(app_version)]
        if db_url:
            args += ["--db-url", db_url]
        if not voter:
            args.append("--no-voter")
        memledger(*args)
        self.rpc_url = f"http://127.0.0.1:{self.base + 1}"
        self.api_url = f"http://127.0.0.1:{self.base + 24}"
        self.proc: subprocess.Popen[str] | None = None
        self.output = ""

    @property
    def config(self) -> dict[str, Any]:
        return json.loads((self.home / "config.json").read_text())  # type: ignore[no-any-return]

    def start(self, *extra: str, wait: bool = True) -> NodeRunner:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memledger.cli.main", "start", "--home", str(self.home), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO,
        )
        if wait:
            self.wait_rpc()
        return self

    def rpc(self) -> RpcClient:
        return RpcClient(self.rpc_url, timeout=60)

    def wait_rpc(self, timeout: float = 60) -> None:
        def first_block() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"node exited early: {self.collect()}\n{self.logs()}")
            with self.rpc() as client:
                return client.latest_height() >= 1

        wait_until(first_block, timeout, 0.2, what=f"the first block on {self.rpc_url}",
                   ignore=(httpx.HTTPError, RpcError, ValueError, KeyError),
                   error=lambda msg: TimeoutError(f"{msg}\n{self.logs()}"))

    def wait_exit(self, timeout: float = 60) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout)
        self.collect()
        return code

    def collect(self) -> str:
        if self.proc is not None and self.proc.stdout is not None and self.proc.poll() is not None:
            self.output += self.proc.stdout.read()
        return self.output

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.collect()
        return code

    def logs(self, lines: int = 30) -> str:
        out = []
        for path in sorted((self.home / "logs").glob("*.log")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)


def wait_api_ready(url: str, timeout: float = 60) -> None:
    """Poll `/ready` until the REST API reports the node ready (200)."""
    last = [""]

    def ready() -> bool:
        resp = httpx.get(f"{url}/ready", timeout=5)
        last[0] = resp.text
        return resp.status_code == 200

    wait_until(ready, timeout, 0.25, what=f"{url}/ready to answer 200",
               ignore=(httpx.HTTPError,), error=lambda msg: TimeoutError(f"{msg}: {last[0]}"))
