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

from memledger.daemon.home import DEFAULT_HOME, ConfigError

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
    verb = ("cannot reach" if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
            else "no answer from")
    detail = one_line(str(exc))
    return f"{verb} {url}: {type(exc).__name__}" + (f": {detail}" if detail else "")


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of blanks as single spaces."""
    return " ".join(text.split())
