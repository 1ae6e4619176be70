"""The root of the `memledger` command: the `main` click group and the options shared by
its sub-command modules.

The sub-command modules (`cli_client`, `cli_gov`, `cli_testnet`) import `main` from here and
`memledger.node.cli` imports them to assemble the command, so nothing imports `cli` back.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from memledger.node.home import DEFAULT_HOME

home_option = click.option(
    "--home", type=click.Path(path_type=Path), default=DEFAULT_HOME, show_default=True,
    envvar="MEMLEDGER_HOME", help="Node home directory.",
)


@click.group()
def main() -> None:
    """memledger: a consensus-replicated memory ledger for AI agents."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
