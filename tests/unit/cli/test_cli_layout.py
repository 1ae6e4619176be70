"""The `memledger` command is assembled without an import cycle: cli/root.py owns the group,
the sub-command modules only import it, and cli/main.py imports them to register."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[3]
SUBCOMMAND_MODULES = ("client", "gov", "mcp", "node", "testnet")


def test_subcommand_modules_never_import_cli() -> None:
    code = (f"import sys\nfor m in {SUBCOMMAND_MODULES!r}:\n"
            "    __import__('memledger.cli.' + m)\n"
            "print('memledger.cli.main' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_every_subcommand_is_registered_once_on_the_root_group() -> None:
    from memledger.cli.main import main
    from memledger.cli.root import main as root

    assert main is root
    for name in ("init", "start", "keys", "submit", "gov", "testnet", "bench", "projection",
                 "mcp", "inbox", "turn", "hook"):
        assert name in main.commands, name


def test_python_dash_m_runs_the_assembled_command() -> None:
    out = subprocess.run([sys.executable, "-m", "memledger.cli.main", "gov", "--help"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "validator" in out.stdout
