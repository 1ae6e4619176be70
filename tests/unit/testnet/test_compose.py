"""The generated docker-compose net, checked statically (no Docker engine needed).

Homes come from the real `cometbft init` (keys, node ids), so the binary is required.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import tomlkit
import yaml  # type: ignore[import-untyped]
from click.testing import CliRunner

from memledger.cli.main import main
from memledger.daemon import cometbft
from memledger.daemon.cometbft import COMETBFT_VERSION, REPO_ROOT
from memledger.daemon.home import NodeHome
from memledger.testnet.compose import (
    DOCKERFILE,
    DOCKERIGNORE,
    create_database_sql,
    project_name,
    write_compose,
)
from memledger.testnet.layout import (
    COMPOSE,
    CONTAINER_HOME,
    POSTGRES_SERVICE,
    POSTGRES_TEMPLATE,
)
from memledger.testnet.net import Testnet

N = 4
BASE = 26656


def _generate(root: Path, *, postgres: bool, flavour: str = COMPOSE) -> tuple[Testnet, Path]:
    """A fake repo at ``root`` with deploy/ (compose files) and deploy/testnet (homes)."""
    out = root / "deploy"
    net = Testnet.create(out / "testnet", N, base_port=BASE, flavour=flavour,
                         postgres=postgres,
                         db_url_template=POSTGRES_TEMPLATE if postgres else "")
    if flavour == COMPOSE:
        write_compose(net.spec, net.root, out, root)
    return net, out


@pytest.fixture(scope="module")
def with_pg(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> tuple[Testnet, Path]:
    return _generate(tmp_path_factory.mktemp("repo-pg"), postgres=True)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> tuple[Testnet, Path]:
    return _generate(tmp_path_factory.mktemp("repo"), postgres=False)


def _compose(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((out / "docker-compose.yml").read_text())
    return doc


def _toml(home: Path) -> Any:
    return tomlkit.parse(cometbft.config_path(NodeHome(home).cometbft).read_text())


def _port(laddr: str) -> int:
    return int(laddr.rsplit(":", 1)[1])


def test_services_are_the_validators_plus_postgres(with_pg: tuple[Testnet, Path],
                                                   plain: tuple[Testnet, Path]) -> None:
    net, out = with_pg
    assert set(_compose(out)["services"]) == {f"node{i}" for i in range(N)} | {POSTGRES_SERVICE}
    net, out = plain
    assert set(_compose(out)["services"]) == {f"node{i}" for i in range(N)}
    assert "volumes" not in _compose(out)


def test_ports_volumes_and_build(with_pg: tuple[Testnet, Path]) -> None:
    net, out = with_pg
    services = _compose(out)["services"]
    for node in net.nodes:
        svc = services[node.name]
        config = node.config
        expected = [node.spec.p2p_port, node.spec.rpc_port, node.spec.api_port]
        assert svc["ports"] == [f"{p}:{p}" for p in expected]
        cfg = _toml(node.home)
        assert _port(cfg["p2p"]["laddr"]) == node.spec.p2p_port == BASE + 32 * node.index
        assert _port(cfg["rpc"]["laddr"]) == node.spec.rpc_port == _port(config.rpc_laddr)
        assert config.api_port == node.spec.api_port and config.api_host == "0.0.0.0"
        assert cfg["rpc"]["laddr"].startswith("tcp://0.0.0.0:")  # reachable through -p
        assert cfg["proxy_app"] == config.abci_address == f"tcp://127.0.0.1:{node.spec.abci_port}"
        [volume] = svc["volumes"]
        host, container = volume.split(":")
        assert container == CONTAINER_HOME
        assert (out / host).resolve() == node.home
        assert (out / host / "config.json").is_file()
        assert (out / host / "cometbft" / "config" / "priv_validator_key.json").is_file()
        assert svc["command"] == ["start", "--home", CONTAINER_HOME]
        assert svc["depends_on"] == {POSTGRES_SERVICE: {"condition": "service_healthy"}}
        context = (out / svc["build"]["context"]).resolve()
        assert (context / svc["build"]["dockerfile"]).resolve() == out / "Dockerfile"


def test_persistent_peers_name_the_other_services(with_pg: tuple[Testnet, Path]) -> None:
    net, out = with_pg
    services = _compose(out)["services"]
    ids = {n.name: cometbft.node_id(n.node_home.cometbft) for n in net.nodes}
    for node in net.nodes:
        cfg = _toml(node.home)
        peers = set(str(cfg["p2p"]["persistent_peers"]).split(","))
        expected = set()
        for other in net.nodes:
            if other.name == node.name:
                continue
            assert other.name in services
            listen = _port(_toml(other.home)["p2p"]["laddr"])
            expected.add(f"{ids[other.name]}@{other.name}:{listen}")
        assert peers == expected
        assert cfg["p2p"]["external_address"] == f"{node.name}:{node.spec.p2p_port}"


def test_genesis_validators_match_the_priv_validator_keys(with_pg: tuple[Testnet, Path]) -> None:
    net, _ = with_pg
    genesis = [cometbft.load_genesis(n.node_home.cometbft) for n in net.nodes]
    assert all(g == genesis[0] for g in genesis), "one shared genesis"
    assert genesis[0]["chain_id"] == net.chain_id
    keys = {}
    for node in net.nodes:
        key = json.loads((node.node_home.cometbft / "config" /
                          "priv_validator_key.json").read_text())
        keys[key["pub_key"]["value"]] = (key["address"], node.spec.power, node.name)
    listed = {v["pub_key"]["value"]: (v["address"], int(v["power"]), v["name"])
              for v in genesis[0]["validators"]}
    assert listed == keys
    for value, (address, _, _) in listed.items():
        assert cometbft.validator_address(base64.b64decode(value)) == address


def test_postgres_service_and_databases(with_pg: tuple[Testnet, Path]) -> None:
    net, out = with_pg
    pg = _compose(out)["services"][POSTGRES_SERVICE]
    assert pg["image"].startswith("postgres:")
    init_mount = next(v for v in pg["volumes"] if "docker-entrypoint-initdb.d" in v)
    init_sql = (out / init_mount.split(":")[0]).read_text()
    for node in net.nodes:
        url = node.config.db_url
        assert url.startswith(f"postgresql+psycopg://memledger:memledger@{POSTGRES_SERVICE}:")
        assert create_database_sql(url.rsplit("/", 1)[1]) in init_sql.splitlines()


def test_dockerfile_builds_pinned_cometbft_on_python_slim(plain: tuple[Testnet, Path]) -> None:
    """By default the public images; the bases are build args (local stand-ins in CI)."""
    _, out = plain
    text = (out / "Dockerfile").read_text()
    lines = text.splitlines()
    defaults = dict(line.split()[1].split("=", 1) for line in lines
                    if line.startswith("ARG ") and "=" in line)
    froms = [line.split()[1] for line in lines if line.startswith("FROM ")]
    assert froms[0] == "${GO_IMAGE}" and froms[-1] == "${PYTHON_IMAGE}"
    assert defaults["GO_IMAGE"].startswith("golang:1.2")
    assert defaults["PYTHON_IMAGE"].startswith("python:3.11-slim")
    assert lines.index(f"ARG GO_IMAGE={defaults['GO_IMAGE']}") < lines.index("FROM ${GO_IMAGE}"
                                                                            " AS cometbft")
    assert f"go install github.com/cometbft/cometbft/cmd/cometbft@v{COMETBFT_VERSION}" in text
    assert "pip install --no-cache-dir --require-hashes -r requirements.lock" in text
    assert {"ARG GOPROXY", "ARG PIP_INDEX_URL"} <= set(lines)
    assert (out / "Dockerfile.dockerignore").read_text() == DOCKERIGNORE


def test_compose_file_is_accepted_by_compose_v1(plain: tuple[Testnet, Path]) -> None:
    """Debian's docker-compose 1.29 rejects a top-level `name:`; the project name goes
    on the command line (`-p`), as the header says."""
    net, out = plain
    doc = _compose(out)
    assert set(doc) <= {"services", "volumes"}
    assert f"-p {project_name(net.spec)} " in (out / "docker-compose.yml").read_text()
    assert project_name(net.spec) == "memledger-testnet"


def test_local_and_compose_topologies_differ_only_in_hosts(
        tmp_path: Path, plain: tuple[Testnet, Path]) -> None:
    compose, _ = plain
    local, _ = _generate(tmp_path, postgres=False, flavour="local")
    for c, loc in zip(compose.nodes, local.nodes, strict=True):
        cc, lc = c.config, loc.config
        assert (cc.chain_id, cc.moniker, cc.api_port, cc.abci_address) == \
            (lc.chain_id, lc.moniker, lc.api_port, lc.abci_address)
        assert _port(cc.rpc_laddr) == _port(lc.rpc_laddr)
        assert _port(cc.p2p_laddr) == _port(lc.p2p_laddr)
        ctoml, ltoml = _toml(c.home), _toml(loc.home)
        for section, key in (("consensus", "timeout_commit"),
                             ("consensus", "create_empty_blocks"), ("mempool", "size")):
            assert ctoml[section][key] == ltoml[section][key]

        def hostports(cfg: Any) -> set[str]:
            return {p.split("@")[1].split(":")[1] for p in
                    str(cfg["p2p"]["persistent_peers"]).split(",")}

        assert hostports(ctoml) == hostports(ltoml)
        assert all("@127.0.0.1:" in p for p in str(ltoml["p2p"]["persistent_peers"]).split(","))


def test_committed_deploy_files_match_the_generator(tmp_path: Path, cometbft_bin: Path) -> None:
    """deploy/ holds the output of `memledger testnet init -n 4 --out deploy/testnet
    --compose`; regenerating must give the same files (homes are not committed)."""
    net, out = _generate(tmp_path, postgres=False)
    committed = REPO_ROOT / "deploy"
    assert yaml.safe_load((committed / "docker-compose.yml").read_text()) == _compose(out)
    assert (committed / "Dockerfile").read_text() == DOCKERFILE
    assert (committed / "Dockerfile.dockerignore").read_text() == DOCKERIGNORE
    # The legacy builder (compose v1) reads only the context root's .dockerignore.
    assert (REPO_ROOT / ".dockerignore").read_text() == DOCKERIGNORE


def test_cli_writes_compose(tmp_path: Path, cometbft_bin: Path) -> None:
    result = CliRunner().invoke(main, [
        "testnet", "init", "--validators", "3", "--out", str(tmp_path / "homes"),
        "--compose", "--compose-dir", str(tmp_path / "deploy"), "--postgres",
        "--powers", "10,20,30", "--base-port", "31000", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [n["power"] for n in data["nodes"]] == [10, 20, 30]
    doc = _compose(tmp_path / "deploy")
    assert set(doc["services"]) == {"node0", "node1", "node2", POSTGRES_SERVICE}
    assert doc["services"]["node2"]["ports"][0] == "31064:31064"
    again = CliRunner().invoke(main, ["testnet", "init", "--out", str(tmp_path / "homes")])
    assert again.exit_code == 1 and "already holds a test net" in again.output
