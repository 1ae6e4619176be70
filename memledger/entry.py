"""The installed `memledger` command. The agent's commands need click (the `mcp` extra),
the node's the node's packages (the `node` extra); the base install, the SDK alone, has
neither, and there the command says which extra to install instead of ending in a
traceback. Kept outside memledger.cli so that importing it needs only the standard
library. (Within the CLI, node commands in an agent's install say the same.)

`memledger hook session-start` runs before every agent session, so it skips the CLI (click,
the SDK's HTTP stack: most of a second) and runs memledger.mcp.hook directly; what that
light path leaves to the CLI (--help, a refused argument) still goes there."""

from __future__ import annotations

import sys

#: exit status when the command cannot run in this install (click's usage errors are 2)
MISSING_EXTRA = 1


#: the sub-command that runs without loading the CLI
FAST_PATH = ("hook", "session-start")


def main() -> None:
    if tuple(sys.argv[1:3]) == FAST_PATH:
        from memledger.mcp.hook import from_command

        status = from_command(sys.argv[3:])
        if status is not None:
            sys.exit(status)
    try:
        from memledger.cli.main import main as cli
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if not missing or missing == "memledger":
            raise  # one of our own modules is missing: a broken install, not an extra
        sys.stderr.write(
            f"memledger: the memledger command is not in this install ({missing} is not "
            f"installed): pip install 'memledger[mcp]' for an agent's commands and the MCP "
            f"server, or pip install 'memledger[node]' for a validator. The base install "
            f"is the SDK alone, for use from Python.\n")
        sys.exit(MISSING_EXTRA)
    cli()
