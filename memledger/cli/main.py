"""The `memledger` command, assembled from the sub-command modules this install can run.

The agent's commands (keys, submit, get, search, recall, vote, ..., mcp, inbox, turn,
hook) need only the SDK and click (`memledger[mcp]`); the node's (init, start, projection,
gov, testnet, bench) need `memledger[node]`. Where those packages are missing, each node
command is still listed and answers with the one line that says what to install, rather
than the whole command failing to load.
"""

from __future__ import annotations

import click

from memledger.cli import bundle as cli_bundle
from memledger.cli import client as cli_client
from memledger.cli import mcp as cli_mcp
from memledger.cli.root import fail, fail_on_known_errors, main

#: what the node's sub-command modules add to the root group (for the placeholders)
NODE_COMMANDS = ("init", "start", "projection", "gov", "testnet", "bench")


def _needs_node_extra(name: str, missing: str) -> click.Command:
    """A stand-in for node command `name` in an install without the node's packages."""

    @click.command(name, context_settings={"ignore_unknown_options": True,
                                           "allow_extra_args": True},
                   help=f"(needs memledger[node]: {missing} is not installed)")
    def placeholder() -> None:
        fail(f"`memledger {name}` runs a node and needs its packages ({missing} is not "
             "installed): pip install 'memledger[node]'")

    return placeholder


def _register_node_commands(group: click.Group) -> None:
    try:
        from memledger.cli import gov as cli_gov
        from memledger.cli import node as cli_node  # noqa: F401  (its commands self-register)
        from memledger.cli import testnet as cli_testnet
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if not missing or missing == "memledger":
            raise  # one of our own modules is missing: a broken install, not an extra
        for name in NODE_COMMANDS:
            group.commands.pop(name, None)
            group.add_command(_needs_node_extra(name, missing))
        return
    cli_gov.register(group)
    cli_testnet.register(group)


# The sub-command modules know nothing of this one: they define their commands and
# `register` adds them to `main`.
cli_client.register(main)
cli_bundle.register(main)
cli_mcp.register(main)
_register_node_commands(main)
fail_on_known_errors(main)

if __name__ == "__main__":
    main()
