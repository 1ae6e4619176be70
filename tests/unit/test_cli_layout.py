"""The `memledger` command is assembled without an import cycle: cli_root owns the group,
the sub-command modules only import cli_root, and cli.py imports them to register."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[2]
SUBCOMMAND_MODULES = ("cli_client", "cli_gov", "cli_testnet")


def test_subcommand_modules_never_import_cli() -> None:
    code = (f"import sys\nfor m in {SUBCOMMAND_MODULES!r}:\n"
            "    __import__('memledger.node.' + m)\n"
            "print('memledger.node.cli' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_every_subcommand_is_registered_once_on_the_root_group() -> None:
    from memledger.node.cli import main
    from memledger.node.cli_root import main as root

    assert main is root
    for name in ("init", "start", "keys", "submit", "gov", "testnet", "bench", "projection"):
        assert name in main.commands, name


def test_python_dash_m_runs_the_assembled_command() -> None:
    out = subprocess.run([sys.executable, "-m", "memledger.node.cli", "gov", "--help"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "validator" in out.stdout
