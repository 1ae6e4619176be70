"""Fast checks of the test-net tooling itself (no processes): layout, process matching,
divergence detection and the seqlock projection snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from memledger.projection.writer import Projection
from memledger.protocol import records
from memledger.testnet.consistency import (
    Dump,
    ProjectionReader,
    compare_dumps,
    compare_headers,
    first_disagreement,
)
from memledger.testnet.layout import (
    COMPOSE,
    LOCAL,
    TestnetSpec,
    Topology,
    node_config,
    node_specs,
)
from memledger.testnet.procs import role_of


def test_port_blocks_and_powers() -> None:
    nodes = node_specs(3, 30000, [10, 20, 30])
    assert [n.ports for n in nodes] == [(30000, 30001, 30002, 30024),
                                        (30032, 30033, 30034, 30056),
                                        (30064, 30065, 30066, 30088)]
    assert [n.power for n in nodes] == [10, 20, 30]
    assert [n.power for n in node_specs(2, 30000)] == [10, 10]
    with pytest.raises(ValueError):
        node_specs(3, 30000, [1, 2])
    with pytest.raises(ValueError):
        node_specs(2, 30000, [1, 0])


def test_topologies_share_ports_not_hosts(tmp_path: Path) -> None:
    nodes = node_specs(2, 30000)
    local = TestnetSpec("c", 30000, nodes, flavour=LOCAL)
    compose = TestnetSpec("c", 30000, nodes, flavour=COMPOSE)
    assert Topology(LOCAL).peer_address(nodes[1], "ab") == "ab@127.0.0.1:30032"
    assert Topology(COMPOSE).peer_address(nodes[1], "ab") == "ab@node1:30032"
    lc, cc = node_config(local, nodes[1], tmp_path), node_config(compose, nodes[1], tmp_path)
    assert lc.rpc_laddr == "tcp://127.0.0.1:30033" and cc.rpc_laddr == "tcp://0.0.0.0:30033"
    assert lc.abci_address == cc.abci_address == "tcp://127.0.0.1:30034"
    templated = TestnetSpec("c", 30000, nodes, db_url_template="sqlite:///{home}/p-{index}.db")
    assert node_config(templated, nodes[1], tmp_path).db_url == f"sqlite:///{tmp_path}/p-1.db"


def test_spec_round_trip(tmp_path: Path) -> None:
    spec = TestnetSpec("chain", 30000, node_specs(2, 30000), voter=False)
    spec.nodes.append(spec.next_node())
    spec.save(tmp_path)
    loaded = TestnetSpec.load(tmp_path)
    assert loaded == spec
    assert [n.is_validator for n in loaded.nodes] == [True, True, False]


def test_process_roles_match_exact_homes(tmp_path: Path) -> None:
    home = tmp_path / "node1"
    py = ["/venv/bin/python", "-m", "memledger.cli.main"]
    assert role_of([*py, "start", "--home", str(home), "--no-api"], home) == "supervisor"
    assert role_of([*py, "app", "--home", str(home)], home) == "app"
    assert role_of([*py, "voter", "--home", str(home)], home) == "voter"
    assert role_of(["/venv/bin/python", "/venv/bin/memledger", "api", "--home", str(home)],
                   home) == "api"
    assert role_of(["/bin/cometbft", "start", "--home", f"{home}/cometbft"], home) == "cometbft"
    assert role_of([*py, "app", "--home", f"{home}0"], home) is None  # node10 is not node1
    assert role_of([*py, "projection", "rebuild", "--home", str(home)], home) is None
    assert role_of(["/bin/cometbft", "show-node-id", "--home", f"{home}/cometbft"], home) is None


def test_first_disagreement_uses_the_majority() -> None:
    assert first_disagreement({"a": 1, "b": 1, "c": 1}) is None
    assert first_disagreement({"a": 2, "b": 1, "c": 1}) == ("a", 1, 2)
    assert first_disagreement({"a": 1, "b": 1, "c": 3, "d": 1}) == ("c", 1, 3)


def test_compare_headers_reports_first_height_and_field() -> None:
    def h(app: str, block: str = "B") -> dict[str, str]:
        return {"block_hash": block, "app_hash": app, "last_results_hash": "R"}

    headers = {n: {1: h("A1"), 2: h("A2"), 3: h("A3")} for n in ("n0", "n1", "n2")}
    assert compare_headers(headers, range(1, 4)) is None
    headers["n2"][3] = h("BAD")
    headers["n1"][3] = h("A3", block="FORK")
    div = compare_headers(headers, range(1, 4))
    assert div is not None and (div.height, div.node, div.field) == (3, "n1", "header.block_hash")


def test_compare_dumps_names_table_and_key() -> None:
    row = ("m1", "general", "author", "fact", "text", "h", 1, "[]", "committed",
           1, 0, 2, None, None, "tx", "{}")
    same = {"memories": [row], "votes": []}
    assert compare_dumps({"n0": same, "n1": same, "n2": same}, 5) is None
    changed = {"memories": [row[:4] + ("other",) + row[5:]], "votes": []}
    div = compare_dumps({"n0": same, "n1": changed, "n2": same}, 5)
    assert div is not None
    assert (div.height, div.node, div.field) == (5, "n1", "projection.memories['m1']")
    missing: Dump = {"memories": [], "votes": []}
    div = compare_dumps({"n0": same, "n1": same, "n2": missing}, 5)
    assert div is not None and div.node == "n2" and div.found == "None"


def test_snapshot_is_the_projection_at_its_receipt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    projection = Projection(url)
    projection.flush(1, b"\x01" * 32, [(records.PARAMS, b'{"a": 1}')])
    projection.flush(2, b"\x02" * 32, [(records.PARAMS, b'{"a": 2}')])
    reader = ProjectionReader(url)
    try:
        snap = reader.snapshot()
        assert snap is not None and snap[0] == 2
        assert snap[1] == projection.dump()
    finally:
        reader.close()
        projection.close()
    with pytest.raises(FileNotFoundError):
        ProjectionReader(f"sqlite:///{tmp_path / 'missing.db'}")
