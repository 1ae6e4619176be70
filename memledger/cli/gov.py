"""`memledger gov ...`: make, vote on and follow governance proposals.

Proposals are signed with the node's validator key (HOME/cometbft/config/
priv_validator_key.json) and broadcast over cometbft RPC; reads go through ABCI queries,
so the commands work against any node of the net. A node that cannot be reached or answers
an RPC error ends a command with one error line (cli_root.fail_on_known_errors), as does a
number outside what its protobuf field holds (click.IntRange, before anything is signed).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

import click

from memledger.cli.root import fail, home_option, rejection
from memledger.consensus.families.governance.proposals import last_vote_height
from memledger.consensus.params import PARAMS
from memledger.daemon import cometbft
from memledger.daemon.home import NodeHome
from memledger.protocol.pb import tx_pb2
from memledger.protocol.records import VALIDATORS, VALSET_PENDING
from memledger.sdk.light.header import FLAG_COMMIT
from memledger.sdk.rpc import RpcClient, laddr_to_url
from memledger.sdk.txbuilder import (
    TxBuilder,
    param_proposal,
    scope_proposal,
    upgrade_cancel_proposal,
    upgrade_proposal,
    validator_proposal,
)

TERMINAL = ("executed", "rejected", "expired", "cancelled", "failed")

#: power, weight, value, app_version and activation_height are uint64 protobuf fields: a
#: number outside this range cannot even be encoded (protobuf raised ValueError)
UINT64_MAX = (1 << 64) - 1
UINT64 = click.IntRange(0, UINT64_MAX)

#: blocks added to the default activation height beyond the voting period (or the minimum
#: delay, if longer): a proposal lands a block or more after the height read, and one that
#: passes in its last voting block must still be before its activation height
UPGRADE_MARGIN_BLOCKS = 10


class GovContext:
    """Resolved node home, RPC client and signer for one command."""

    def __init__(self, home: Path, rpc_url: str | None) -> None:
        self.home = NodeHome(home)
        self.config = self.home.load()
        self.rpc = RpcClient(rpc_url or laddr_to_url(self.config.rpc_laddr), timeout=60)

    def builder(self) -> TxBuilder:
        """A signer with the validator key; an unreadable key file is one error line."""
        try:
            key = cometbft.validator_signing_key(self.home.cometbft)
        except (OSError, ValueError, KeyError, TypeError, cometbft.CometBFTError) as exc:
            _fail(f"cannot load the validator key of {self.home.root}: {exc}")
        return TxBuilder(key, self.config.chain_id)

    def default_activation_height(self) -> int:
        """Latest height + the longer of the voting period and the minimum upgrade delay +
        a margin: votes count until voting_end, and an upgrade that passes at or after
        its activation height fails, so the whole voting period must come before it."""
        params = self.record(b"sys/params") or {}
        wait = max(int(params.get(name, PARAMS[name].default))
                   for name in ("gov_min_upgrade_delay", "gov_voting_period"))
        return self.rpc.latest_height() + wait + UPGRADE_MARGIN_BLOCKS

    def app_version(self) -> int:
        """The chain's app version now: from v8 it closes an upgrade's votes early."""
        return int(self.rpc.abci_info()["response"].get("app_version") or 0)

    def record(self, key: bytes) -> Any:
        result = self.rpc.abci_query("/key", key)
        return None if result.code else json.loads(result.value)

    def proposals(self) -> list[dict[str, Any]]:
        state = self.record(b"sys/gov") or {"next_id": 1}
        found = [self.record(f"gov/p{i}".encode()) for i in range(1, int(state["next_id"]))]
        return [p for p in found if p is not None]

    def validator_powers(self) -> dict[str, int]:
        """The validator set (hex key: power) once the changes already passed take effect."""
        powers = {key: int(power) for key, power in
                  (self.record(VALIDATORS) or {"validators": []})["validators"]}
        pending = (self.record(VALSET_PENDING) or {"pending": []})["pending"]
        for _effective, key, power in sorted(pending, key=lambda change: int(change[0])):
            powers[key] = int(power)
        return {key: power for key, power in powers.items() if power > 0}

    def signing_keys(self, keys: Iterable[str], blocks: int = 3) -> set[str]:
        """Those of `keys` (hex) whose signatures the commits of the latest `blocks`
        blocks hold (a commit needs only 2/3: a slow validator's vote may miss one).
        CometBFT names them by address."""
        top = self.rpc.latest_height()
        signed: set[str] = set()
        for height in range(max(1, top - blocks + 1), top + 1):
            commit = self.rpc.call("commit", {"height": str(height)})["signed_header"]["commit"]
            signed |= {str(sig["validator_address"]).upper() for sig in commit["signatures"]
                       if int(sig.get("block_id_flag", 0)) == FLAG_COMMIT}
        return {key for key in keys if cometbft.validator_address(bytes.fromhex(key)) in signed}

    def broadcast(self, tx: bytes) -> dict[str, Any]:
        result = self.rpc.broadcast_tx_commit(tx)
        return {"code": result.code, "log": result.log, "hash": result.hash,
                "height": result.height, "events": (result.tx_result or {}).get("events", [])}


def _fail(message: str) -> NoReturn:
    fail(message)


def _rejected(what: str, result: dict[str, Any]) -> NoReturn:
    """A refused gov tx: its code's name and number (a bare number was all it said), the
    ledger's log, and what to do about it where the code table says (e.g. who may
    propose, and how a key becomes a validator)."""
    code = int(result["code"])
    name, text = rejection(code, str(result["log"]))
    fail(f"{what} rejected: {name} (code {code}): {text}", name=name, code=code)


def _ctx(home: Path, rpc: str | None) -> GovContext:
    try:
        return GovContext(home, rpc)
    except FileNotFoundError as exc:
        _fail(str(exc))
        raise


rpc_option = click.option("--rpc", default=None, help="CometBFT RPC URL (default: the node's).")
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
yes_option = click.option("--yes", is_flag=True, help="Do not ask for confirmation.")


def _submit(ctx: GovContext, proposal: tx_pb2.GovPropose, summary: str, yes: bool,
            as_json: bool, refusal: Callable[[], str | None] | None = None) -> None:
    """Sign and send `proposal` once confirmed; `refusal` (asked after the key loads,
    before the confirmation) says why not to, if anything does."""
    builder = ctx.builder()
    if refusal is not None and (why := refusal()):
        _fail(why)
    if not yes and not click.confirm(f"Propose {summary}?", default=False):
        _fail("aborted")
    result = ctx.broadcast(builder.propose(time.time_ns(), proposal))
    if result["code"]:
        _rejected("proposal", result)
    pid = next((a["value"] for e in result["events"] if e["type"] == "proposal"
                for a in e["attributes"] if a["key"] == "id"), None)
    result["proposal_id"] = pid
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(f"proposal {pid} submitted at height {result['height']}")


@click.group()
def gov() -> None:
    """Governance: validator set, scopes, parameters and software upgrades."""


@gov.group()
def propose() -> None:
    """Open a proposal (signed with this node's validator key)."""


@propose.command("validator")
@home_option
@rpc_option
@click.option("--pubkey", required=True, help="Validator Ed25519 public key (hex or base64).")
@click.option("--power", type=UINT64, required=True, help="New voting power; 0 removes.")
@click.option("--title", default="")
@click.option("--force", is_flag=True,
              help="Make a change that leaves validators not signing now with 1/3 of the "
                   "power or more (their nodes must run and be caught up, or the chain "
                   "stops).")
@yes_option
@json_option
def propose_validator(home: Path, rpc: str | None, pubkey: str, power: int, title: str,
                      force: bool, yes: bool, as_json: bool) -> None:
    """Add, re-weight or remove (--power 0) a validator."""
    key = _parse_key(pubkey)
    ctx = _ctx(home, rpc)

    def stops_chain() -> str | None:
        if force:
            return None
        powers = ctx.validator_powers()
        return validator_change_stops_chain(powers, ctx.signing_keys(powers), key.hex(),
                                            power)

    _submit(ctx, validator_proposal(key, power, title),
            f"validator {key.hex()[:16]}… power {power}", yes, as_json, stops_chain)


def validator_change_stops_chain(powers: dict[str, int], signing: set[str], key_hex: str,
                                 power: int) -> str | None:
    """Why giving `key_hex` `power` in the set `powers` would stop the chain, else None.

    Blocks need more than 2/3 of the power to sign. `signing` holds the keys that signed
    the latest blocks; any other key (one not yet in the set above all: it signs nothing
    until its node runs) is counted as not signing. If those would hold 1/3 of the power
    or more, the chain stops at the change's height, and a proposal to undo it could
    never be committed. The ledger cannot know whose node runs and does not refuse such
    a change, so the CLI does, unless told the nodes are up."""
    key = key_hex.lower()
    after = {k: p for k, p in powers.items() if k != key}
    others, others_signing = sum(after.values()), sum(
        p for k, p in after.items() if k in signing)
    signs = key in signing
    total = others + power
    signed = others_signing + (power if signs else 0)
    if 3 * signed > 2 * total:
        return None
    advice = ""
    if not signs and power > 0:
        most = (3 * others_signing - 2 * others - 1) // 2
        if most > 0:
            advice = f"propose power {most} or less and raise it once its node signs, or "
    return (f"with this change validators not signing the latest blocks would hold "
            f"{total - signed} of {total} power, 1/3 or more: the chain stops until they "
            f"sign, and the change could not be undone; {advice}pass --force if their "
            f"nodes run and have caught up")


@propose.command("scope")
@home_option
@rpc_option
@click.argument("action", type=click.Choice(["create", "revise", "pause", "resume", "retire"]))
@click.argument("scope_id")
@click.option("--domain", "domains", multiple=True, help="Domain bound to the scope.")
@click.option("--member", "members", multiple=True, help="KEY:WEIGHT (hex key).")
@click.option("--title", default="")
@yes_option
@json_option
def propose_scope(home: Path, rpc: str | None, action: str, scope_id: str,
                  domains: tuple[str, ...], members: tuple[str, ...], title: str, yes: bool,
                  as_json: bool) -> None:
    """Create, revise, pause, resume or retire a scope."""
    parsed = [_parse_member(member) for member in members]
    _submit(_ctx(home, rpc), scope_proposal(action, scope_id, domains, parsed, title),
            f"scope {action} {scope_id!r}", yes, as_json)


@propose.command("param", help="Change a governed parameter: " + ", ".join(
    f"{name} ({spec.bounds[0]}..{spec.bounds[1]}{', from rule ' + spec.rule if spec.rule else ''})"
    for name, spec in PARAMS.items() if spec.bounds is not None) + ".")
@home_option
@rpc_option
@click.argument("key")
@click.argument("value", type=UINT64)
@click.option("--title", default="")
@yes_option
@json_option
def propose_param(home: Path, rpc: str | None, key: str, value: int, title: str, yes: bool,
                  as_json: bool) -> None:
    _submit(_ctx(home, rpc), param_proposal(key, value, title), f"{key} = {value}", yes,
            as_json)


@propose.command("upgrade")
@home_option
@rpc_option
@click.argument("name")
@click.option("--app-version", type=UINT64, required=True)
@click.option("--height", "activation_height", type=UINT64, default=0,
              help="Activation height (default: current height + the longer of "
                   f"gov_voting_period and gov_min_upgrade_delay + {UPGRADE_MARGIN_BLOCKS}, "
                   "so that a vote cast until the voting period ends still counts).")
@click.option("--binary-sha256", default="", help="Checksum operators should verify.")
@click.option("--title", default="")
@yes_option
@json_option
def propose_upgrade(home: Path, rpc: str | None, name: str, app_version: int,
                    activation_height: int, binary_sha256: str, title: str, yes: bool,
                    as_json: bool) -> None:
    """Schedule a software upgrade to APP_VERSION at a height."""
    ctx = _ctx(home, rpc)
    if not activation_height:
        activation_height = ctx.default_activation_height()
    _submit(ctx, upgrade_proposal(name, app_version, activation_height, binary_sha256, title),
            f"upgrade {name!r} to app version {app_version} at height {activation_height}",
            yes, as_json)


@propose.command("upgrade-cancel")
@home_option
@rpc_option
@click.argument("name")
@click.option("--title", default="")
@yes_option
@json_option
def propose_upgrade_cancel(home: Path, rpc: str | None, name: str, title: str, yes: bool,
                           as_json: bool) -> None:
    """Call off the scheduled upgrade NAME before its activation height (app version 9+).

    A passed upgrade otherwise runs at its height, and no other upgrade can be scheduled
    while it waits. To withdraw an upgrade proposal that is still open, its proposer uses
    `gov cancel` instead."""
    _submit(_ctx(home, rpc), upgrade_cancel_proposal(name, title),
            f"cancelling the scheduled upgrade {name!r}", yes, as_json)


@gov.command("vote")
@home_option
@rpc_option
@click.argument("proposal_id")
@click.argument("decision", type=click.Choice(["yes", "no", "abstain"]))
@yes_option
@json_option
def vote(home: Path, rpc: str | None, proposal_id: str, decision: str, yes: bool,
         as_json: bool) -> None:
    """Vote on a proposal with this node's validator key."""
    ctx = _ctx(home, rpc)
    if not yes and not click.confirm(f"Vote {decision} on {proposal_id}?", default=False):
        _fail("aborted")
    mapped = {"yes": "accept", "no": "reject", "abstain": "abstain"}[decision]
    result = ctx.broadcast(ctx.builder().gov_vote(time.time_ns(), proposal_id, mapped))
    if result["code"]:
        _rejected("vote", result)
    click.echo(json.dumps(result, indent=2) if as_json else
               f"voted {decision} on {proposal_id} at height {result['height']}")


@gov.command("cancel")
@home_option
@rpc_option
@click.argument("proposal_id")
@yes_option
@json_option
def cancel(home: Path, rpc: str | None, proposal_id: str, yes: bool, as_json: bool) -> None:
    """Withdraw an open proposal you made."""
    ctx = _ctx(home, rpc)
    if not yes and not click.confirm(f"Cancel {proposal_id}?", default=False):
        _fail("aborted")
    result = ctx.broadcast(ctx.builder().gov_cancel(time.time_ns(), proposal_id))
    if result["code"]:
        _rejected("cancel", result)
    click.echo(json.dumps(result, indent=2) if as_json else f"cancelled {proposal_id}")


def _line(p: dict[str, Any], app_version: int) -> str:
    """One proposal; `ends@` is the last height whose votes count (from v8 an upgrade's
    ends before its activation height, however long its voting period)."""
    votes = len(p["votes"])
    ends = last_vote_height(p, app_version)  # type: ignore[arg-type]
    return (f"{p['id']:<6} {p['status']:<10} {p['kind']:<14} votes={votes:<3} "
            f"ends@{ends:<8} {json.dumps(p['payload'], sort_keys=True)}")


@gov.command("list")
@home_option
@rpc_option
@json_option
@click.option("--open", "only_open", is_flag=True, help="Only open proposals.")
def list_(home: Path, rpc: str | None, as_json: bool, only_open: bool) -> None:
    """List proposals."""
    ctx = _ctx(home, rpc)
    items = ctx.proposals()
    if only_open:
        items = [p for p in items if p["status"] == "open"]
    if as_json:
        click.echo(json.dumps(items, indent=2))
    elif not items:
        click.echo("no proposals")
    else:
        version = ctx.app_version()
        for p in items:
            click.echo(_line(p, version))


@gov.command("show")
@home_option
@rpc_option
@click.argument("proposal_id")
@json_option
def show(home: Path, rpc: str | None, proposal_id: str, as_json: bool) -> None:
    """Show one proposal with its votes."""
    ctx = _ctx(home, rpc)
    found = ctx.record(f"gov/{proposal_id}".encode())
    if found is None:
        _fail(f"no proposal {proposal_id!r}")
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    click.echo(_line(found, ctx.app_version()))
    for voter, (decision, height) in sorted(found["votes"].items()):
        click.echo(f"  {voter[:16]}…  {decision:<8} @{height}")


@gov.command("watch")
@home_option
@rpc_option
@click.argument("proposal_id")
@click.option("--timeout", type=float, default=600.0, show_default=True)
@json_option
def watch(home: Path, rpc: str | None, proposal_id: str, timeout: float, as_json: bool) -> None:
    """Follow a proposal until it closes (and, for upgrades, until activation).

    Exit status 0 when it executed (an upgrade: once activated), 2 when it closed
    otherwise (rejected, expired, cancelled, failed, or an upgrade called off), 1 on an
    error or at --timeout."""
    ctx = _ctx(home, rpc)
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        found = ctx.record(f"gov/{proposal_id}".encode())
        if found is None:
            _fail(f"no proposal {proposal_id!r}")
        state = found["status"]
        if found["kind"] == "upgrade" and state == "executed":
            state = _scheduled_upgrade_state(ctx, found)
        if state != last and not as_json:
            click.echo(f"{proposal_id}: {state} (height {ctx.rpc.latest_height()})")
            last = state
        done = state in (*TERMINAL, "called off") and not (
            found["kind"] == "upgrade" and state == "executed")
        if done or state == "activated":
            if as_json:
                click.echo(json.dumps({**found, "watch_state": state}, indent=2))
            sys.exit(0 if state in ("executed", "activated") else 2)
        time.sleep(0.5)
    _fail(f"timed out waiting for {proposal_id}")


def _scheduled_upgrade_state(ctx: GovContext, found: dict[str, Any]) -> str:
    """A passed upgrade: still `executed` (waiting for its height), `called off` by an
    executed upgrade_cancel that names it (v9: the cancel records the proposal that
    scheduled its plan), else `activated`: nothing else removes a plan. The app version
    alone cannot tell: a later upgrade to the same version may have activated since."""
    plan = ctx.record(b"sys/upgrade")
    if plan is not None and plan.get("proposal") == found["id"]:
        return "executed"
    cancelled = any(p["kind"] == "upgrade_cancel" and p["status"] == "executed"
                    and p["payload"].get("upgrade_proposal") == found["id"]
                    for p in ctx.proposals())
    return "called off" if cancelled else "activated"


def _parse_member(text: str) -> tuple[bytes, int]:
    """--member KEY:WEIGHT; the weight is held to its uint64 field's range here (click
    cannot: it is half of one string)."""
    key, _, weight = text.partition(":")
    if not (weight.isascii() and weight.isdigit()):
        _fail(f"--member must be KEY:WEIGHT, got {text[:80]!r}")
    if len(weight) > len(str(UINT64_MAX)) or int(weight) > UINT64_MAX:
        _fail(f"--member weight {weight[:40]} is out of range: at most {UINT64_MAX}")
    return _parse_key(key), int(weight)


def _parse_key(text: str) -> bytes:
    import base64
    import binascii

    try:
        key = bytes.fromhex(text) if len(text) == 64 else base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        _fail(f"not a hex or base64 public key: {text[:20]!r}")
        raise
    if len(key) != 32:
        _fail("public key must be 32 bytes")
    return key


def register(group: click.Group) -> None:
    group.add_command(gov)
