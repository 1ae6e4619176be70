"""The committed memledger/protocol/pb modules must match what scripts/gen_proto.py
generates today."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "gen_proto.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_proto", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_generated_code_is_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_check_detects_stale_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = _load_script()
    copy = tmp_path / "pb"
    pb_dir = ROOT / "memledger" / "protocol" / "pb"
    shutil.copytree(pb_dir, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert gen.check(copy) == 0
    stale = copy / "abci_pb2.py"
    stale.write_text(stale.read_text() + "# edited by hand\n")
    assert gen.check(copy) == 1
    assert "stale" in capsys.readouterr().err


def test_generated_modules_import_from_package() -> None:
    from memledger.protocol.pb import abci_pb2, tx_pb2

    assert abci_pb2.Request.DESCRIPTOR.full_name == "memledger.abci.v1.Request"
    assert abci_pb2.Request.__module__ == "memledger.protocol.pb.abci_pb2"
    assert tx_pb2.Tx.DESCRIPTOR.full_name == "memledger.tx.v1.Tx"
