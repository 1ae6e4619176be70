"""Agent key files and the SDK's offline pieces (nonces, ids, error parsing)."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import httpx
import pytest

from memledger.sdk import MemLedgerError, NonceSource, TxReceipt, derive_memory_id
from memledger.sdk.keys import Agent, KeyFileError, key_path, load_agent


def test_key_file_round_trip_with_private_permissions(tmp_path: Path) -> None:
    agent = Agent.generate("alice")
    path = agent.save(tmp_path / "keys" / "alice.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    doc = json.loads(path.read_text())
    assert doc["seed"] == agent.seed.hex() and doc["public_key"] == agent.public_key_hex
    loaded = Agent.load(path)
    assert loaded.public_key == agent.public_key and loaded.name == "alice"


def test_never_overwrites_silently(tmp_path: Path) -> None:
    path = Agent.generate().save(tmp_path / "k.json")
    with pytest.raises(KeyFileError, match="already exists"):
        Agent.generate().save(path)
    other = Agent.generate()
    other.save(path, overwrite=True)
    assert Agent.load(path).public_key == other.public_key


@pytest.mark.parametrize("content", ["not json", "{}", '{"seed": "zz"}', '{"seed": "00"}'])
def test_broken_key_files_fail_clearly(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(KeyFileError):
        Agent.load(path)


def test_mismatched_public_key_is_detected(tmp_path: Path) -> None:
    path = Agent.generate().save(tmp_path / "k.json")
    doc = json.loads(path.read_text())
    doc["public_key"] = "00" * 32
    path.write_text(json.dumps(doc))
    with pytest.raises(KeyFileError, match="does not match"):
        Agent.load(path)


def test_names_resolve_in_the_keys_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_KEYS_DIR", str(tmp_path))
    assert key_path("bob") == tmp_path / "bob.json"
    assert key_path("./bob.json") == Path("./bob.json")
    Agent.generate("bob").save(key_path("bob"))
    assert load_agent("bob").name == "bob"
    with pytest.raises(KeyFileError, match="no key named 'carol' .*; keys there: bob;"):
        load_agent("carol")
    with pytest.raises(KeyFileError, match="no key file at"):  # a path is taken as given
        load_agent(tmp_path / "carol.json")


def test_nonces_strictly_increase_across_threads() -> None:
    source = NonceSource()
    out: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        got = [source.next() for _ in range(2000)]
        with lock:
            out.extend(got)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(out)) == len(out) == 8000
    assert min(out) >= time.time_ns() - 60 * 10**9


def test_nonce_floor_after_replay() -> None:
    source = NonceSource()
    future = time.time_ns() + 10**15
    source.at_least(future)
    assert source.next() == future + 1


def test_derived_ids_are_stable_and_valid() -> None:
    a = derive_memory_id("ab" * 32, "general", "hello")
    assert a == derive_memory_id("ab" * 32, "general", "hello")
    assert a != derive_memory_id("cd" * 32, "general", "hello")
    assert a.startswith("m-") and len(a) == 34


def test_error_from_problem_response() -> None:
    resp = httpx.Response(409, json={"type": "urn:memledger:code:nonce_replayed", "status": 409,
                                     "title": "t", "detail": "nonce 5 <= 7", "code": 10,
                                     "name": "nonce_replayed"})
    err = MemLedgerError.from_response(resp)
    assert (err.status, err.code, err.name) == (409, 10, "nonce_replayed")
    assert str(err) == "nonce_replayed (code 10): nonce 5 <= 7"
    plain = MemLedgerError.from_response(httpx.Response(502, text="<html>bad gateway</html>"))
    assert plain.status == 502 and plain.code is None and "bad gateway" in str(plain)


def test_receipt_finds_memory_id_in_events() -> None:
    receipt = TxReceipt.from_json({"status": "committed", "hash": "h", "events": [
        {"type": "tx", "attributes": {"kind": "cocommit_submit"}},
        {"type": "cocommit", "attributes": {"id": "cc-1", "coauthors": "2"}}]})
    assert receipt.memory_id == "cc-1" and receipt.committed
