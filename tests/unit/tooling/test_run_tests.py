"""scripts/run_tests.py, the runner behind `make test`: one pytest process per test file,
so a file that passes only after another fails there."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).parents[3]
RUNNER = REPO / "scripts" / "run_tests.py"


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_tests", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))


def test_a_file_that_passes_only_after_another_fails_alone(tmp_path: Path) -> None:
    _write(tmp_path, {
        "conftest.py": "STATE: dict[str, int] = {}\n",
        "test_a_first.py": """
            from conftest import STATE

            def test_sets_state():
                STATE["seeded"] = 1
            """,
        "test_b_second.py": """
            from conftest import STATE

            def test_needs_state():
                assert STATE.get("seeded") == 1, "only after test_a_first.py"

            def test_fine():
                pass
            """,
    })
    together = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert together.returncode == 0, together.stdout  # one process: the order hides it
    logs = tmp_path / "logs"
    alone = subprocess.run([sys.executable, str(RUNNER), str(tmp_path), "--log-dir", str(logs)],
                           capture_output=True, text=True, cwd=REPO)
    assert alone.returncode == 1, alone.stdout
    lines = alone.stdout.splitlines()
    assert any(" ok " in line and "test_a_first.py" in line and "(1 passed)" in line
               for line in lines), alone.stdout
    assert any("FAIL" in line and "test_b_second.py" in line and "1 failed, 1 passed" in line
               for line in lines), alone.stdout
    assert "only after test_a_first.py" in alone.stdout  # the failing file's own output
    assert "1 of 2 test files FAILED" in alone.stdout
    assert f"-m pytest {tmp_path / 'test_b_second.py'}" in alone.stdout  # how to rerun it
    [log] = logs.iterdir()  # the failing file's whole output, kept
    assert "only after test_a_first.py" in log.read_text()


def test_all_pass_exit_zero_and_pytest_args_pass_through(tmp_path: Path) -> None:
    _write(tmp_path, {
        "test_one.py": "def test_x():\n    pass\n\ndef test_y():\n    pass\n",
        "test_two.py": "def test_z():\n    pass\n",
    })
    out = subprocess.run([sys.executable, str(RUNNER), str(tmp_path), "-j", "2", "--log-dir",
                          str(tmp_path / "logs"), "--", "-k", "x or z",
                          # -k also matches directory names above rootdir, which pytest
                          # picks from the cwd and the files: pin it, wherever the clone is
                          "--rootdir", str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stdout
    assert "2 passed" in out.stdout and "1 deselected" in out.stdout
    assert "all 2 test files passed, each in its own process" in out.stdout


def test_discovery_runs_fast_tiers_first_and_parses_counts(tmp_path: Path) -> None:
    runner = _runner()
    for tier in ("e2e", "integration", "unit", "fuzz"):
        (tmp_path / "tests" / tier).mkdir(parents=True)
        (tmp_path / "tests" / tier / f"test_{tier}.py").write_text("")
        (tmp_path / "tests" / tier / "helper.py").write_text("")
    found = [p.parent.name for p in runner.discover([str(tmp_path / "tests")])]
    assert found == ["unit", "fuzz", "integration", "e2e"]
    counts = runner.parse_counts("...\nFAILED x\n1 failed, 12 passed, 2 skipped, 1 error in 3.5s\n")
    assert counts == {"failed": 1, "passed": 12, "skipped": 2, "errors": 1}
    assert runner.parse_counts("no summary") == {}
