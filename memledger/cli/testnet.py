"""`memledger testnet ...` and `memledger bench load`: multi-node nets from the command line.

Added to the `main` group (memledger/cli/root.py) by memledger/cli/main.py
(`register`).
"""

from __future__ import annotations

import json
import math
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from memledger.cli.root import cannot_create, fail
from memledger.consensus.versions import LATEST_APP_VERSION, SUPPORTED_APP_VERSIONS
from memledger.daemon.ports import bindable
from memledger.testnet.layout import (
    DEFAULT_CHAIN_ID,
    PORT_BLOCK,
    PORT_OFFSETS,
    POSTGRES_TEMPLATE,
    port_block,
)

if TYPE_CHECKING:
    from memledger.testnet.net import Testnet, TestnetNode

dir_argument = click.argument("net_dir", metavar="DIR",
                              type=click.Path(path_type=Path, file_okay=False))


def _fail(message: str, code: int = 1) -> NoReturn:
    fail(message, code)


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def _parse_powers(value: str, validators: int) -> list[int] | None:
    if not value:
        return None
    try:
        powers = [int(p) for p in value.split(",")]
    except ValueError:
        raise click.BadParameter("expected integers like 10,20,30,40") from None
    if len(powers) != validators:
        raise click.BadParameter(f"{len(powers)} powers for {validators} validators")
    return powers


#: Where `testnet init` looks for free ports first: above a single node's defaults
#: (26656-26658, REST 26680), so `make run` and a default test net never share a port.
DEFAULT_TESTNET_BASE = 26720


def first_free_base_port(blocks: int, start: int = DEFAULT_TESTNET_BASE,
                         limit: int = 65000) -> int:
    """The lowest base port from ``start`` (in whole port blocks) whose first ``blocks``
    blocks are all free now: predictable on a quiet machine, never a port in use."""
    for base in range(start, limit - blocks * PORT_BLOCK, PORT_BLOCK):
        if all(bindable(port_block(base, i) + off)
               for i in range(blocks) for off in PORT_OFFSETS):
            return base
    raise RuntimeError(f"no free range of {blocks} port blocks from port {start}")


def _progress(message: str) -> None:
    """Progress of long work, on stderr so --json output on stdout stays parseable."""
    click.echo(message, err=True)


def _load(net_dir: Path) -> Testnet:
    from memledger.testnet.net import Testnet

    try:
        return Testnet.load(net_dir)
    except FileNotFoundError as exc:
        _fail(str(exc))


@click.group("testnet")
def testnet() -> None:
    """Multi-validator test nets: local processes or docker-compose."""


@testnet.command("init")
@click.option("--validators", "-n", type=click.IntRange(1, 64), default=4, show_default=True)
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Directory for the node homes (DIR/node0..N-1).")
@click.option("--chain-id", default=DEFAULT_CHAIN_ID, show_default=True)
@click.option("--base-port", type=click.IntRange(1024, 65000), default=None,
              help="Node i uses base+32*i: p2p +0, RPC +1, ABCI +2, REST +24 [default: the "
                   f"first free range from {DEFAULT_TESTNET_BASE}, clear of a single node's "
                   "26656-26680].")
@click.option("--powers", default="", help="Comma-separated voting powers (default: equal).")
@click.option("--db-url-template", default="",
              help="Projection URL per node; {index} {name} {home} are filled in.")
@click.option("--no-voter", is_flag=True, help="Do not run the auto-voters.")
@click.option("--compose", is_flag=True,
              help="Generate homes for docker-compose and write the compose file.")
@click.option("--compose-dir", type=click.Path(path_type=Path, file_okay=False),
              default=None,
              help="Where docker-compose.yml and Dockerfile go (with --compose) "
                   "[default: the --out directory].")
@click.option("--postgres", is_flag=True, help="Add a PostgreSQL service (with --compose).")
@click.option("--no-api", is_flag=True, help="Do not run the REST API (with --compose).")
@click.option("--app-version", type=click.Choice([str(v) for v in sorted(SUPPORTED_APP_VERSIONS)]),
              default=str(LATEST_APP_VERSION), show_default=True,
              help="Consensus rules the new chain starts with.")
@click.option("--json", "as_json", is_flag=True)
def init_cmd(validators: int, out: Path, chain_id: str, base_port: int | None, powers: str,
             db_url_template: str, no_voter: bool, compose: bool, compose_dir: Path | None,
             postgres: bool, no_api: bool, app_version: str, as_json: bool) -> None:
    """Generate N validator homes sharing one genesis, fully meshed."""
    from memledger.daemon.cometbft import REPO_ROOT, CometBFTError
    from memledger.testnet.compose import project_name, write_compose
    from memledger.testnet.layout import (
        COMPOSE,
        LOCAL,
        busy_ports,
        check_ports,
        node_specs,
    )
    from memledger.testnet.net import SPARE_BLOCKS, Testnet

    if postgres and not compose:
        raise click.UsageError("--postgres needs --compose (local nets take --db-url-template)")
    if postgres and not db_url_template:
        db_url_template = POSTGRES_TEMPLATE
    if base_port is None:
        try:
            base_port = first_free_base_port(validators + SPARE_BLOCKS)
        except RuntimeError as exc:
            _fail(str(exc))
    else:
        try:
            check_ports(base_port, validators)
        except ValueError as exc:
            _fail(f"--base-port: {exc}")
        busy = busy_ports(node_specs(validators, base_port))
        if busy:
            _fail(f"ports {', '.join(map(str, busy))} of --base-port {base_port} are in use; "
                  "pick another base port, or leave --base-port out to get a free range")
    try:
        net = Testnet.create(out, validators, chain_id=chain_id, base_port=base_port,
                             powers=_parse_powers(powers, validators),
                             db_url_template=db_url_template, voter=not no_voter,
                             flavour=COMPOSE if compose else LOCAL, postgres=postgres,
                             app_state={"app_version": int(app_version)})
    except (ValueError, CometBFTError) as exc:
        _fail(str(exc))
    except OSError as exc:  # errno None: generate's own "already holds a test net"
        _fail(str(exc) if exc.errno is None else cannot_create(out.resolve(), exc))
    written: list[Path] = []
    if compose:
        # Beside the homes unless told otherwise: never over the repository's own
        # deploy/docker-compose.yml just because the command ran from the repo root.
        written = write_compose(net.spec, net.root, (compose_dir or net.root).resolve(),
                                REPO_ROOT, api=not no_api)
    result: dict[str, Any] = {
        "dir": str(net.root), "chain_id": chain_id, "flavour": net.spec.flavour,
        "nodes": [{"name": n.name, "rpc": n.rpc_url, "p2p_port": n.spec.p2p_port,
                   "api": n.api_url, "power": n.spec.power} for n in net.nodes],
        "files": [str(p) for p in written],
    }
    if as_json:
        _print_json(result)
        return
    click.echo(f"generated {validators} validators in {net.root} (chain {chain_id})")
    for n in result["nodes"]:
        click.echo(f"  {n['name']}: rpc {n['rpc']}  p2p :{n['p2p_port']}  power {n['power']}")
    for path in written:
        click.echo(f"wrote {path}")
    hint = (f"docker compose -p {project_name(net.spec)} -f {written[0]} up --build -d"
            if compose else f"memledger testnet up {net.root}")
    click.echo(f"start it with `{hint}`")


@testnet.command("up")
@dir_argument
@click.option("--api/--no-api", default=True, show_default=True,
              help="Run each node's REST API (node i on base+32*i+24).")
@click.option("--no-voter", is_flag=True, help="Do not run the auto-voters.")
@click.option("--timeout", type=float, default=120.0, show_default=True)
@click.option("--foreground", is_flag=True, help="Stay attached; Ctrl-C stops the net.")
def up_cmd(net_dir: Path, api: bool, no_voter: bool, timeout: float, foreground: bool) -> None:
    """Start every stopped node as local processes (logs in each home's logs/).

    If one fails, the nodes this command started are stopped again; nodes that were
    already running are left running."""
    from memledger.testnet.layout import LOCAL, busy_ports
    from memledger.testnet.net import NodeError

    net = _load(net_dir)
    if net.spec.flavour != LOCAL:
        _fail(f"{net.root} was generated for docker-compose; run it with `docker compose up`")
    stopped = [n for n in net.nodes if not n.running]
    # Refuse at once, naming the ports, instead of waiting for them and failing later.
    clashes = {n.name: busy_ports([n.spec]) for n in stopped}
    clashes = {name: ports for name, ports in clashes.items() if ports}
    if clashes:
        named = "; ".join(f"{name}: {', '.join(map(str, ports))}"
                          for name, ports in clashes.items())
        _fail(f"ports of this net are already in use ({named}): another node or net is "
              f"running on them; stop it, or generate the net again without --base-port "
              f"(`memledger testnet init` picks a free range)")
    try:
        net.up(api=api, voter=False if no_voter else None, timeout=timeout,
               progress=_progress)
    except NodeError as exc:  # the nodes it started are stopped again, no others
        _fail(str(exc))
    for n in net.nodes:
        rest = f"  api {n.api_url}" if api else ""
        click.echo(f"{n.name}: height {n.height()}  rpc {n.rpc_url}{rest}  "
                   f"logs {n.node_home.logs}")
    if not foreground:
        click.echo(f"stop it with `memledger testnet down {net.root}`")
        return
    stop: list[int] = []
    signal.signal(signal.SIGINT, lambda s, f: stop.append(s))
    signal.signal(signal.SIGTERM, lambda s, f: stop.append(s))
    while not stop:
        time.sleep(0.5)
    click.echo("stopping the net")
    net.down()


@testnet.command("down")
@dir_argument
@click.option("--timeout", type=float, default=30.0, show_default=True)
def down_cmd(net_dir: Path, timeout: float) -> None:
    """Stop every node of the net (SIGTERM, then SIGKILL leftovers)."""
    net = _load(net_dir)
    net.down(timeout=timeout)
    click.echo(f"stopped {net.size} nodes")


def _node_status(node: TestnetNode) -> dict[str, Any]:
    from memledger.devtools.loadgen import TRANSPORT_ERRORS

    row: dict[str, Any] = {"name": node.name, "running": node.running, "rpc": node.rpc_url,
                           "pids": node.processes(), "power": node.spec.power,
                           "height": None, "app_hash": None, "peers": None,
                           "catching_up": None}
    try:
        with node.rpc(timeout=3) as c:
            sync = c.status()["sync_info"]
            row.update(height=int(sync["latest_block_height"]),
                       app_hash=sync["latest_app_hash"], catching_up=sync["catching_up"],
                       peers=int(c.call("net_info")["n_peers"]))
    except TRANSPORT_ERRORS:
        pass
    return row


@testnet.command("status")
@dir_argument
@click.option("--json", "as_json", is_flag=True)
def status_cmd(net_dir: Path, as_json: bool) -> None:
    """Height, app hash and peer count of every node."""
    net = _load(net_dir)
    rows = [_node_status(n) for n in net.nodes]
    if as_json:
        _print_json({"chain_id": net.chain_id, "nodes": rows})
        return
    for r in rows:
        state = "up" if r["running"] or r["height"] is not None else "down"
        click.echo(f"{r['name']:<8} {state:<5} height {r['height']!s:<8} app_hash "
                   f"{r['app_hash']!s:<66} peers {r['peers']!s}")


@testnet.command("check")
@dir_argument
@click.option("--no-projections", is_flag=True, help="Only compare block headers.")
@click.option("--timeout", type=float, default=30.0, show_default=True,
              help="How long to look for a height all projections share.")
@click.option("--json", "as_json", is_flag=True)
def check_cmd(net_dir: Path, no_projections: bool, timeout: float, as_json: bool) -> None:
    """Compare app hashes at every height and projections: exit 1 on divergence,
    2 if some comparison could not be made (node down, no common height)."""
    net = _load(net_dir)
    _progress(f"comparing block headers{'' if no_projections else ' and projections'} of "
              f"{net.size} nodes (up to {timeout:g} s)")
    report = net.check(projections=not no_projections, timeout=timeout)
    if as_json:
        _print_json(report.to_json())
    elif report.divergence is not None:
        click.echo(str(report.divergence))
    else:
        answered = len([n for n in report.heights if n not in report.unreachable])
        if report.common_height and report.first_common_height <= report.common_height:
            click.echo(f"headers {report.first_common_height}..{report.common_height} agree "
                       f"on {answered} nodes")
        if report.projection_height is not None:
            click.echo(f"projections agree at height {report.projection_height}")
        for note in report.notes:
            click.echo(f"note: {note}")
        if report.unreachable:
            click.echo(f"unreachable: {', '.join(report.unreachable)}")
        click.echo("consistent" if report.conclusive else "inconclusive")
    if not report.ok:
        sys.exit(1)
    if not report.conclusive:
        sys.exit(2)


@testnet.command("add-node")
@dir_argument
@click.option("--state-sync", is_flag=True,
              help="Restore a recent snapshot from the running nodes instead of replaying "
                   "every block (trusts a current header of a running node).")
@click.option("--json", "as_json", is_flag=True)
def add_node_cmd(net_dir: Path, state_sync: bool, as_json: bool) -> None:
    """Generate a non-validator node that joins the net (promote it by governance)."""
    from memledger.testnet.net import NodeError

    net = _load(net_dir)
    try:
        pubkey = net.add_node(state_sync=state_sync)
    except (NodeError, ValueError) as exc:
        _fail(str(exc))
    node = net.nodes[-1]
    data = {"name": node.name, "home": str(node.home), "validator_pubkey": pubkey.hex(),
            "rpc": node.rpc_url}
    if as_json:
        _print_json(data)
    else:
        click.echo(f"added {node.name} at {node.home}; validator pubkey {pubkey.hex()}")


# --- bench --------------------------------------------------------------------------------


@click.group("bench")
def bench() -> None:
    """Benchmarks against a running net."""


class FiniteFloatRange(click.FloatRange):
    """A FloatRange that also refuses nan and inf: both pass its bounds (nan compares
    false with each, inf is above any minimum), and bench load then failed on them
    (int(inf): a traceback; int(nan): 'cannot convert float NaN to integer')."""

    name = "float range"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        result = super().convert(value, param, ctx)
        if not math.isfinite(result):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return result


@bench.command("load")
@click.option("--net", "net_dir", type=click.Path(path_type=Path, file_okay=False),
              help="A test net directory (load goes to all its nodes, or --node).")
@click.option("--rpc", "rpc", default="", help="Comma-separated CometBFT RPC URLs.")
@click.option("--node", "node_indexes", type=int, multiple=True,
              help="With --net: only these node indexes.")
@click.option("--rate", type=FiniteFloatRange(0, min_open=True), default=10.0,
              show_default=True, help="Submissions/s.")
@click.option("--duration", type=FiniteFloatRange(0, min_open=True), default=30.0,
              show_default=True, help="Seconds.")
@click.option("--agents", type=click.IntRange(1, 256), default=4, show_default=True)
@click.option("--settle", type=FiniteFloatRange(0), default=30.0, show_default=True,
              help="Seconds to wait for acknowledged txs to commit after the load stops.")
@click.option("--content-bytes", type=click.IntRange(0), default=64, show_default=True)
def bench_load(net_dir: Path | None, rpc: str, node_indexes: tuple[int, ...], rate: float,
               duration: float, agents: int, settle: float, content_bytes: int) -> None:
    """Submit signed memories at a target rate; print acknowledged/committed/latency JSON."""
    from memledger.devtools.loadgen import TRANSPORT_ERRORS, LoadGenerator
    from memledger.sdk.rpc import RpcClient

    if bool(net_dir) == bool(rpc):
        raise click.UsageError("give exactly one of --net DIR or --rpc URL[,URL]")
    try:
        if net_dir:
            net = _load(net_dir)
            for i in node_indexes:
                if not 0 <= i < len(net.nodes):
                    _fail(f"--node {i}: {net_dir} has nodes 0..{len(net.nodes) - 1}")
            nodes = [net.node(i) for i in node_indexes] if node_indexes else net.nodes
            urls, chain_id = net.rpc_urls(nodes), net.chain_id
        else:
            urls = [u.strip() for u in rpc.split(",") if u.strip()]
            with RpcClient(urls[0], timeout=10) as c:
                chain_id = c.status()["node_info"]["network"]
        gen = LoadGenerator(urls, chain_id, rate=rate, agents=agents,
                            content_bytes=content_bytes)
        _progress(f"submitting {rate:g}/s for {duration:g} s to {len(urls)} node(s), then "
                  f"up to {settle:g} s for acknowledged txs to commit")
        report = gen.run(duration, settle)
        _progress(f"done: {report.to_json().get('committed', '?')} committed")
    except (*TRANSPORT_ERRORS, RuntimeError, IndexError) as exc:
        _fail(f"load generation failed: {exc}")
    _print_json({"rpc": urls, "chain_id": chain_id, **report.to_json()})


# --- registration -------------------------------------------------------------------------


def register(group: click.Group) -> None:
    group.add_command(testnet)
    existing = group.commands.get("bench")
    if isinstance(existing, click.Group) and existing is not bench:
        existing.add_command(bench_load)
    else:
        group.add_command(bench)

