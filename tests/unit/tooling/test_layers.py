"""`make lint`'s layer checks pass on the tree and fail on a deliberately broken copy.

Each case copies the `memledger` package and `.importlinter` to a temporary directory,
adds one forbidden import there, and runs the same commands `make lint` runs against
the copy (on PYTHONPATH, ahead of the installed tree). The real tree is left alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PRIVATE_CHECK = REPO / "scripts" / "check_private_imports.py"


def run_lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} missing: install requirements-dev.lock (import-linter)",
                    pytrace=False)
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / ".importlinter")],
        cwd=root, env=env, capture_output=True, text=True, timeout=120)


def run_private_check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PRIVATE_CHECK), str(root)],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package and its import contracts."""
    shutil.copytree(REPO / "memledger", tmp_path / "memledger",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def append(root: Path, module: str, line: str) -> None:
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    assert path.is_file(), path
    with path.open("a", encoding="utf-8") as f:
        f.write(f"\n{line}\n")


def test_import_contracts_hold_on_the_tree() -> None:
    result = run_lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_copy_is_what_is_checked(tree: Path) -> None:
    """An unchanged copy passes: a failure below comes from the added import alone."""
    result = run_lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("module", "line", "contract"), [
    # the consensus core reaching the serving side (the projection flush goes through
    # consensus.store.sinks instead)
    ("memledger.consensus.store.codec", "import memledger.projection.writer",
     "consensus imports no serving, client or tool code"),
    # a family reaching back up into block execution
    ("memledger.consensus.families.memory.record",
     "import memledger.consensus.block.execute",
     "consensus layers: app over block over families over gate and store"),
    # the light client importing server code
    ("memledger.sdk.light.provider", "import memledger.consensus.store.state",
     "sdk (light client included) imports no server code"),
    ("memledger.protocol.records", "import memledger.sdk.keys",
     "protocol imports no other memledger package"),
    ("memledger.projection.mapping", "import memledger.api.queries",
     "projection and recall import no api, daemon, cli, testnet or sdk"),
    ("memledger.daemon.home", "import memledger.devtools.chain",
     "the node's runtime imports no test net or dev tool"),
])
def test_a_back_import_breaks_its_contract(tree: Path, module: str, line: str,
                                           contract: str) -> None:
    append(tree, module, line)
    result = run_lint_imports(tree)
    assert result.returncode != 0, result.stdout
    assert f"{contract} BROKEN" in result.stdout, result.stdout
    assert module in result.stdout  # the report names the offending importer


def test_private_names_are_not_shared_on_the_tree() -> None:
    result = run_private_check(REPO)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("line", "shown"), [
    ("from memledger.consensus.store.lmdb_base import _DB_DATA",
     "from memledger.consensus.store.lmdb_base import _DB_DATA"),
    ("from . import lmdb_base as base\nX = base._DB_DATA",
     "base._DB_DATA (private to memledger.consensus.store.lmdb_base)"),
    ("import memledger.consensus.store.lmdb_base\n"
     "X = memledger.consensus.store.lmdb_base._DB_DATA",
     "memledger.consensus.store.lmdb_base._DB_DATA"),
])
def test_a_private_import_fails_the_check(tree: Path, line: str, shown: str) -> None:
    append(tree, "memledger.consensus.store.codec", line)
    result = run_private_check(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "memledger/consensus/store/codec.py:" in result.stdout
    assert shown in result.stdout


def test_what_the_private_check_leaves_alone(tree: Path) -> None:
    """A module's own private names, dunders, and private members of classes (not
    modules) are not module-private imports."""
    append(tree, "memledger.consensus.store.lmdb_base",
           "from memledger.consensus.store.lmdb_base import _DB_DATA as _again")
    append(tree, "memledger.consensus.store.codec",
           "from memledger.consensus.store import lmdb_base\n"
           "X = lmdb_base.__name__\n"
           "from memledger.consensus.store.state import CanonicalStore\n"
           "Y = CanonicalStore.__init__\n"
           "Z = CanonicalStore._private_member_of_a_class")
    result = run_private_check(tree)
    assert result.returncode == 0, result.stdout + result.stderr
