"""The installed `memledger` command. The CLI runs on the node's packages (click,
FastAPI, SQLAlchemy, ...), which the base install, the SDK alone, does not have: there
the command says which extra to install instead of ending in a traceback. Kept outside
memledger.cli so that importing it needs nothing beyond the standard library."""

from __future__ import annotations

import sys

#: exit status when the command cannot run in this install (click's usage errors are 2)
MISSING_EXTRA = 1


def main() -> None:
    try:
        from memledger.cli.main import main as cli
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if not missing or missing == "memledger":
            raise  # one of our own modules is missing: a broken install, not an extra
        sys.stderr.write(
            f"memledger: the memledger command needs the node's packages ({missing} is "
            f"not installed): pip install 'memledger[node]'. The base install is the "
            f"SDK alone, for use from Python.\n")
        sys.exit(MISSING_EXTRA)
    cli()
