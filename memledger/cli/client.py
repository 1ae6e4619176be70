"""Client commands of `memledger` (keys, status, submit, get, search, vote, ...) and the
hidden `api` command that serves the REST API for `memledger start`.

Added to the `main` group (cli_root.py) by `memledger.cli.main` (`register`). Every command
talks to a node through the REST API with the SDK (`--api URL`, default: the node home's API
address), prints human-readable text or `--json` for scripts, and turns any failure into one
line on stderr with exit status 1.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from memledger.cli import root as cli_root
from memledger.daemon.home import DEFAULT_HOME, ConfigError, NodeHome
from memledger.protocol.txkinds import LEVELS, TX_KINDS, TxKind

if TYPE_CHECKING:
    from memledger.sdk import Client, Memory, TxReceipt
    from memledger.sdk.keys import Agent
    from memledger.sdk.light import TrustRoot

F = TypeVar("F", bound=Callable[..., Any])
logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise here
DEFAULT_API = "http://127.0.0.1:26680"
#: the REST process's GIL switch interval (Python's default is 5 ms)
API_SWITCH_INTERVAL_S = 0.001


# ----------------------------------------------------------------------------- plumbing
fail = cli_root.fail  # one line on stderr (JSON with --json), exit status 1


@contextmanager
def errors_as_messages() -> Iterator[None]:
    """SDK, key-file and input errors become one stderr line and exit status 1."""
    from memledger.sdk import MemLedgerConnectionError, MemLedgerError
    from memledger.sdk.keys import KeyFileError

    try:
        yield
    except MemLedgerConnectionError as exc:
        fail(connection_failure(exc), name="connection_error")
    except MemLedgerError as exc:
        fail(str(exc), name=exc.name or None, code=exc.code, status=exc.status or None)
    except KeyFileError as exc:
        fail(str(exc), name="key_file")
    except ConfigError as exc:
        fail(str(exc), name="config_error")
    except (ValueError, OSError) as exc:
        fail(str(exc))


def connection_failure(exc: Exception) -> str:
    """The line for an SDK connection error: a node that refuses connections (it is not
    running, most often) is told how to start one (cli_root.no_node_answers); a node
    that went silent keeps the SDK's own words."""
    import httpx

    cause = exc.__context__
    if isinstance(cause, (httpx.ConnectError, httpx.ConnectTimeout)):
        return cli_root.http_failure(cause)
    return str(exc)


def emit(data: Any, as_json: bool, human: str) -> None:
    if as_json:
        click.echo(json.dumps(_plain(data), indent=2, sort_keys=True))
    else:
        click.echo(human)


def _plain(data: Any) -> Any:
    if is_dataclass(data) and not isinstance(data, type):
        return asdict(data)
    if isinstance(data, list):
        return [_plain(d) for d in data]
    return data


def api_url(api: str | None, home: Path) -> str:
    """--api, else the node home's configured REST address, else the default port."""
    if api:
        return api
    node_home = NodeHome(home)
    if node_home.exists():
        config = node_home.load()
        host = "127.0.0.1" if config.api_host in ("0.0.0.0", "") else config.api_host
        return f"http://{host}:{config.api_port}"
    return DEFAULT_API


def common(func: F) -> F:
    """--api, --home and --json, shared by every client command."""
    func = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")(func)
    func = click.option("--home", type=click.Path(path_type=Path), default=DEFAULT_HOME,
                        envvar="MEMLEDGER_HOME", show_default=True,
                        help="Node home (for the default --api and --validator).")(func)
    func = click.option("--api", "api", envvar="MEMLEDGER_API", default=None,
                        help="REST API base URL [default: from the node home]")(func)
    return func


def key_option(func: F) -> F:
    return click.option("--key", "key", envvar="MEMLEDGER_KEY", default="default",
                        show_default=True,
                        help="Key file: a name under the keys dir, or a path.")(func)


#: reads: the key that opens private memories (v10+); without one they show as sealed
reader_key_option = click.option(
    "--key", "reader_key", envvar="MEMLEDGER_KEY", default=None,
    help="Key to open private-domain memories with (a member's); without it they are "
         "shown sealed.")


def reader(name: str | None) -> Agent | None:
    return None if name is None else load_key(name)


wait_option = click.option("--wait", type=click.Choice(["none", "sync", "commit"]),
                           default="commit", show_default=True,
                           help="Return after broadcast, CheckTx, or block inclusion.")
submit_wait_option = click.option(
    "--wait", type=click.Choice(["none", "sync", "commit", "decided"]), default="commit",
    show_default=True, help="Return after broadcast, CheckTx, block inclusion (the memory is "
                            "then proposed), or the validators' decision.")


def load_key(name: str) -> Agent:
    from memledger.sdk.keys import KeyFileError, key_names, key_path, load_agent

    if name == "default" and not key_path(name).exists():
        names = key_names()
        which = (f"; keys there: {', '.join(names)}" if names else
                 " (e.g. --key alice, made by `memledger keys new alice`)")
        raise KeyFileError(f"no --key given and no default key at {key_path(name)}: pass "
                           f"--key NAME{which}")
    try:
        return load_agent(name)
    except KeyFileError as exc:
        if _key_from_environment(name):  # else a stale export reads as a typo of theirs
            raise KeyFileError(f"{exc} (the name came from $MEMLEDGER_KEY)") from None
        raise


def _key_from_environment(name: str) -> bool:
    """Whether the running command's --key (or --coauthor's submitter) is `name` from
    $MEMLEDGER_KEY rather than from its command line."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.params.get("key") != name:
        return False
    return ctx.get_parameter_source("key") is click.core.ParameterSource.ENVIRONMENT


def check_tags(tags: tuple[str, ...] | list[str]) -> None:
    """Refuse tags the ledger would refuse, before signing, naming the limits (else a
    stopped node hid the problem behind its own, and a running one spent a round trip)."""
    from memledger.protocol.codes import NEXT_STEPS, Code
    from memledger.protocol.limits import MAX_TAG_BYTES, MAX_TAGS
    from memledger.sdk import MemLedgerError

    def refuse(code: Code, why: str) -> None:
        detail = f"{why}. {NEXT_STEPS[code]}"
        raise MemLedgerError(f"{code.slug} (code {int(code)}): {detail}", code=int(code),
                             name=code.slug, detail=detail)

    if len(tags) > MAX_TAGS:
        refuse(Code.TOO_MANY_TAGS, f"{len(tags)} tags")
    seen: set[str] = set()
    for tag in tags:
        size = len(tag.encode("utf-8", "surrogatepass"))
        if not tag or size > MAX_TAG_BYTES or "\x00" in tag:
            nul = " with a NUL" if "\x00" in tag else ""
            refuse(Code.INVALID_TAG, f"tag {tag[:40]!r} is {size} bytes{nul}")
        if tag in seen:
            refuse(Code.INVALID_TAG, f"tag {tag[:40]!r} is given twice")
        seen.add(tag)


def client(api: str | None, home: Path, key: Any = None) -> Client:
    from memledger.sdk import Client

    return Client(api_url(api, home), key=key)


def describe_receipt(receipt: TxReceipt, what: str, memory: Any = None) -> str:
    """What happened to the tx and, separately, to the memory: a tx is *included* in a
    block; a memory is *committed* only when validators accept it."""
    if receipt.included:
        text = f"{what}: tx included in block {receipt.height} (tx {receipt.hash})"
        status = memory.status if memory is not None else receipt.memory_status
        if status:
            text += f"\n  memory {receipt.memory_id} is {status}"
            reason = getattr(memory, "status_reason", None)
            if reason:
                text += f": {reason}"
            elif status == "proposed":
                text += (" until validators decide; `memledger get "
                         f"{receipt.memory_id}` shows the decision and why")
        return text
    if receipt.status == "unknown":
        return (f"{what}: outcome unknown (tx {receipt.hash}); check later with "
                f"`memledger tx {receipt.hash}`")
    if receipt.status == "accepted":
        return f"{what}: accepted into the mempool, not yet in a block (tx {receipt.hash})"
    return f"{what}: {receipt.status} (tx {receipt.hash})"


def receipt_json(receipt: TxReceipt, memory: Any = None) -> dict[str, Any]:
    """--json of a write: the receipt, plus the memory's status (and why) after it."""
    doc: dict[str, Any] = asdict(receipt)
    if memory is not None:
        doc["memory_status"] = memory.status
        doc["status_reason"] = memory.status_reason
    return doc


def describe_memory(m: Any) -> str:
    lines = [
        f"id:         {m.id}",
        f"status:     {m.status}",
        f"domain:     {m.domain}",
        f"type:       {m.type}",
        f"author:     {m.author}",
        f"confidence: {m.confidence:.6g}",
        f"tags:       {', '.join(m.tags) or '-'}",
        f"submitted:  height {m.submitted_height}",
        f"decided:    {'-' if m.decided_height is None else 'height ' + str(m.decided_height)}",
        f"why:        {getattr(m, 'status_reason', None) or '-'}",
        "history:    " + (" -> ".join(f"{st} (height {h})" for h, st in m.history) or "-"),
        *_correction_lines(m),
        "",
        m.content or "",
    ]
    return "\n".join(lines)


def _correction_lines(m: Any) -> list[str]:
    """The v10 links of a memory, only those it has: what it corrects, what replaced it,
    its chain of corrections, and where an imported memory came from."""
    lines = []
    for label, name in (("supersedes", "supersedes"), ("superseded", "superseded_by"),
                        ("correcting", "pending_correction")):
        value = getattr(m, name, None)
        if value:
            lines.append(f"{label + ':':<11} {value}"
                         + (" (a correction awaiting its validators)"
                            if name == "pending_correction" else ""))
    chain = getattr(m, "corrections", None)
    if chain:
        lines.append("corrections: " + " -> ".join(chain) + " (oldest first)")
    origin = getattr(m, "origin", None)
    if origin:
        lines.append(f"origin:     {origin.get('memory_id')} on chain {origin.get('chain_id')} "
                     f"at height {origin.get('height')}, by {origin.get('author')}")
    if getattr(m, "epoch", None):
        lines.append(f"private:    epoch {m.epoch}, "
                     + ("sealed: only a member's --key opens it" if getattr(m, "sealed", False)
                        else "opened with --key"))
    return lines


#: every memory status, for --status
STATUSES = ["proposed", "committed", "challenged", "deprecated", "superseded"]

#: characters of content a list view shows of each memory
PREVIEW_CHARS = 60


def preview(content: str | None, width: int = PREVIEW_CHARS) -> str:
    """Content on one line of a list view: quoted, and when cut, marked as cut (an
    ellipsis after the quote, then the full length) so no one reads the start as the
    whole memory (`memledger get ID` shows it all)."""
    text = content or ""
    if len(text) <= width:
        return repr(text)
    return f"{text[:width]!r}… ({len(text)} chars)"


def search_line(m: Any) -> str:
    """One memory in `memledger search`'s list."""
    return f"{m.id}  [{m.status}]  {m.domain}  {preview(m.content)}"


def recall_line(m: Any) -> str:
    """One hit in `memledger recall`'s list, its score first."""
    return (f"{m.score if m.score is not None else 0:.4f}  {m.id}  [{m.status}]  "
            f"{preview(m.content)}")


def _with_reason(ml: Client, verified: Memory) -> Memory:
    """A verified memory with the `status_reason` the node gives for it. The reason is
    derived by the node when read (not a record the proof covers), so a verified read
    comes without one; it is the node's reading of the same status, taken only if the
    node still reports that status."""
    from memledger.sdk import MemLedgerError

    if verified.status_reason is not None:
        return verified
    try:
        served = ml.get_memory(verified.id)
    except MemLedgerError:
        return verified
    if served.status != verified.status:
        return verified
    return replace(verified, status_reason=served.status_reason)


def _read_content(content: str) -> str:
    return sys.stdin.read() if content == "-" else content


# ----------------------------------------------------------------------------- keys
@click.group("keys")
def keys_group() -> None:
    """Manage agent key files (~/.memledger/keys, or $MEMLEDGER_KEYS_DIR)."""


@keys_group.command("new")
@click.argument("name", default="default")
@click.option("--force", is_flag=True, help="Overwrite an existing key file.")
@click.option("--json", "as_json", is_flag=True)
def keys_new(name: str, force: bool, as_json: bool) -> None:
    """Generate a new Ed25519 agent key (file mode 0600)."""
    from memledger.sdk.keys import Agent, key_path

    with errors_as_messages():
        path = key_path(name)
        if path.exists() and not force:
            fail(f"key {name} already exists at {path}: use it as --key {name}, or pass "
                 "--force to replace it (its identity is lost for good)", name="key_file")
        agent = Agent.generate(Path(name).stem)
        path = agent.save(path, overwrite=force)
    emit({"name": agent.name, "public_key": agent.public_key_hex, "path": str(path)}, as_json,
         f"created key {agent.name}: {agent.public_key_hex}\n  file: {path}")


@keys_group.command("show")
@click.argument("name", default="default")
@click.option("--json", "as_json", is_flag=True)
def keys_show(name: str, as_json: bool) -> None:
    """Print a key's public key (never its seed)."""
    from memledger.sdk.keys import key_path

    with errors_as_messages():
        agent = load_key(name)
    emit({"name": agent.name, "public_key": agent.public_key_hex, "path": str(key_path(name))},
         as_json, agent.public_key_hex)


@keys_group.command("list")
@click.option("--json", "as_json", is_flag=True)
def keys_list(as_json: bool) -> None:
    """List key files in the keys dir."""
    from memledger.sdk.keys import Agent, KeyFileError, default_key_dir

    found = []
    for path in sorted(default_key_dir().glob("*.json")):
        try:
            found.append({"name": path.stem, "public_key": Agent.load(path).public_key_hex,
                          "path": str(path)})
        except KeyFileError as exc:
            found.append({"name": path.stem, "error": str(exc), "path": str(path)})
    emit(found, as_json, "\n".join(f"{k['name']:<20} {k.get('public_key', k.get('error'))}"
                                   for k in found) or "no keys")


# ----------------------------------------------------------------------------- reads
@click.command("status")
@common
def status_cmd(api: str | None, home: Path, as_json: bool) -> None:
    """Chain id, height, app hash and version of the node."""
    with errors_as_messages(), client(api, home) as ml:
        st = ml.status()
    emit(st, as_json, f"chain {st.chain_id}  height {st.height}  app v{st.app_version}  "
         f"app hash {st.app_hash or '-'}  catching up: {'yes' if st.catching_up else 'no'}")


def verify_options(func: F) -> F:
    """--verify and the trust root it checks against (docs/VERIFIED_READS.md)."""
    func = click.option("--trust-store", type=click.Path(path_type=Path), default=None,
                        help="File of verified headers kept between runs [default: "
                             "HOME/light/trusted-<root>.json when the home exists, one "
                             "per trust root]")(func)
    func = click.option("--rpc", "rpc_url", default=None,
                        help="Fetch headers from this CometBFT RPC instead of the API.")(func)
    func = click.option("--genesis", type=click.Path(path_type=Path, dir_okay=False),
                        default=None, help="Genesis file whose validators are the trust root "
                                           "[default: HOME/cometbft/config/genesis.json]")(func)
    func = click.option("--trust-hash", default=None,
                        help="Pinned header hash (hex) at --trust-height.")(func)
    func = click.option("--trust-height", type=click.IntRange(1, None), default=None,
                        help="Pinned trusted height (with --trust-hash) instead of genesis.")(func)
    func = click.option("--verify", is_flag=True,
                        help="Check every record against the chain through a light client; "
                             "exit 3 with a reason if it does not verify.")(func)
    return func


def verifying_client(api: str | None, home: Path, genesis: Path | None,
                     trust_height: int | None, trust_hash: str | None, rpc_url: str | None,
                     trust_store: Path | None, key: Any = None) -> Client:
    """A client with its trust root: a pinned height+hash, else the genesis validators."""
    from memledger.sdk import Client
    from memledger.sdk.light import GenesisRoot, PinnedRoot

    root: TrustRoot
    if (trust_height is None) != (trust_hash is None):
        raise click.UsageError("--trust-height and --trust-hash go together")
    if trust_height is not None and trust_hash is not None:
        try:
            pinned = bytes.fromhex(trust_hash)
        except ValueError:
            raise click.UsageError("--trust-hash must be hex") from None
        if len(pinned) != 32:
            raise click.UsageError("--trust-hash must be 32 bytes of hex")
        root = PinnedRoot(trust_height, pinned)
    else:
        path = genesis or NodeHome(home).cometbft / "config" / "genesis.json"
        if not path.exists():
            raise click.UsageError(f"no genesis file at {path}: pass --genesis, or "
                                   "--trust-height and --trust-hash")
        root = GenesisRoot.from_file(path)
    if trust_store is None and NodeHome(home).exists():
        trust_store = default_trust_store(Path(home), root)
        trust_store.parent.mkdir(exist_ok=True)  # the store makes no directory itself
    return Client(api_url(api, home), key=key, trust=root, trust_store=trust_store,
                  light_rpc=rpc_url)


def default_trust_store(home: Path, root: TrustRoot) -> Path:
    """HOME/light/trusted-<root>.json: one store per trust root, since headers verified
    from one root are no proof under another (a store refuses them). A genesis root's
    store from before its identity named the genesis time keeps its file: the light
    client takes it over if its root header carries that time (it may hold the only
    trust left once the genesis has expired)."""
    from memledger.sdk.light.client import legacy_root_identity, root_identity

    path = _store_path(home, root_identity(root))
    legacy = legacy_root_identity(root)
    if not path.exists() and legacy is not None and _store_path(home, legacy).exists():
        return _store_path(home, legacy)
    return path


def _store_path(home: Path, identity: str) -> Path:
    import hashlib

    tag = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return home / "light" / f"trusted-{tag}.json"


@contextmanager
def verification_as_exit() -> Iterator[None]:
    """A failed verification is one stderr line and exit status 3 (not a transport error)."""
    from memledger.sdk.light.errors import ProviderError, VerificationError

    try:
        yield
    except VerificationError as exc:
        fail(f"verification failed: {exc}", 3, kind=exc.kind, reason=exc.reason)
    except ProviderError as exc:
        fail(f"verification failed: could not fetch headers: {exc}", 3, kind="header",
             reason="unavailable")


@click.command("get")
@click.argument("memory_id")
@reader_key_option
@verify_options
@common
def get_cmd(memory_id: str, reader_key: str | None, api: str | None, home: Path,
            as_json: bool, verify: bool = False,
            trust_height: int | None = None, trust_hash: str | None = None,
            genesis: Path | None = None, rpc_url: str | None = None,
            trust_store: Path | None = None) -> None:
    """Show one memory (--verify: only if it proves against the chain). A private one is
    opened with --key when that key is a member, else shown sealed."""
    with errors_as_messages(), verification_as_exit(), (
            verifying_client(api, home, genesis, trust_height, trust_hash, rpc_url, trust_store,
                             reader(reader_key))
            if verify else client(api, home, reader(reader_key))) as ml:
        memory = ml.get(memory_id, verify=verify)
        if verify:
            memory = _with_reason(ml, memory)
    human = describe_memory(memory)
    if memory.verified_height is not None:
        human += f"\n\nverified: committed state at height {memory.verified_height}"
        if memory.status_reason:
            human += " (why: is the node's reading of it, not part of the proof)"
    emit(memory, as_json, human)


@click.command("search")
@click.argument("query", required=False)
@click.option("--domain")
@click.option("--status", "status", multiple=True, type=click.Choice(STATUSES),
              help="Repeatable. Default: committed only (challenged too with "
                   "--include-disputed); deprecated and superseded only when named here.")
@click.option("--type", "type_", type=click.Choice(["fact", "observation", "inference", "task"]))
@click.option("--author", help="Author public key (hex).")
@click.option("--tag", "tags", multiple=True, help="Repeatable; all must match.")
@click.option("--include-disputed", is_flag=True, help="Also show challenged memories.")
@click.option("--limit", type=click.IntRange(1, None), default=20, show_default=True)
@verify_options
@common
def search_cmd(query: str | None, domain: str | None, status: tuple[str, ...],
               type_: str | None,
               author: str | None, tags: tuple[str, ...], include_disputed: bool, limit: int,
               api: str | None, home: Path, as_json: bool, verify: bool = False,
               trust_height: int | None = None, trust_hash: str | None = None,
               genesis: Path | None = None, rpc_url: str | None = None,
               trust_store: Path | None = None) -> None:
    """Full-text search (all words must match); without QUERY, list with filters.

    --verify checks each listed memory against the chain, not that the list is complete.
    """
    with errors_as_messages(), verification_as_exit(), (
            verifying_client(api, home, genesis, trust_height, trust_hash, rpc_url, trust_store)
            if verify else client(api, home)) as ml:
        found = list(ml.list_memories(
            q=query, domain=domain, status=status or None, type=type_, author=author, tags=tags,
            include_disputed=include_disputed, page_size=min(limit, 500), max_items=limit,
            mode="words" if query is not None else None))
        if verify:
            found = [ml.verify_memory(m) for m in found]
    emit(found, as_json, "\n".join(search_line(m) for m in found) or "no memories found")


@click.command("recall")
@click.argument("query")
@click.option("--mode", type=click.Choice(["hybrid", "semantic", "text"]),
              help="hybrid (words and meaning fused; the node's default with an embedder), "
                   "semantic (meaning only) or text (all words, BM25).")
@click.option("--domain")
@click.option("--status", "status", multiple=True, type=click.Choice(STATUSES),
              help="Repeatable. Default: committed only (challenged too with "
                   "--include-disputed); deprecated and superseded only when named here.")
@click.option("--type", "type_", type=click.Choice(["fact", "observation", "inference", "task"]))
@click.option("--author", help="Author public key (hex).")
@click.option("--tag", "tags", multiple=True, help="Repeatable; all must match.")
@click.option("--include-disputed", is_flag=True, help="Also recall challenged memories.")
@click.option("--limit", type=click.IntRange(1, 500), default=5, show_default=True)
@click.option("--freshness", type=click.FloatRange(0, 36_500, min_open=True), default=None,
              metavar="DAYS", help="Weigh hits by age (half-life in days) and corroborations "
                                   "before the cut [default: off].")
@click.option("--rerank", is_flag=True,
              help="Rescore the first 30 hits by late interaction over token states "
                   "(hybrid and semantic; the node's embedder must have them): scores are "
                   "then a relevance in -1..1 [default: off].")
@click.option("--min-score", type=click.FloatRange(-1, 1), default=None, metavar="SCORE",
              help="With --rerank: leave out hits scored lower (docs/RECALL.md, Rerank).")
@click.option("--private", "private_domains", multiple=True, metavar="DOMAIN",
              help="Repeatable: a private domain --key reads, ranked on this machine and "
                   "merged with the node's results (v10+).")
@reader_key_option
@verify_options
@common
def recall_cmd(query: str, mode: str | None, domain: str | None, status: tuple[str, ...],
               type_: str | None, author: str | None, tags: tuple[str, ...],
               include_disputed: bool, limit: int, freshness: float | None,
               rerank: bool, min_score: float | None,
               private_domains: tuple[str, ...], reader_key: str | None,
               api: str | None, home: Path,
               as_json: bool, verify: bool = False, trust_height: int | None = None,
               trust_hash: str | None = None, genesis: Path | None = None,
               rpc_url: str | None = None, trust_store: Path | None = None) -> None:
    """The memories that best match QUERY by meaning and words, best first, with scores.

    Filters apply before the top-k cut. --verify checks each hit against the chain (as
    the SDK's recall(verify=True) does), not the ranking nor that none was left out.
    """
    if min_score is not None and not rerank:
        raise click.UsageError("--min-score filters the rerank's score: add --rerank")
    with errors_as_messages(), verification_as_exit(), (
            verifying_client(api, home, genesis, trust_height, trust_hash, rpc_url, trust_store,
                             reader(reader_key))
            if verify else client(api, home, reader(reader_key))) as ml:
        if private_domains or domain:
            _index_private(ml, [*private_domains, *([domain] if domain else [])])
        found = ml.recall(query, mode=mode, limit=limit, domain=domain, status=status or None,
                          type=type_, author=author, tags=tags,
                          include_disputed=include_disputed, verify=verify,
                          freshness=freshness, rerank=rerank, min_score=min_score)
    emit(found, as_json, "\n".join(recall_line(m) for m in found) or "no memories found")


def _index_private(ml: Client, domains: list[str]) -> None:
    """Build the local private index (words, and meaning when the default embedder is
    installed here) for those of `domains` that are private and readable."""
    for name in domains:
        ml.private.current(name)  # learns whether it is private, and its keys
    if not ml.private.seen:
        return
    try:
        from memledger.recall.defaults import DEFAULT_EMBEDDER
        from memledger.recall.embedder import make_embedder

        embedder = make_embedder(DEFAULT_EMBEDDER)
    except Exception:  # noqa: BLE001 - no embedder here: words only
        embedder = None
    if embedder is not None:
        model = embedder
        ml.local.use_embedder(lambda texts: model.embed(texts).tolist())
    ml.local.sync()


@click.command("tx")
@click.argument("tx_hash")
@common
def tx_cmd(tx_hash: str, api: str | None, home: Path, as_json: bool) -> None:
    """Outcome of a transaction by hash."""
    with errors_as_messages(), client(api, home) as ml:
        receipt = ml.tx(tx_hash)
    emit(receipt, as_json, describe_tx(receipt))


def describe_tx(receipt: TxReceipt) -> str:
    """A tx's outcome; a refused one also says why, and what to do where the code table
    says (its code and name alone sent the caller to docs/CODES.md)."""
    text = (f"tx {receipt.hash}: {receipt.status} at height {receipt.height} "
            f"(code {receipt.code} {receipt.name})")
    if receipt.status == "rejected" and receipt.code:
        text += ": " + cli_root.rejection(receipt.code, receipt.log)[1]
    return text


# ----------------------------------------------------------------------------- writes
@click.command("submit")
@click.argument("content")
@click.option("--id", "memory_id", help="Memory id [default: derived from key+domain+content]")
@click.option("--domain", default="general", show_default=True)
@click.option("--type", "type_", default="fact", show_default=True,
              type=click.Choice(["fact", "observation", "inference", "task"]))
@click.option("--confidence", type=click.FloatRange(0, 1), default=0.9, show_default=True)
@click.option("--tag", "tags", multiple=True, help="Repeatable.")
@click.option("--supersedes", default="", metavar="ID",
              help="The id of a committed memory this one corrects (app version 10+): once "
                   "this one is committed, that one is superseded.")
@click.option("--print-tx", is_flag=True,
              help="Only print the signed tx as base64 (for POST /v1/txs); send nothing.")
@key_option
@submit_wait_option
@common
def submit_cmd(content: str, memory_id: str | None, domain: str, type_: str, confidence: float,
               tags: tuple[str, ...], supersedes: str, print_tx: bool, key: str, wait: str,
               api: str | None, home: Path, as_json: bool) -> None:
    """Propose a memory (CONTENT, or - for stdin), signed with --key.

    It is `proposed` once its tx is in a block; validators then commit or deprecate it
    (`memledger get ID` shows which, and why).
    """
    from memledger.sdk import check_content

    with errors_as_messages():
        agent = load_key(key)
        text = _read_content(content)
        check_content(text)  # before anything is signed or sent
        check_tags(tags)
        with client(api, home, agent) as ml:
            if print_tx:
                _print_signed_submit(ml, agent, memory_id, text, domain, type_, confidence,
                                     tags, as_json, supersedes)
                return
            receipt = ml.submit(memory_id, text, domain=domain, type=type_,
                                confidence=confidence, tags=tags, wait=wait,
                                supersedes=supersedes)
            memory = ml.get_memory(receipt.memory_id) \
                if wait == "decided" and receipt.included and receipt.memory_id else None
    emit(receipt_json(receipt, memory), as_json,
         describe_receipt(receipt, f"memory {receipt.memory_id}", memory))


def _print_signed_submit(ml: Client, agent: Agent, memory_id: str | None, text: str,
                         domain: str, type_: str, confidence: float, tags: tuple[str, ...],
                         as_json: bool, supersedes: str = "") -> None:
    """The memory_submit tx the SDK would send, signed, as base64: the body of
    `POST /v1/txs` is `{"tx": "<this>"}`."""
    import base64
    import time

    from memledger.sdk import derive_memory_id
    from memledger.sdk.txbuilder import TxBuilder, confidence_to_ppm

    mid = memory_id or derive_memory_id(agent.public_key_hex, domain, text)
    tx = TxBuilder(agent.signing_key, ml.chain_id).submit(
        time.time_ns(), mid, text, domain=domain, memory_type=type_,
        confidence_ppm=confidence_to_ppm(confidence), tags=tags, supersedes=supersedes)
    b64 = base64.b64encode(tx).decode()
    emit({"tx": b64, "memory_id": mid}, as_json, b64)


@click.command("vote")
@click.argument("memory_id")
@click.argument("decision", type=click.Choice(["accept", "reject", "abstain"]))
@click.option("--validator", is_flag=True, help="Sign with the node home's validator key.")
@click.option("--reason", default="",
              help="Why (at most 4 KiB): kept on chain with the vote (app version 5+).")
@key_option
@wait_option
@common
def vote_cmd(memory_id: str, decision: str, validator: bool, reason: str, key: str, wait: str,
             api: str | None, home: Path, as_json: bool) -> None:
    """Vote on a proposed memory (validators and pinned scope members only)."""
    from memledger.sdk import MemLedgerError

    with errors_as_messages():
        if validator:
            from memledger.daemon import cometbft

            try:
                signer: Any = cometbft.validator_signing_key(NodeHome(home).cometbft)
            except (OSError, cometbft.CometBFTError) as exc:
                raise ValueError(f"cannot load the validator key of {home}: {exc}") from None
        else:
            signer = load_key(key)
        with client(api, home, signer) as ml:
            try:
                receipt = ml.vote(memory_id, decision, reason=reason, wait=wait)
            except MemLedgerError as err:
                if err.name != "already_voted":
                    raise
                _already_voted(ml, memory_id, decision, validator, as_json)
                return
            memory = ml.get_memory(memory_id) if receipt.included else None
    emit(receipt_json(receipt, memory), as_json,
         describe_receipt(receipt, f"{decision} vote on {memory_id}", memory))


def _already_voted(ml: Client, memory_id: str, decision: str, validator: bool,
                   as_json: bool) -> None:
    """A vote is final. The same vote again is reported as done (exit 0), naming when it
    was cast; a different one is an error that says what was voted, and by whom."""
    me = ml.public_key
    mine = next((v for v in ml.votes(memory_id) if v.voter == me), None)
    memory = ml.get_memory(memory_id)
    who = ("this node's validator key (its auto-voter votes with it as soon as a memory is "
           "proposed; `memledger init --no-voter` leaves voting to you)") if validator \
        else "this key"
    if mine is None:
        fail(f"already_voted: {who} already voted on {memory_id}", name="already_voted")
    assert mine is not None
    if mine.decision != decision:
        fail(f"already_voted: {who} voted {mine.decision} on {memory_id} at height "
             f"{mine.height}; votes are final", name="already_voted")
    doc = {"status": "already_voted", "memory_id": memory_id, "decision": mine.decision,
           "height": mine.height, "memory_status": memory.status,
           "status_reason": memory.status_reason}
    reason = f": {memory.status_reason}" if memory.status_reason else ""
    emit(doc, as_json, f"{decision} vote on {memory_id}: already cast at height {mine.height} "
         f"by {who}\n  memory {memory_id} is {memory.status}{reason}")


def _memory_action(kind: TxKind) -> click.Command:
    """The command of a memory action (a txkinds row with `cli`): MEMORY_ID, one option per
    other field of the kind, a key; sent with the SDK's `send`, answered with a receipt."""
    assert kind.cli is not None
    name = kind.cli.name

    @key_option
    @wait_option
    @common
    def command(memory_id: str, key: str, wait: str, api: str | None, home: Path,
                as_json: bool, **fields: Any) -> None:
        with errors_as_messages():
            agent = load_key(key)
            with client(api, home, agent) as ml:
                receipt = ml.send(kind.name, wait=wait, memory_id=memory_id, **fields)
                memory = ml.get_memory(memory_id) if receipt.included else None
        emit(receipt_json(receipt, memory), as_json,
             describe_receipt(receipt, f"{name} {memory_id}", memory))

    cmd = click.argument("memory_id")(command)
    for tx_field in reversed(kind.fields):
        if tx_field.name != "memory_id":
            cmd = click.option(f"--{tx_field.name.replace('_', '-')}", tx_field.name,
                               type=tx_field.type, required=tx_field.required,
                               default=None if tx_field.required else tx_field.default,
                               help=tx_field.help or None)(cmd)
    return click.command(name, help=kind.cli.help)(cmd)


#: challenge, corroborate, reinstate, ...: one command per memory action in the tx table
MEMORY_ACTIONS = tuple(_memory_action(kind) for kind in TX_KINDS if kind.cli is not None)


@click.command("grant")
@click.argument("domain")
@click.argument("grantee")
@click.option("--level", type=click.Choice(list(LEVELS)), default="write", show_default=True,
              help="read, write (may submit and, from v10, open peer disputes) or modify "
                   "(may also challenge and correct others' memories).")
@click.option("--expires-height", type=click.IntRange(0, None), default=0, show_default=True,
              help="The height the grant ends at (0: never).")
@key_option
@wait_option
@common
def grant_cmd(domain: str, grantee: str, level: str, expires_height: int, key: str, wait: str,
              api: str | None, home: Path, as_json: bool) -> None:
    """Grant GRANTEE (a public key, hex) access to DOMAIN, which --key owns."""
    with errors_as_messages():
        agent = load_key(key)
        with client(api, home, agent) as ml:
            receipt = ml.grant(domain, grantee, level, expires_height=expires_height,
                               wait=wait)
    emit(receipt_json(receipt), as_json,
         describe_receipt(receipt, f"grant {level} on {domain} to {grantee[:16]}..."))


@click.command("revoke")
@click.argument("domain")
@click.argument("grantee")
@key_option
@wait_option
@common
def revoke_cmd(domain: str, grantee: str, key: str, wait: str, api: str | None, home: Path,
               as_json: bool) -> None:
    """Revoke GRANTEE's (a public key, hex) grant on DOMAIN, which --key owns."""
    with errors_as_messages():
        agent = load_key(key)
        with client(api, home, agent) as ml:
            receipt = ml.revoke(domain, grantee, wait=wait)
    emit(receipt_json(receipt), as_json,
         describe_receipt(receipt, f"revoke on {domain} of {grantee[:16]}..."))


@click.group("domain")
def domain_group() -> None:
    """Domains (app version 10+: private ones)."""


@domain_group.command("create")
@click.argument("domain")
@click.option("--private", "private", is_flag=True,
              help="Create it private: only members (the owner and its grantees) can read "
                   "its memories, on every node.")
@key_option
@wait_option
@common
def domain_create_cmd(domain: str, private: bool, key: str, wait: str, api: str | None,
                      home: Path, as_json: bool) -> None:
    """Create DOMAIN owned by --key (a plain domain is created by its first write; with
    --private it is private from the start, or made private if --key owns it already:
    memories written from then on are sealed)."""
    if not private:
        fail(f"a plain domain is created by its first write (`memledger submit --domain "
             f"{domain} ...`); pass --private to create a private one")
    with errors_as_messages():
        agent = load_key(key)
        with client(api, home, agent) as ml:
            receipt = ml.make_private(domain, wait=wait)
    emit(receipt_json(receipt), as_json,
         describe_receipt(receipt, f"private domain {domain} (epoch 1)"))


@click.command("co-commit")
@click.argument("content")
@click.option("--coauthor", "coauthors", multiple=True, required=True,
              help="Key of a coauthor (repeatable, at least two distinct keys in all); the "
                   "first one submits unless --key names another signer.")
@click.option("--domain", default="general", show_default=True)
@click.option("--type", "type_", default="fact", show_default=True,
              type=click.Choice(["fact", "observation", "inference", "task"]))
@click.option("--confidence", type=click.FloatRange(0, 1), default=0.9, show_default=True)
@click.option("--tag", "tags", multiple=True)
@click.option("--agreement-nonce", type=click.IntRange(1, None), default=1, show_default=True,
              help="Distinguishes repeated agreements on the same content.")
@click.option("--valid-for", type=click.FloatRange(1, None), default=None,
              help="Seconds the agreement stays valid [default: no expiry].")
@click.option("--key", "key", envvar="MEMLEDGER_KEY", default=None,
              help="Key that submits (and signs too) [default: the first --coauthor].")
@wait_option
@common
def cocommit_cmd(content: str, coauthors: tuple[str, ...], domain: str, type_: str,
                 confidence: float, tags: tuple[str, ...], agreement_nonce: int,
                 valid_for: float | None, key: str | None, wait: str, api: str | None,
                 home: Path, as_json: bool) -> None:
    """Jointly sign CONTENT with every coauthor key and submit it as one co-commit."""
    import time

    from memledger.sdk import check_content, cocommit_core, sign_cocommit
    from memledger.sdk.txbuilder import confidence_to_ppm

    with errors_as_messages():
        text = _read_content(content)
        check_content(text)  # before anything is signed or sent
        check_tags(tags)
        submitter = load_key(key or coauthors[0])
        signers = {submitter.public_key: submitter}
        for name in coauthors:
            agent = load_key(name)
            signers[agent.public_key] = agent
        if len(signers) < 2:
            raise ValueError("a co-commit needs at least two distinct coauthor keys")
        with client(api, home, submitter) as ml:
            not_after = (1 << 63) - 1 if valid_for is None else \
                time.time_ns() + int(valid_for * 1e9)
            core = cocommit_core(ml.chain_id, text, sorted(signers),
                                 domain=domain, memory_type=type_,
                                 confidence_ppm=confidence_to_ppm(confidence), tags=tags,
                                 agreement_nonce=agreement_nonce, not_after_unix_ns=not_after)
            signatures = [sign_cocommit(a.signing_key, core) for a in signers.values()]
            receipt = ml.cocommit(core, signatures, wait=wait)
            memory = ml.get_memory(receipt.memory_id) \
                if receipt.included and receipt.memory_id else None
    emit(receipt_json(receipt, memory), as_json,
         describe_receipt(receipt, f"co-commit by {len(signers)} coauthors", memory))


# ----------------------------------------------------------------------------- server
@click.command("api", hidden=True)
@click.option("--home", type=click.Path(path_type=Path), default=DEFAULT_HOME,
              envvar="MEMLEDGER_HOME", show_default=True)
@click.option("--host", default=None, help="Bind address [default: config api_host].")
@click.option("--port", type=int, default=None, help="Port [default: config api_port].")
@click.option("--voter/--no-voter", "voter", default=None,
              help="Whether /ready requires the auto-voter [default: config voter].")
def api_cmd(home: Path, host: str | None, port: int | None, voter: bool | None) -> None:
    """Serve the REST API (started by `memledger start`)."""
    import dataclasses

    import uvicorn

    from memledger.api import create_app
    from memledger.api.settings import ApiSettings

    node_home = NodeHome(home)
    if not node_home.exists():
        fail(f"no memledger node at {node_home.root} (run `memledger init` first)")
    config = node_home.load()
    settings = ApiSettings.from_home(node_home)
    if voter is not None:
        settings = dataclasses.replace(settings, voter_required=voter)
    # Reads run in worker threads; a CPU-bound one holds the GIL for up to the switch
    # interval each time the event loop (writes, /health, shedding) asks for it.
    sys.setswitchinterval(API_SWITCH_INTERVAL_S)
    uvicorn.run(create_app(settings), host=host or config.api_host,
                port=port or config.api_port, log_level="info", access_log=False,
                server_header=False)


def register(group: click.Group) -> None:
    for command in (keys_group, status_cmd, get_cmd, search_cmd, recall_cmd, tx_cmd,
                    submit_cmd, vote_cmd, *MEMORY_ACTIONS, grant_cmd, revoke_cmd,
                    domain_group, cocommit_cmd, api_cmd):
        group.add_command(command)

