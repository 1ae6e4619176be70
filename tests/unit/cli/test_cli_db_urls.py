"""A database URL or test net file the CLI cannot use is one line and exit 1, never a
traceback: `projection rebuild --db-url` into a missing directory, an unknown backend or
an uninstalled driver; `init --db-url` checks the URL before writing the home; and
`testnet status`/`down` on a damaged testnet.json say what is wrong with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memledger.cli.main import main
from memledger.consensus.store.state import CanonicalStore
from memledger.daemon.home import NodeConfig, NodeHome


def _error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("memledger: error: ")
    return lines[0]


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """A node home with (empty) canonical state, as after its first start."""
    node_home = NodeHome(tmp_path / "home")
    node_home.save(NodeConfig())
    node_home.state_dir.mkdir(parents=True)
    CanonicalStore(str(node_home.state_dir)).close()
    return node_home.root


def _rebuild(home: Path, url: str) -> Result:
    return CliRunner().invoke(main, ["projection", "rebuild", "--home", str(home),
                                     "--db-url", url])


def test_rebuild_into_a_missing_directory_is_one_line_before_any_progress(
        home: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/no-such-dir/x.db"
    line = _error_line(_rebuild(home, url))
    assert line == (f"memledger: error: cannot open the projection database {url}: unable "
                    "to open database file")
    assert not (tmp_path / "no-such-dir").exists()


@pytest.mark.parametrize(("url", "said"), [
    ("bogus://x", "unsupported database 'bogus' in bogus://x"),
    ("not a url", "cannot parse the database URL"),
    ("postgresql://u:secret@127.0.0.1:1/x",
     "the database driver 'psycopg2' of postgresql://u:***@127.0.0.1:1/x is unknown or not "
     "installed: write postgresql+psycopg://"),
])
def test_rebuild_into_an_unusable_url_says_what_to_write(home: Path, url: str,
                                                         said: str) -> None:
    line = _error_line(_rebuild(home, url))
    assert said in line and "secret" not in line


def test_init_checks_the_url_without_connecting(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(main, ["init", "--home", str(tmp_path / "a"), "--db-url",
                               "bogus://x"])
    assert "unsupported database 'bogus'" in _error_line(bad)
    assert not (tmp_path / "a").exists()
    good = runner.invoke(main, ["init", "--home", str(tmp_path / "b"), "--db-url",
                                "postgresql+psycopg://u:pw@127.0.0.1:1/x"])  # no server
    assert good.exit_code == 0, good.output
    assert NodeHome(tmp_path / "b").load().db_url.startswith("postgresql+psycopg://")


@pytest.mark.parametrize(("text", "said"), [
    ("{", "is not valid JSON (Expecting property name"),
    ("[]", "must hold a JSON object describing the test net, got list"),
    ('{"chain_id": "c", "base_port": 30000}', "missing nodes"),
    ('{"chain_id": "c", "base_port": 30000, "nodes": [{"index": 0}]}',
     "a node: missing base_port; missing name; missing power"),
    ('{"chain_id": "c", "base_port": "30000", "nodes": [7]}', "base_port must be int"),
])
@pytest.mark.parametrize("command", ["status", "down"])
def test_a_damaged_testnet_json_is_one_line_naming_it(tmp_path: Path, text: str, said: str,
                                                       command: str) -> None:
    (tmp_path / "testnet.json").write_text(text)
    line = _error_line(CliRunner().invoke(main, ["testnet", command, str(tmp_path)]))
    assert str(tmp_path / "testnet.json") in line and said in line
