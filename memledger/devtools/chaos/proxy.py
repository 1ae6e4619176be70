"""Toxiproxy: the real fault proxy between the nodes' P2P links.

Why a proxy and not `tc netem` in network namespaces: netem gives latency and loss at the
kernel level, but this kernel (and the CI image's) is built without sch_netem, and
namespaces would move each node to its own address. A proxy per ordered pair of nodes
(i dials j at proxy i->j) works with CometBFT's `persistent_peers` as they are; PEX is
turned off so no node learns (and dials) another's real address around the proxy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import IO, Any

import httpx

from memledger.sdk.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_BIN = REPO_ROOT / ".cache" / "bin" / "toxiproxy-server"
TOXIPROXY_VERSION = "2.5.0"


class ProxyError(RuntimeError):
    """Toxiproxy is missing, did not start, or refused a request."""


def toxiproxy_bin() -> Path:
    """$TOXIPROXY_BIN, else the one `make toxiproxy` builds, else one on PATH."""
    given = os.environ.get("TOXIPROXY_BIN")
    if given:
        return Path(given)
    if DEFAULT_BIN.exists():
        return DEFAULT_BIN
    found = shutil.which("toxiproxy-server")
    if found:
        return Path(found)
    raise ProxyError(f"toxiproxy-server not found (run `make toxiproxy`; expected {DEFAULT_BIN})")


class Toxiproxy:
    """A toxiproxy-server process on 127.0.0.1:``port`` and its REST API."""

    def __init__(self, port: int, log_path: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._http = httpx.Client(base_url=self.url, timeout=10)

    def start(self) -> Toxiproxy:
        self._log = open(self._log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            [str(toxiproxy_bin()), "-host", "127.0.0.1", "-port", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)

        def up() -> bool:
            if self._proc is not None and self._proc.poll() is not None:
                raise ProxyError(f"toxiproxy exited with {self._proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                return self._http.get("/version").status_code == 200
            return False

        wait_until(up, 15, 0.1, what="toxiproxy's API", error=ProxyError)
        return self

    def stop(self) -> None:
        self._http.close()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def _ask(self, method: str, path: str, body: Any = None) -> Any:
        resp = self._http.request(method, path, json=body)
        if resp.status_code >= 300:
            raise ProxyError(f"{method} {path}: {resp.status_code} {resp.text.strip()}")
        return resp.json() if resp.content else None

    def create(self, name: str, listen_port: int, upstream_port: int) -> None:
        self._ask("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{listen_port}",
                                       "upstream": f"127.0.0.1:{upstream_port}",
                                       "enabled": True})

    def enable(self, name: str, enabled: bool) -> None:
        """Disabled: every open connection is closed and new ones are refused."""
        self._ask("POST", f"/proxies/{name}", {"enabled": enabled})

    def add_toxic(self, proxy: str, toxic: str, kind: str, attributes: dict[str, int], *,
                  stream: str = "downstream", toxicity: float = 1.0) -> None:
        self._ask("POST", f"/proxies/{proxy}/toxics",
                  {"name": toxic, "type": kind, "stream": stream, "toxicity": toxicity,
                   "attributes": attributes})

    def reset(self) -> None:
        """Every proxy enabled, every toxic removed."""
        self._ask("POST", "/reset")
