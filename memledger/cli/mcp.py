"""Agent-facing commands: `memledger mcp` (the MCP server, and `mcp config` printing host
snippets), `memledger inbox`, and `memledger hook session-start|session-end` for hosts'
session hooks.

Added to the `main` group by `memledger.cli.main` (`register`). Like the client commands
they reach a node through its REST API and sign locally with one agent key.
"""

from __future__ import annotations

import asyncio
import gc
import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memledger.cli import client as cli_client
from memledger.cli.root import fail
from memledger.daemon.home import DEFAULT_HOME, NodeHome
from memledger.mcp.hook import DEFAULT_HOOK_BUDGET, project_domain

if TYPE_CHECKING:
    from memledger.mcp.cursors import CursorStore
    from memledger.mcp.ledger import Ledger
    from memledger.mcp.tools import Tools

DEFAULT_BUDGET = 8192
DEFAULT_PORT = 26690
CLIENTS = ("claude-code", "claude-desktop", "cursor", "codex", "http")


def _node_options(func: Any) -> Any:
    """--node/--api, --home, --key, --domain: which node, which key, which domain."""
    func = click.option("--domain", envvar="MEMLEDGER_DOMAIN", default=None,
                        help="Default domain for stores and recall [default: the git "
                             "repository's name, else 'general']")(func)
    func = cli_client.key_option(func)
    func = click.option("--home", type=click.Path(path_type=Path), default=DEFAULT_HOME,
                        envvar="MEMLEDGER_HOME", show_default=True,
                        help="Node home (default --node; inbox cursors under HOME/mcp).")(func)
    func = click.option("--node", "--api", "api", envvar="MEMLEDGER_API", default=None,
                        help="REST API base URL [default: from the node home]")(func)
    return func


def _ledger(api: str | None, home: Path, key: str, genesis: Path | None = None) -> Ledger:
    from memledger.mcp.ledger import Ledger

    with cli_client.errors_as_messages():
        agent = cli_client.load_key(key)
    trust, store = _trust(home, genesis)
    return Ledger(cli_client.api_url(api, home), agent, trust=trust, trust_store=store)


def _cursors(home: Path, consumer: str) -> CursorStore:
    from memledger.mcp.cursors import CursorStore

    return CursorStore(Path(home) / "mcp", consumer)


def _tools(api: str | None, home: Path, key: str, domain: str | None, budget: int,
           watch: tuple[str, ...], genesis: Path | None) -> Tools:
    from memledger.mcp.render import Budget
    from memledger.mcp.tools import Tools

    return Tools(_ledger(api, home, key, genesis), Budget(budget), _cursors(home, "mcp"),
                 default_domain=project_domain(domain), watch=watch)


def _trust(home: Path, genesis: Path | None) -> tuple[Any, Path | None]:
    """The genesis validators as the trust root for verify=true, when a genesis is at hand
    (else verified reads answer `not_verified` with the reason)."""
    from memledger.sdk.light import GenesisRoot

    path = genesis or NodeHome(home).cometbft / "config" / "genesis.json"
    if not path.exists():
        return None, None
    root = GenesisRoot.from_file(path)
    store = None
    if NodeHome(home).exists():
        store = cli_client.default_trust_store(Path(home), root)
        store.parent.mkdir(exist_ok=True)
    return root, store


# ----------------------------------------------------------------------------- mcp
@click.group("mcp", invoke_without_command=True)
@_node_options
@click.option("--http", "use_http", is_flag=True,
              help="Serve streamable HTTP (at /mcp) instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="With --http: address to listen on; not loopback needs --token-file.")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT,
              show_default=True, help="With --http: port to listen on.")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="With --http: file holding the bearer token every request must carry.")
@click.option("--budget", type=click.IntRange(256, 1 << 20), default=DEFAULT_BUDGET,
              show_default=True, help="Most bytes of text one tool call answers.")
@click.option("--watch", multiple=True, metavar="DOMAIN",
              help="Report new committed memories of this domain in the inbox (repeatable).")
@click.option("--genesis", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Trust root for verify=true [default: HOME/cometbft/config/genesis.json]")
@click.option("--instructions-file", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="Operator text appended to the instructions and the guide, "
                                 "after the node config's extra.mcp_instructions "
                                 "[default: HOME/mcp/instructions.md if present]")
@click.option("--operator", is_flag=True,
              help="Also serve the governance tools (list proposals, vote with the node "
                   "home's validator key): for a validator's operator.")
@click.pass_context
def mcp_group(ctx: click.Context, api: str | None, home: Path, key: str, domain: str | None,
              use_http: bool, host: str, port: int, token_file: Path | None, budget: int,
              watch: tuple[str, ...], genesis: Path | None,
              instructions_file: Path | None, operator: bool) -> None:
    """Serve the ledger to an agent host over the Model Context Protocol (stdio by
    default). Sub-command `config` prints the host configuration instead."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        from memledger.mcp.server import build_server, is_loopback, serve_http, serve_stdio
    except ImportError as exc:
        fail(f"memledger mcp needs the MCP SDK ({exc}): install memledger with its mcp "
             "extra, pip install 'memledger[mcp]'")
    token = _token(token_file) if token_file is not None else None
    if use_http and token is None and not is_loopback(host):
        fail(f"refusing to serve MCP on {host}, which is not a loopback address, without "
             "a bearer token: pass --token-file FILE")
    tools = _tools(api, home, key, domain, budget, watch, genesis)
    server = build_server(tools, _operator_text(home, instructions_file),
                          _operator_tools(tools, home) if operator else None)
    # what is made by now (the SDKs, pydantic's schemas, the tools) lives as long as the
    # server: frozen, the collector no longer walks it during tool calls, where it cost
    # a remember ~3 ms of CPU (BENCHMARKS.md, section 12)
    gc.collect()
    gc.freeze()
    click.echo(f"memledger mcp: key {tools.ledger.author[:16]}..., node "
               f"{tools.ledger.api_url}, domain {tools.default_domain}"
               + (f", http://{host}:{port}/mcp" if use_http else ", stdio"), err=True)
    try:
        if use_http:
            asyncio.run(serve_http(server, tools, host, port, token))
        else:
            asyncio.run(serve_stdio(server, tools))
    except KeyboardInterrupt:
        pass


def _operator_tools(tools: Tools, home: Path) -> Any:
    from memledger.daemon import cometbft
    from memledger.mcp.operator import OperatorTools

    try:
        key = cometbft.validator_signing_key(NodeHome(home).cometbft)
    except (OSError, ValueError, KeyError, TypeError, cometbft.CometBFTError) as exc:
        fail(f"--operator: cannot load the validator key of {home}: {exc}")
    return OperatorTools(tools, key)


def _token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as exc:
        fail(f"cannot read --token-file {path}: {exc.strerror or exc}")
    if len(token) < 16:
        fail(f"--token-file {path} holds no token of at least 16 characters")
    return token


def _operator_text(home: Path, path: Path | None) -> str:
    """The operator's addition to the instructions: the node config's
    `extra.mcp_instructions`, then the file (--instructions-file, else
    HOME/mcp/instructions.md when present)."""
    parts = []
    node_home = NodeHome(home)
    if node_home.exists():
        with cli_client.errors_as_messages():
            parts.append(node_home.load().extra.get("mcp_instructions", ""))
    path = path or Path(home) / "mcp" / "instructions.md"
    try:
        parts.append(path.read_text())
    except FileNotFoundError:
        pass
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    return "\n".join(p.strip() for p in parts if p.strip())


@mcp_group.command("config")
@click.option("--client", "host_client", type=click.Choice(CLIENTS), required=True,
              help="The agent host to configure.")
@click.option("--key", "key", envvar="MEMLEDGER_KEY", default="default", show_default=True,
              help="Agent key the server signs with.")
@click.option("--command", "command", default=None,
              help="The memledger executable [default: the one on PATH].")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT,
              show_default=True, help="For --client http: the server's port.")
def mcp_config(host_client: str, key: str, command: str | None, port: int) -> None:
    """Print the configuration that adds memledger to an agent host (and, where the host
    has them, the session hooks)."""
    from memledger.mcp.hosts import snippet

    exe = command or shutil.which("memledger") or "memledger"
    click.echo(snippet(host_client, exe, key, port, sys.executable))


# ----------------------------------------------------------------------------- inbox
@click.command("inbox")
@_node_options
@click.option("--since", type=click.IntRange(0, None), default=None,
              help="Events after this height; the kept position does not move.")
@click.option("--watch", multiple=True, metavar="DOMAIN",
              help="Also report new committed memories of this domain (repeatable).")
@click.option("--budget", type=click.IntRange(256, 1 << 20), default=1 << 16,
              show_default=True, help="Most bytes of text printed.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the events as JSON (the kept position does not move).")
def inbox_cmd(api: str | None, home: Path, key: str, domain: str | None,
              since: int | None, watch: tuple[str, ...], budget: int, as_json: bool) -> None:
    """What happened that concerns this key since it last looked: its memories decided
    (and why), challenged, corroborated or reinstated, and new memories in --watch
    domains. Each event is shown once (the position is kept in HOME/mcp)."""
    from memledger.mcp.ledger import ToolFailure, failures_as_tool_errors

    ledger = _ledger(api, home, key)

    async def read() -> str:
        try:
            with failures_as_tool_errors(ledger.api_url):
                if as_json:
                    from memledger.sdk.inbox import read_inbox

                    got = await read_inbox(ledger.client, ledger.author, since or 0, watch)
                    return json.dumps({"since": got.since, "through": got.through,
                                       "events": [e.to_json() for e in got.events]},
                                      indent=2, sort_keys=True)
                from memledger.mcp.inboxing import show_inbox
                from memledger.mcp.render import Budget

                return await show_inbox(ledger, _cursors(home, "cli"), Budget(budget), since,
                                        watch)
        finally:
            await ledger.aclose()
    from memledger.mcp.cursors import CursorError

    try:
        click.echo(asyncio.run(read()))
    except ToolFailure as failure:
        fail(f"{failure.name}: {failure.reason}", name=failure.name)
    except CursorError as exc:
        fail(str(exc), name="inbox_cursor")


@click.command("turn")
@_node_options
@click.argument("topic")
@click.option("--observation", default=None,
              help="Something worth keeping from this turn, stored as a memory; - reads "
                   "it from stdin.")
@click.option("--observation-id", default=None, help="Id for the stored observation.")
@click.option("--type", "memory_type", default="observation", show_default=True,
              type=click.Choice(["fact", "observation", "inference", "task"]))
@click.option("--tag", "tags", multiple=True, help="Tag of the observation (repeatable).")
@click.option("--limit", type=click.IntRange(1, 20), default=5, show_default=True)
@click.option("--inbox/--no-inbox", default=True, show_default=True,
              help="Also show this key's inbox (its position kept as `memledger inbox`'s).")
@click.option("--budget", type=click.IntRange(256, 1 << 20), default=8192,
              show_default=True, help="Most bytes printed.")
def turn_cmd(api: str | None, home: Path, key: str, domain: str | None, topic: str,
             observation: str | None, observation_id: str | None, memory_type: str,
             tags: tuple[str, ...], limit: int, inbox: bool, budget: int) -> None:
    """One call per agent turn, as the MCP `turn` tool: recall on TOPIC, store the
    observation if given, read the inbox. The phases are independent, not atomic; each
    reports its outcome. Exit status 0 when all succeeded, 3 when some failed, 1 when
    all did."""
    if observation == "-":
        observation = sys.stdin.read()
    try:
        from memledger.mcp.render import Budget
        from memledger.mcp.tools import Tools
    except ImportError as exc:
        fail(f"memledger turn needs the MCP SDK ({exc}): install memledger with its mcp "
             "extra, pip install 'memledger[mcp]'")
    tools = Tools(_ledger(api, home, key), Budget(budget), _cursors(home, "cli"),
                  default_domain=project_domain(domain))

    async def run() -> Any:
        try:
            return await tools.turn(topic, observation=observation or None, domain=domain,
                                    tags=list(tags) or None, type=memory_type,  # type: ignore[arg-type]
                                    observation_id=observation_id, limit=limit, inbox=inbox)
        finally:
            await tools.ledger.aclose()
    result = asyncio.run(run())
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        fail("; ".join(text.splitlines()))
    click.echo(text)
    if not text.startswith("turn: all phases ok"):
        sys.exit(3)


# ----------------------------------------------------------------------------- hooks
@click.group("hook")
def hook_group() -> None:
    """Commands for agent hosts' session hooks (opt-in; see `memledger mcp config`)."""


@hook_group.command("session-start")
@_node_options
@click.option("--query", default=None,
              help="What to recall [default: the domain's name].")
@click.option("--limit", type=click.IntRange(1, 50), default=8, show_default=True)
@click.option("--budget", type=click.IntRange(256, 1 << 20), default=DEFAULT_HOOK_BUDGET,
              show_default=True, help="Most bytes printed.")
def hook_session_start(api: str | None, home: Path, key: str, domain: str | None,
                       query: str | None, limit: int, budget: int) -> None:
    """Print the most relevant committed memories of the current project, for a host's
    SessionStart hook (its output joins the model's context). A node that is down prints
    a warning on stderr and nothing else: a session never fails for its memory.
    `python -m memledger.mcp.hook session-start` does the same without loading the
    whole CLI (what `memledger mcp config` gives hosts)."""
    from memledger.mcp.hook import session_start

    text, warning = session_start(cli_client.api_url(api, home), project_domain(domain),
                                  query, limit, budget)
    if warning:
        click.echo(f"memledger: session-start: {warning}", err=True)
    if text:
        click.echo(text)


@hook_group.command("session-end")
@_node_options
@click.option("--observation", required=True,
              help="The summary to store; - reads it from stdin.")
@click.option("--type", "memory_type", default="observation", show_default=True,
              type=click.Choice(["fact", "observation", "inference", "task"]))
@click.option("--tag", "tags", multiple=True, help="Tag (repeatable).")
@click.option("--wait", type=click.Choice(["included", "decided"]), default="included",
              show_default=True, help="Return at block inclusion, or once validators "
                                      "decided.")
def hook_session_end(api: str | None, home: Path, key: str, domain: str | None,
                     observation: str, memory_type: str, tags: tuple[str, ...],
                     wait: str) -> None:
    """Store the session summary the host passes in (nothing when it is empty)."""
    text = (sys.stdin.read() if observation == "-" else observation).strip()
    if not text:
        click.echo("memledger: session-end: empty observation, nothing stored", err=True)
        return
    project = project_domain(domain)
    with cli_client.errors_as_messages():
        agent = cli_client.load_key(key)
        with cli_client.client(api, home, key=agent) as ml:
            receipt = ml.submit(None, text, domain=project, type=memory_type,
                                confidence=0.7, tags=tags,
                                wait="decided" if wait == "decided" else "commit")
    click.echo(cli_client.describe_receipt(receipt, "stored"))


def register(group: click.Group) -> None:
    for command in (mcp_group, inbox_cmd, turn_cmd, hook_group):
        group.add_command(command)

