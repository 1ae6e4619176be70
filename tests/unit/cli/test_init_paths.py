"""`init` / `testnet init` on a path that cannot be a home, cometbft's own failures, and
the home's mode when `keys new` makes it: one error line, never a traceback or a Go stack;
a home is 0700 whichever command creates it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memledger.cli.main import main
from memledger.daemon import cometbft

PANIC = """panic: could not create directory "/x/afile/cometbft": mkdir /x/afile: not a directory

goroutine 1 [running]:
github.com/cometbft/cometbft/config.EnsureRoot({0x7ffd59edba42, 0x1c})
\t/root/go/pkg/mod/github.com/cometbft/cometbft@v0.38.25/config/toml.go:33 +0x1b9
main.main()
"""


def _error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture()
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "afile"
    path.write_text("not a directory\n")
    return path


def test_init_under_a_file_is_one_line(a_file: Path) -> None:
    line = _error_line(CliRunner().invoke(main, ["init", "--home", str(a_file / "home")]))
    assert line == (f"memledger: error: cannot create {a_file / 'home'}: {a_file} is not a "
                    "directory")


def test_init_on_a_file_is_one_line_before_cometbft_runs(a_file: Path) -> None:
    line = _error_line(CliRunner().invoke(main, ["init", "--home", str(a_file)]))
    assert line == f"memledger: error: cannot create {a_file}: it exists and is not a directory"
    assert a_file.read_text() == "not a directory\n"


def test_init_where_no_directory_can_be_made_names_the_reason() -> None:
    line = _error_line(CliRunner().invoke(main, ["init", "--home", "/proc/memledger-home"]))
    assert line == ("memledger: error: cannot create /proc/memledger-home: No such file or "
                    "directory")


def test_testnet_init_under_a_file_is_one_line(a_file: Path) -> None:
    result = CliRunner().invoke(main, ["testnet", "init", "-n", "1", "--out",
                                       str(a_file / "net")])
    assert _error_line(result) == (f"memledger: error: cannot create {a_file / 'net'}: "
                                   f"{a_file} is not a directory")


def test_a_cometbft_failure_is_its_reason_not_its_stack(a_file: Path) -> None:
    with pytest.raises(cometbft.CometBFTError) as info:
        cometbft.init_home(a_file / "cometbft", "c", "n")  # cometbft itself panics here
    message = str(info.value)
    assert "\n" not in message and "goroutine" not in message
    assert message.startswith(f"cometbft init --home {a_file / 'cometbft'} failed (2): panic: "
                              f'could not create directory "{a_file / "cometbft"}"')


@pytest.mark.parametrize(("stderr", "line"), [
    (PANIC, 'panic: could not create directory "/x/afile/cometbft": mkdir /x/afile: not a '
            "directory"),
    ("I[2025] starting module=main\nError: unknown flag: --nope\nUsage:\n  cometbft init",
     "Error: unknown flag: --nope"),
    ("first line\nsecond line", "first line"),
    ("", "(no output)"),
])
def test_failure_line_keeps_the_line_that_says_why(stderr: str, line: str) -> None:
    assert cometbft.failure_line(stderr) == line


@pytest.fixture()
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_keys_new_before_init_makes_the_home_0700(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MEMLEDGER_KEYS_DIR", raising=False)
    home = tmp_path / ".memledger"
    result = CliRunner().invoke(main, ["keys", "new", "alice"])
    assert result.exit_code == 0, result.output
    assert (_mode(home), _mode(home / "keys"), _mode(home / "keys" / "alice.json")) == (
        0o700, 0o700, 0o600)
    result = CliRunner().invoke(main, ["init", "--home", str(home), "--base-port", "41950"])
    assert result.exit_code == 0, result.output
    assert (_mode(home), _mode(home / "config.json")) == (0o700, 0o600)


@pytest.mark.usefixtures("umask_022")
def test_a_new_keys_dir_and_its_new_parents_are_0700(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path.chmod(0o755)
    monkeypatch.setenv("MEMLEDGER_KEYS_DIR", str(tmp_path / "a" / "b" / "keys"))
    assert CliRunner().invoke(main, ["keys", "new", "bob"]).exit_code == 0
    assert [_mode(tmp_path / p) for p in ("a", "a/b", "a/b/keys")] == [0o700] * 3
    assert _mode(tmp_path) == 0o755  # an existing parent is left as it was
