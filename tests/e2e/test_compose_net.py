"""The docker-compose test net for real: the generated compose file and Dockerfile, four
validator containers under load, one `docker kill`ed and started again mid-load.

The image is built from deploy/Dockerfile (the committed, generated one). Its base images
are build arguments: by default local stand-ins made by deploy/scripts/local-base-images.sh
(debootstrap; no image registry needed, cached in Docker after the first run), or the
public images with MEMLEDGER_COMPOSE_BASES=public. Docker's layer cache keeps the
dependency layers, so a repeat run rebuilds only the memledger source layers.

Where Docker cannot run at all (no docker CLI, no engine, no compose, no way to build the
bases) the test skips, saying why in one line. Everything it starts is removed at the end,
also on failure; containers of an earlier run that was killed are removed at the start.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memledger.daemon.cometbft import REPO_ROOT
from memledger.devtools.loadgen import LoadGenerator
from memledger.sdk.waiting import wait_until
from memledger.testnet.compose import DOCKERIGNORE, write_compose
from memledger.testnet.layout import COMPOSE
from memledger.testnet.net import Testnet, TestnetNode
from tests.e2e.netcheck import assert_only_victims_lost, assert_replicated, wait_all_voted
from tests.support.node import memledger

pytestmark = [pytest.mark.docker, pytest.mark.cometbft,
              pytest.mark.timeout(1800)]  # a cold run builds the bases and the image

IMAGE = "memledger:compose-e2e"
PROJECT_PREFIX = "memledger-e2e-"
CHAIN = "memledger-compose-e2e"
RATE = 8.0  # memories/s, as the local multi-node tests: 4 nodes share two cores
BASES_SCRIPT = REPO_ROOT / "deploy" / "scripts" / "local-base-images.sh"
#: build args passed through from the environment when set: how this host reaches the
#: package registries (the proxy variables are Docker's predefined build args)
PASSTHROUGH_ARGS = ("PIP_INDEX_URL", "GOPROXY", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                    "http_proxy", "https_proxy", "no_proxy")


def _run(cmd: list[str], *, timeout: float = 120, check: bool = True,
         stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    out = subprocess.CompletedProcess(cmd, proc.returncode, proc.stdout.decode(errors="replace"),
                                      proc.stderr.decode(errors="replace"))
    if check and out.returncode != 0:
        raise AssertionError(f"{shlex.join(cmd)} exited {out.returncode}\n"
                             f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


def _ok(cmd: list[str]) -> bool:
    try:
        return _run(cmd, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _compose_command() -> list[str] | None:
    """`docker compose` (v2) if present, else Debian's `docker-compose` (v1.29)."""
    forced = os.environ.get("MEMLEDGER_COMPOSE")
    if forced:
        return shlex.split(forced)
    if _ok(["docker", "compose", "version"]):
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def _docker_or_skip() -> list[str]:
    if shutil.which("docker") is None:
        pytest.skip("docker: no docker CLI on this machine (.ci/run installs docker.io as root)")
    info = _run(["docker", "info", "--format", "{{.ServerVersion}}"], timeout=30, check=False)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no answer"])[-1]
        pytest.skip(f"docker: engine not reachable ({reason})")
    compose = _compose_command()
    if compose is None:
        pytest.skip("docker: neither `docker compose` nor `docker-compose` is installed")
    return compose


def _base_images() -> dict[str, str]:
    """PYTHON_IMAGE / GO_IMAGE build args: local stand-ins unless told to use the public."""
    if os.environ.get("MEMLEDGER_COMPOSE_BASES") == "public":
        return {}
    proc = _run(["bash", str(BASES_SCRIPT)], timeout=900, check=False)
    if proc.returncode == 3:
        pytest.skip(f"docker: cannot build local base images ({proc.stderr.strip()[-200:]})")
    assert proc.returncode == 0, f"{BASES_SCRIPT} failed:\n{proc.stderr[-3000:]}"
    return dict(line.split("=", 1) for line in proc.stdout.split() if "=" in line)


def _context_tar() -> bytes:
    """The build context: exactly what the generated .dockerignore lets through, plus the
    Dockerfile (a clean, small context however many venvs and caches the checkout has)."""
    allowed = [line[1:].rstrip("/") for line in DOCKERIGNORE.splitlines()
               if line.startswith("!")]

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = info.name.split("/")
        if "__pycache__" in parts or info.name.endswith(".pyc"):
            return None
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in [*allowed, "deploy/Dockerfile"]:
            tar.add(REPO_ROOT / name, arcname=name, filter=clean)
    return buf.getvalue()


def _image_id(ref: str) -> str:
    out = _run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], check=False)
    return out.stdout.strip() if out.returncode == 0 else ""


def build_image(bases: dict[str, str]) -> None:
    """deploy/Dockerfile with the given bases; the image it replaces is removed."""
    args = dict(bases)
    args.update({k: os.environ[k] for k in PASSTHROUGH_ARGS if os.environ.get(k)})
    before = _image_id(IMAGE)
    cmd = ["docker", "build", "-q", "-f", "deploy/Dockerfile", "-t", IMAGE]
    for key, value in sorted(args.items()):
        cmd += ["--build-arg", f"{key}={value}"]
    _run([*cmd, "-"], stdin=_context_tar(), timeout=1200)
    if before and before != _image_id(IMAGE):
        _run(["docker", "image", "rm", before], check=False)


def remove_stale_projects() -> None:
    """Containers and networks of earlier runs whose pytest process is gone (SIGKILLed
    runs cannot tear down, and `restart: unless-stopped` would keep them running)."""
    listed = _run(["docker", "ps", "-a", "--format",
                   '{{.ID}} {{.Label "com.docker.compose.project"}}'], check=False).stdout
    stale: dict[str, list[str]] = {}
    for line in listed.splitlines():
        cid, _, project = line.partition(" ")
        pid = project.removeprefix(PROJECT_PREFIX)
        if project.startswith(PROJECT_PREFIX) and not (pid.isdigit() and
                                                        Path(f"/proc/{pid}").exists()):
            stale.setdefault(project, []).append(cid)
    for project, cids in stale.items():
        _run(["docker", "rm", "-f", "-v", *cids], check=False)
        _run(["docker", "network", "rm", f"{project}_default"], check=False)


@dataclass
class ComposeNet:
    """A generated compose net brought up under its own project name."""

    net: Testnet
    compose_file: Path
    project: str
    compose: list[str]
    containers: dict[str, str] = field(default_factory=dict)

    def run(self, *args: str, timeout: float = 180, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        return _run([*self.compose, "-p", self.project, "-f", str(self.compose_file), *args],
                    timeout=timeout, check=check)

    def container(self, node: TestnetNode) -> str:
        """Its container id (kept across kill and start; compose v1 is slow to ask)."""
        if node.name not in self.containers:
            cid = self.run("ps", "-q", node.name).stdout.strip()
            assert cid, f"no container for {node.name}"
            self.containers[node.name] = cid
        return self.containers[node.name]

    def running(self, node: TestnetNode) -> bool:
        state = _run(["docker", "inspect", "--format", "{{.State.Running}}",
                      self.container(node)])
        return state.stdout.strip() == "true"

    def logs(self, lines: int = 40) -> str:
        return self.run("logs", "--no-color", "--tail", str(lines), check=False).stdout


@pytest.fixture(scope="module")
def compose_net(tmp_path_factory: pytest.TempPathFactory,
                cometbft_bin: Path) -> Iterator[ComposeNet]:
    compose = _docker_or_skip()
    remove_stale_projects()
    started = time.monotonic()
    build_image(_base_images())
    print(f"\nimage {IMAGE} ready in {time.monotonic() - started:.1f}s")
    tmp = tmp_path_factory.mktemp("compose")
    net = Testnet.create(tmp / "testnet", 4, chain_id=CHAIN, flavour=COMPOSE)
    [compose_file, *_] = write_compose(net.spec, net.root, tmp, REPO_ROOT, api=False,
                                       image=IMAGE)
    cnet = ComposeNet(net, compose_file, f"{PROJECT_PREFIX}{os.getpid()}", compose)
    try:
        started = time.monotonic()
        cnet.run("up", "-d", "--no-build")
        net.wait_height(2, timeout=180)
        print(f"4 validator containers at height 2 in {time.monotonic() - started:.1f}s")
        for node in net.nodes:
            cnet.container(node)
        yield cnet
    except BaseException:
        print(cnet.logs())
        raise
    finally:
        cnet.run("down", "-v", "--remove-orphans", "-t", "10", check=False)
        left = _run(["docker", "ps", "-a", "-q", "--filter",
                     f"label=com.docker.compose.project={cnet.project}"], check=False)
        if left.stdout.split():
            _run(["docker", "rm", "-f", "-v", *left.stdout.split()], check=False)


@pytest.fixture
def compose_testnet(compose_net: ComposeNet) -> Testnet:
    """The net's homes (bind-mounted): node logs are attached to a failing report."""
    return compose_net.net


def _top(nodes: list[TestnetNode]) -> int:
    return max(n.height() or 0 for n in nodes)


def test_compose_net_survives_docker_kill_under_load(compose_net: ComposeNet,
                                                     compose_testnet: Testnet) -> None:
    net = compose_testnet
    victim, live = net.node(3), net.nodes[:3]
    t0 = time.monotonic()
    phases: dict[str, float] = {}
    gen = LoadGenerator(net.rpc_urls(), net.chain_id, rate=RATE, agents=4).start()
    try:
        time.sleep(8)
        _run(["docker", "kill", compose_net.container(victim)])
        phases["killed"] = time.monotonic() - t0
        time.sleep(1)
        assert not compose_net.running(victim), "a killed container must stay down"
        before = _top(live)
        time.sleep(6)  # the victim stays down a while, load running
        # 3 of 4 validators must keep committing: two more blocks, however slow the box
        wait_until(lambda: _top(live) > before + 1, 60, 0.5,
                   what=f"3 of 4 validators to commit two blocks above {before}")
        _run(["docker", "start", compose_net.container(victim)])
        phases["started"] = time.monotonic() - t0
        victim.wait_ready(90)
        phases["ready"] = time.monotonic() - t0
        net.wait_caught_up([victim], timeout=120)
        phases["caught_up"] = time.monotonic() - t0
        time.sleep(3)
    finally:
        report = gen.stop(settle=60)
    phases["settled"] = time.monotonic() - t0
    print(f"\nload: {json.dumps(report.to_json())}\nphases (s): "
          f"{ {k: round(v, 1) for k, v in phases.items()} }")
    assert report.committed > 100, report
    assert report.failed == 0 and report.pending == 0, report
    stray = [s for s in gen.submissions
             if s.error and s.check_code is None and s.node != victim.rpc_url]
    assert not stray, f"live nodes did not answer: {stray[:3]}"
    assert_only_victims_lost(gen, [victim])  # nothing a live node acknowledged is lost
    lost = report.acknowledged - report.committed
    assert lost <= sum(1 for s in gen.submissions if s.acked and s.node == victim.rpc_url)
    assert_replicated(net, gen.committed())  # all four equal, every committed memory there
    wait_all_voted(net, [m for m, _ in gen.committed()])
    check = memledger("testnet", "check", str(net.root), "--json", check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    result = json.loads(check.stdout)
    assert sorted(result["heights"]) == [n.name for n in net.nodes], result
    assert result["conclusive"] and result["projection_height"] is not None, result
    print(f"checked (s): {time.monotonic() - t0:.1f}")
