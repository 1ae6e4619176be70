"""The root of the `memledger` command: the `main` click group and the options shared by
its sub-command modules.

The sub-command modules (`cli_client`, `cli_gov`, `cli_testnet`) import `main` from here and
`memledger.node.cli` imports them to assemble the command, so nothing imports `cli` back.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from memledger.node.home import DEFAULT_HOME, ConfigError

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


@click.group()
def main() -> None:
    """memledger: a consensus-replicated memory ledger for AI agents."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def fail_on_config_errors(command: click.Command) -> None:
    """Make every command under ``command`` answer a bad config.json (ConfigError, raised
    wherever a node home is loaded) with `fail`'s one line, never a traceback.

    Each command's callback is wrapped, not the group's invocation: inside the callback
    the command's context (its --json) is still current, so the error is JSON when asked.
    """
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            fail_on_config_errors(sub)
    if command.callback is not None and not getattr(command.callback, "_fails_on_config",
                                                     False):
        command.callback = _failing_on_config(command.callback)


def _failing_on_config(callback: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except ConfigError as exc:
            fail(str(exc), name="config_error")

    run._fails_on_config = True  # type: ignore[attr-defined]
    return run
