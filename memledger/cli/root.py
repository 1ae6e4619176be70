"""The root of the `memledger` command: the `main` click group and the options shared by
its sub-command modules.

The sub-command modules (`cli_client`, `cli_gov`, `cli_mcp`, `cli_testnet`) import from here
and `memledger.cli.main` imports them to assemble the command, so nothing imports `cli` back.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from memledger.daemon.home import DEFAULT_HOME, ConfigError, NodeHome

if TYPE_CHECKING:
    import httpx

home_option = click.option(
    "--home", type=click.Path(path_type=Path), default=DEFAULT_HOME, show_default=True,
    envvar="MEMLEDGER_HOME", help="Node home directory.",
)


def _wants_json() -> bool:
    """True inside a command run with --json (its errors are then JSON too)."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.params.get("as_json"))


def fail(message: str, exit_code: int = 1, **details: Any) -> NoReturn:
    """Every command's error: one line on stderr and a non-zero exit status; with --json
    a JSON object `{"error": message, ...details}` (e.g. a problem's name, code, status)."""
    if _wants_json():
        doc = {"error": message, **{k: v for k, v in details.items() if v is not None}}
        click.echo(json.dumps(doc, sort_keys=True), err=True)
    else:
        click.echo(f"memledger: error: {message}", err=True)
    sys.exit(exit_code)


def cannot_create(path: Path, exc: OSError) -> str:
    """One line on why directory ``path`` could not be made: the ancestor that is a file
    when there is one (mkdir only says "File exists" of it), else the OS's reason and the
    path it names when that is another."""
    for part in (path, *path.parents):
        try:
            if not part.exists():
                continue
            if part.is_dir():
                break
        except OSError:
            break
        where = "it exists and" if part == path else f"{part}"
        return f"cannot create {path}: {where} is not a directory"
    reason = exc.strerror or str(exc)
    named = os.fspath(exc.filename) if exc.filename is not None else ""
    return f"cannot create {path}: {reason}" + (f" ({named})" if named and
                                                 named != str(path) else "")


@click.group()
def main() -> None:
    """memledger: a consensus-replicated memory ledger for AI agents."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def fail_on_known_errors(command: click.Command) -> None:
    """Make every command under ``command`` answer the errors any command can meet with
    `fail`'s one line, never a traceback: a bad config.json (ConfigError, raised wherever a
    node home is loaded) and a node that cannot be reached or answers an RPC error
    (httpx.HTTPError, RpcError: raised wherever a command talks to CometBFT's RPC).

    Each command's callback is wrapped, not the group's invocation: inside the callback
    the command's context (its --json) is still current, so the error is JSON when asked.
    """
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            fail_on_known_errors(sub)
    if command.callback is not None and not getattr(command.callback, "_fails_on_known",
                                                     False):
        command.callback = _failing_on_known(command.callback)


def _failing_on_known(callback: Callable[..., Any]) -> Callable[..., Any]:
    import httpx

    from memledger.sdk.rpc import RpcError

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except ConfigError as exc:
            fail(str(exc), name="config_error")
        except httpx.HTTPError as exc:
            fail(http_failure(exc), name="connection_error")
        except RpcError as exc:
            fail(one_line(f"cometbft RPC {exc}"), name="rpc_error", code=exc.code)

    run._fails_on_known = True  # type: ignore[attr-defined]
    return run


def http_failure(exc: httpx.HTTPError) -> str:
    """One line for an httpx.HTTPError: which address, and whether it was unreachable,
    silent, or answered with an HTTP error (e.g. a REST port given as the RPC URL)."""
    import httpx

    try:
        url = str(exc.request.url)
    except RuntimeError:  # an error raised before any request was made
        url = "the node"
    if isinstance(exc, httpx.HTTPStatusError):
        return (f"{url} answered HTTP {exc.response.status_code} (is it a CometBFT RPC "
                "address?)")
    detail = one_line(str(exc))
    cause = type(exc).__name__ + (f": {detail}" if detail else "")
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        try:
            where = exc.request.url
            url = f"{where.scheme}://{where.netloc.decode()}"
        except RuntimeError:
            pass
        return no_node_answers(url, cause)
    return f"no answer from {url}: {cause}"


def no_node_answers(url: str, cause: str) -> str:
    """One line for a node that refuses connections, most often one that is not running:
    where it was looked for and how to start it (the command's --home, and its --api or
    --rpc option for a node elsewhere). `Connection refused` alone said neither."""
    ctx = click.get_current_context(silent=True)
    params = ctx.params if ctx is not None else {}
    text = f"no node answers at {url} ({cause})"
    home = params.get("home")
    if not _is_local(url):  # another machine's node: nothing to start here
        option = "--api" if "api" in params else "--rpc" if "rpc" in params else None
        text += ": is the node there running?"
        return text + (f" Else pass {option} with a running node's address" if option
                       else "")
    if home is not None:
        home = Path(home)
        make_run = "(or `make run` in a source checkout)"
        if NodeHome(home).exists():
            text += f": start it with `memledger start --home {home}` {make_run}"
        else:
            text += (f": set one up with `memledger init --home {home}` then "
                     f"`memledger start --home {home}` {make_run}")
        option = "--api" if "api" in params else "--rpc" if "rpc" in params else None
        if option is not None:
            text += f", or pass {option} with a running node's address"
    return text


def _is_local(url: str) -> bool:
    """Whether `url` names this machine (a node a command here could start)."""
    import httpx

    try:
        host = httpx.URL(url).host
    except (httpx.InvalidURL, TypeError):
        return True
    return host in ("localhost", "0.0.0.0", "::1", "::", "") or host.startswith("127.")


def rejection(code: int, log: str) -> tuple[str, str]:
    """A refused tx's code name, and one line on it: the rule it broke, what this tx did
    (the ledger's log, when it says more) and what the caller can do, where the code
    table says (as the REST API's problem detail reads; memledger.api.problems)."""
    from memledger.protocol.codes import NEXT_STEPS, Code

    try:
        known = Code(code)
    except ValueError:
        return f"unknown_{code}", log or f"refused with code {code}"
    text = known.description
    if log and log != text:
        text = log if text in log else f"{text}: {log}"
    if known in NEXT_STEPS:
        text += f". {NEXT_STEPS[known]}"
    return known.slug, text


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of blanks as single spaces."""
    return " ".join(text.split())
