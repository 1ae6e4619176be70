"""A trust store file is the user's own: a path that holds anything else (an agent key
file, other JSON) is refused and left as it was, never replaced by a store."""

from __future__ import annotations

import hashlib
import json
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from nacl.signing import SigningKey

from memledger.sdk.light.errors import TrustError
from memledger.sdk.light.header import (
    BlockId,
    Commit,
    Header,
    LightBlock,
    Validator,
    ValidatorSet,
    address_of,
)
from memledger.sdk.light.store import TrustedStore

KEY_FILE = {"name": "victim", "private_key": "11" * 32, "public_key": "22" * 32}


def _block(height: int) -> LightBlock:
    """A light block with raw JSON to write (its contents are not checked by the store)."""
    key = SigningKey(hashlib.sha256(b"k").digest())
    vals = ValidatorSet((Validator(address_of(bytes(key.verify_key)),
                                   bytes(key.verify_key), 10),))
    header = Header(11, 1, "c", height, 1, 0, BlockId(b"", 0, b""), bytes(32), bytes(32),
                    vals.hash(), vals.hash(), bytes(32), bytes(32), bytes(32), bytes(32),
                    vals.validators[0].address)
    lb = LightBlock(header, Commit(height, 0, BlockId(b"", 0, b""), ()), vals)
    return replace(lb, raw={"signed_header": {"height": str(height)}, "validators": []})


@pytest.mark.parametrize("text", [json.dumps(KEY_FILE), "[]", '{"root": "r"}',
                                  '{"root": 1, "blocks": []}', '{"blocks": []}',
                                  '{"root": "r", "blocks": [7]}', '{"root": "r", "bl',
                                  "not json"])
def test_a_file_that_is_no_store_is_refused_naming_it_and_kept(tmp_path: Path,
                                                                 text: str) -> None:
    path = tmp_path / "victim.json"
    path.write_text(text)
    with pytest.raises(TrustError) as err:
        TrustedStore(path)
    assert err.value.reason == "not_a_store" and str(path) in str(err.value)
    assert path.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ["victim.json"]


def test_a_missing_directory_is_refused_not_made(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "store.json"
    with pytest.raises(TrustError) as err:
        TrustedStore(path)
    assert err.value.reason == "no_directory" and str(path.parent) in str(err.value)
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("text", [None, "", "  \n"])
def test_a_missing_or_empty_file_is_a_new_store_written_for_the_user_only(
        tmp_path: Path, text: str | None) -> None:
    path = tmp_path / "trusted.json"
    if text is not None:
        path.write_text(text)
    store = TrustedStore(path)
    assert len(store) == 0 and store.root is None
    store.bind("root-a")
    store.save(_block(1))
    assert json.loads(path.read_text()) == {
        "root": "root-a", "blocks": [{"signed_header": {"height": "1"}, "validators": []}]}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trusted.json"]


def test_a_store_file_keeps_its_root(tmp_path: Path) -> None:
    path = tmp_path / "trusted.json"
    path.write_text(json.dumps({"root": "root-a", "blocks": []}))
    store = TrustedStore(path)
    assert store.root == "root-a" and len(store) == 0


def test_stores_saving_at_once_to_one_file_each_leave_it_whole(tmp_path: Path) -> None:
    """Verified reads save from worker threads, and several processes (MCP servers) may
    share a store file: no save may lose another's temp file or leave one behind."""
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "trusted.json"
    stores = [TrustedStore(path) for _ in range(4)]
    for store in stores:
        store.bind("root-a")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: stores[i % 4].save(_block(i + 1)), range(200)))
    doc = json.loads(path.read_text())
    assert doc["root"] == "root-a" and doc["blocks"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trusted.json"]
