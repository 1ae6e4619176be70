"""Canonical LMDB store: overlays, atomic commits, recovery, readers, determinism; codec.

Run as a script (``python test_state.py apply-sequence PATH``) it replays a fixed block
sequence and prints the roots; the determinism test runs that under other hash seeds.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import lmdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memledger.consensus.store import codec
from memledger.consensus.store.state import (
    MAX_KEY_LEN,
    AppHashMismatch,
    CanonicalStore,
    CorruptStoreError,
    StaleOverlayError,
    StoreError,
)
from memledger.protocol.commitment import ZERO_HASH, root_of, verify_proof

MAP = 64 << 20
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    return str(tmp_path / "state")


@pytest.fixture
def store(store_path: str) -> Iterator[CanonicalStore]:
    s = CanonicalStore(store_path, map_size=MAP)
    yield s
    s.close()


def _commit(
    store: CanonicalStore, height: int, ops: Mapping[bytes, bytes | None], **meta: bytes
) -> bytes:
    overlay = store.begin_block()
    for key, value in ops.items():
        if value is None:
            overlay.delete(key)
        else:
            overlay.put(key, value)
    for name, mval in meta.items():
        overlay.set_meta(name, mval)
    root = overlay.app_hash()
    store.commit(overlay, height, root, 1)
    return root


def _all(store: CanonicalStore) -> dict[bytes, bytes]:
    return dict(store.iter_prefix(b""))


def _failing_hook() -> tuple[dict[str, bool], Callable[[], None]]:
    """A before_commit hook that raises inside the LMDB write txn while fail["on"]."""
    fail = {"on": False}

    def hook() -> None:
        if fail["on"]:
            raise OSError("injected failure inside the LMDB write txn")

    return fail, hook


# -- overlay semantics --------------------------------------------------------------


def test_overlay_reads_own_writes_and_deletes_shadow(store: CanonicalStore) -> None:
    _commit(store, 1, {b"a": b"1", b"b": b"2"})
    committed_root = store.last_app_hash
    ov = store.begin_block()
    ov.put(b"a", b"10")
    ov.delete(b"b")
    ov.put(b"c", b"3")
    assert (ov.get(b"a"), ov.get(b"b"), ov.get(b"c"), ov.get(b"zz")) == (b"10", None, b"3", None)
    ov.delete(b"c")
    ov.put(b"b", b"again")
    assert ov.get(b"c") is None and ov.get(b"b") == b"again"
    # The committed state and in-memory tree are untouched until commit.
    assert store.get(b"a") == b"1" and store.get(b"b") == b"2" and store.get(b"c") is None
    ov.app_hash()
    assert store.last_app_hash == committed_root
    assert store._tree is not None and store._tree.root == committed_root
    assert ov.app_hash() == root_of({b"a": b"10", b"b": b"again"}.items())


def test_changes_sorted_and_noops_dropped(store: CanonicalStore) -> None:
    _commit(store, 1, {b"keep": b"same", b"gone": b"x"})
    ov = store.begin_block()
    ov.put(b"zeta", b"new")
    ov.put(b"keep", b"same")  # equal to committed: dropped
    ov.delete(b"never-existed")  # absent in committed state: dropped
    ov.delete(b"gone")
    ov.put(b"alpha", b"")
    ov.put(b"tmp", b"1")
    ov.delete(b"tmp")  # put then delete of a new key: net no-op
    assert ov.changes() == [(b"alpha", b""), (b"gone", None), (b"zeta", b"new")]
    before = ov.app_hash()
    ov.put(b"zeta", b"newer")  # a later write invalidates the cached result
    assert ov.app_hash() != before
    assert ov.changes()[-1] == (b"zeta", b"newer")


def test_empty_block_keeps_root(store: CanonicalStore) -> None:
    root = _commit(store, 1, {b"a": b"1"})
    ov = store.begin_block()
    assert ov.changes() == [] and ov.app_hash() == root
    store.commit(ov, 2, root, 1)
    assert store.last_height == 2 and store.last_app_hash == root


def test_key_and_value_validation(store: CanonicalStore) -> None:
    ov = store.begin_block()
    with pytest.raises(ValueError):
        ov.put(b"", b"v")
    with pytest.raises(ValueError):
        ov.put(b"k" * (MAX_KEY_LEN + 1), b"v")
    with pytest.raises(TypeError):
        ov.put("str-key", b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ov.put(b"k", "str-value")  # type: ignore[arg-type]
    ov.put(b"k" * MAX_KEY_LEN, b"max-size key")
    store.commit(ov, 1, ov.app_hash(), 1)
    assert store.get(b"k" * MAX_KEY_LEN) == b"max-size key"


# -- commit rules -------------------------------------------------------------------


def test_commit_rejects_wrong_app_hash_and_writes_nothing(store: CanonicalStore) -> None:
    _commit(store, 1, {b"a": b"1"})
    ov = store.begin_block()
    ov.put(b"b", b"2")
    with pytest.raises(AppHashMismatch):
        store.commit(ov, 2, b"\x01" * 32, 1)
    assert store.last_height == 1 and store.get(b"b") is None
    store.commit(ov, 2, ov.app_hash(), 1)  # the same overlay still commits correctly
    assert store.get(b"b") == b"2"


def test_overlay_commits_once_and_new_block_discards_old(store: CanonicalStore) -> None:
    ov = store.begin_block()
    ov.put(b"a", b"1")
    root = ov.app_hash()
    store.commit(ov, 1, root, 1)
    with pytest.raises(StaleOverlayError):
        store.commit(ov, 2, root, 1)
    with pytest.raises(StaleOverlayError):
        ov.put(b"b", b"2")
    assert ov.changes() == [(b"a", b"1")]  # still readable after commit
    old = store.begin_block()
    old.put(b"x", b"1")
    new = store.begin_block()
    with pytest.raises(StaleOverlayError):
        old.app_hash()
    with pytest.raises(StaleOverlayError):
        store.commit(old, 2, root, 1)
    store.commit(new, 2, new.app_hash(), 1)
    assert store.get(b"x") is None


def test_heights_must_increase(store: CanonicalStore) -> None:
    _commit(store, 5, {b"a": b"1"})
    ov = store.begin_block()
    for bad in (5, 4):
        with pytest.raises(StoreError):
            store.commit(ov, bad, ov.app_hash(), 1)
    assert store.last_height == 5
    store.commit(ov, 6, ov.app_hash(), 1)
    assert store.last_height == 6


def test_rerun_of_discarded_block_gives_same_hash(store: CanonicalStore) -> None:
    _commit(store, 1, {b"k%d" % i: b"v" for i in range(50)})
    ops = [(b"k%d" % i, None if i % 3 == 0 else b"w%d" % i) for i in range(0, 80, 2)]
    first = store.begin_block()
    for key, value in ops:
        first.delete(key) if value is None else first.put(key, value)
    h1, c1 = first.app_hash(), first.changes()
    second = store.begin_block()  # FinalizeBlock re-run: discard and redo, other order
    for key, value in reversed(ops):
        second.delete(key) if value is None else second.put(key, value)
    assert second.app_hash() == h1 and second.changes() == c1
    store.commit(second, 2, h1, 1)
    assert store.last_app_hash == h1


def test_before_commit_failure_changes_nothing(store_path: str) -> None:
    fail, hook = _failing_hook()
    s = CanonicalStore(store_path, map_size=MAP, before_commit=hook)
    root1 = _commit(s, 1, {b"a": b"1"}, note=b"one")
    fail["on"] = True
    ov = s.begin_block()
    ov.put(b"a", b"2")
    ov.put(b"b", b"new")
    ov.set_meta("note", b"two")
    with pytest.raises(OSError, match="injected"):
        s.commit(ov, 2, ov.app_hash(), 2)
    assert (s.last_height, s.last_app_hash, s.app_version) == (1, root1, 1)
    assert _all(s) == {b"a": b"1"} and s.get_meta("note") == b"one"
    assert s._tree is not None and s._tree.root == root1
    assert s.begin_block().app_hash() == root1
    s.close()
    s = CanonicalStore(store_path, map_size=MAP, before_commit=hook)
    assert (s.last_height, s.last_app_hash) == (1, root1) and _all(s) == {b"a": b"1"}
    fail["on"] = False
    root2 = _commit(s, 2, {b"a": b"2"})
    assert s.last_height == 2 and root2 == root_of([(b"a", b"2")])
    s.close()


def test_kept_reads_follow_commits_and_writes_outside_blocks(store_path: str) -> None:
    """The writer keeps committed reads (absences too); each must change with the state."""
    fail, hook = _failing_hook()
    s = CanonicalStore(store_path, map_size=MAP, before_commit=hook)
    assert s.get(b"a") is None and s.get(b"b") is None  # kept as absent
    _commit(s, 1, {b"a": b"1", b"b": b"x"})
    assert (s.get(b"a"), s.get(b"b")) == (b"1", b"x")
    _commit(s, 2, {b"a": None, b"b": b"y"})
    assert (s.get(b"a"), s.get(b"b")) == (None, b"y")
    fail["on"] = True  # a commit that fails leaves the kept reads as they were
    ov = s.begin_block()
    ov.put(b"b", b"z")
    with pytest.raises(OSError):
        s.commit(ov, 3, ov.app_hash(), 1)
    assert s.get(b"b") == b"y"
    fail["on"] = False
    reader = CanonicalStore(store_path, map_size=MAP, readonly=True)
    assert reader.get(b"b") == b"y" and not reader._reads  # another process commits
    reader.close()
    s.close()
    s = CanonicalStore(store_path, map_size=MAP)
    s.restore_abort()  # a write outside a block: the state is empty again
    assert s.get(b"b") is None
    s.restore_begin()
    s.restore_chunk([(b"b", b"restored")])
    assert s.get(b"b") == b"restored"
    s.close()


# -- persistence and recovery -------------------------------------------------------


def test_commit_and_reopen_persist_everything(store_path: str) -> None:
    s = CanonicalStore(store_path, map_size=MAP)
    assert (s.last_height, s.last_app_hash, s.app_version) == (0, ZERO_HASH, 0)
    _commit(s, 1, {b"a": b"1", b"b": b"2", b"c/127": b"x", b"c/202": b"y"}, cursor=b"7")
    ov = s.begin_block()
    ov.delete(b"b")
    ov.put(b"d", b"4")
    ov.set_meta("cursor", b"8")
    ov.set_meta("extra", b"e")
    root = ov.app_hash()
    s.commit(ov, 2, root, 3)
    s.close()
    s = CanonicalStore(store_path, map_size=MAP)
    assert (s.last_height, s.last_app_hash, s.app_version) == (2, root, 3)
    assert s.get_meta("cursor") == b"8" and s.get_meta("extra") == b"e"
    assert s.get_meta("missing") is None
    want = {b"a": b"1", b"c/127": b"x", b"c/202": b"y", b"d": b"4"}
    assert _all(s) == want and root == root_of(want.items())
    assert s._tree is not None and s._tree.root == root
    s.check_integrity()
    s.close()


def test_missing_or_damaged_tree_is_rebuilt(store_path: str) -> None:
    s = CanonicalStore(store_path, map_size=MAP)
    root = _commit(s, 1, {b"k%d" % i: b"%d" % i for i in range(300)})
    s.close()
    env = lmdb.open(store_path, max_dbs=4, map_size=MAP)
    tree_db = env.open_db(b"tree")
    with env.begin(write=True) as txn:  # damage an inner node
        txn.put((3).to_bytes(4, "big"), b"\xaa" * 32, db=tree_db)
    env.close()
    s = CanonicalStore(store_path, map_size=MAP)
    assert s._tree is not None and s._tree.root == root
    s.check_integrity()
    s.close()
    env = lmdb.open(store_path, max_dbs=4, map_size=MAP)
    with env.begin(write=True) as txn:  # lose the whole tree
        txn.drop(env.open_db(b"tree", txn=txn), delete=False)
    env.close()
    s = CanonicalStore(store_path, map_size=MAP)
    assert s._tree is not None and s._tree.root == root
    assert s.prove(b"k7") is not None and verify_proof(root, b"k7", b"7", s.prove(b"k7"))
    s.close()


def test_hidx_contradicting_app_hash_refuses_to_open(store_path: str) -> None:
    s = CanonicalStore(store_path, map_size=MAP)
    _commit(s, 1, {b"a": b"1", b"b": b"2"})
    s.close()
    env = lmdb.open(store_path, max_dbs=4, map_size=MAP)
    with env.begin(write=True) as txn:
        hidx = env.open_db(b"hidx", txn=txn)
        key, _ = next(iter(txn.cursor(db=hidx)))
        txn.put(key, b"\x00" * 32, db=hidx)
        txn.drop(env.open_db(b"tree", txn=txn), delete=False)
    env.close()
    with pytest.raises(CorruptStoreError):
        CanonicalStore(store_path, map_size=MAP)


def test_check_integrity_detects_data_hidx_drift(store_path: str) -> None:
    s = CanonicalStore(store_path, map_size=MAP)
    _commit(s, 1, {b"a": b"1"})
    s.close()
    env = lmdb.open(store_path, max_dbs=4, map_size=MAP)
    with env.begin(write=True) as txn:
        txn.put(b"a", b"edited behind the store's back", db=env.open_db(b"data", txn=txn))
    env.close()
    s = CanonicalStore(store_path, map_size=MAP)
    with pytest.raises(CorruptStoreError):
        s.check_integrity()
    s.close()


def test_bulk_load_then_blocks(store_path: str) -> None:
    items = {b"bulk/%05d" % i: b"v%d" % i for i in range(2500)}
    s = CanonicalStore(store_path, map_size=MAP)
    root = s.bulk_load(sorted(items.items(), reverse=True), chunk=700)
    assert root == root_of(items.items()) == s.last_app_hash and s.last_height == 0
    items[b"bulk/00001"] = b"changed"
    assert _commit(s, 1, {b"bulk/00001": b"changed"}) == root_of(items.items())
    with pytest.raises(StoreError):
        s.bulk_load([(b"x", b"y")])
    s.check_integrity()
    s.close()


def test_interrupted_bulk_load_blocks_open(store_path: str) -> None:
    def items() -> Iterator[tuple[bytes, bytes]]:
        for i in range(50):
            yield b"k%d" % i, b"v"
        raise RuntimeError("source failed mid-load")

    s = CanonicalStore(store_path, map_size=MAP)
    with pytest.raises(RuntimeError):
        s.bulk_load(items(), chunk=10)
    s.close()
    with pytest.raises(CorruptStoreError):
        CanonicalStore(store_path, map_size=MAP)


def test_second_writer_is_refused(store: CanonicalStore, store_path: str) -> None:
    with pytest.raises(StoreError):
        CanonicalStore(store_path, map_size=MAP)


def test_iter_prefix_is_sorted_and_bounded(store: CanonicalStore) -> None:
    keys = [b"p/b", b"p/a", b"p/\xff", b"q", b"p", b"o/z", b"p/a/1"]
    _commit(store, 1, {k: k.upper() for k in keys})
    assert [k for k, _ in store.iter_prefix(b"p/")] == [b"p/a", b"p/a/1", b"p/b", b"p/\xff"]
    assert list(store.iter_prefix(b"zz")) == []
    assert [k for k, _ in store.iter_prefix(b"")] == sorted(keys)


def test_store_proofs_verify_against_snapshot(store: CanonicalStore) -> None:
    state = {b"k%d" % i: b"v%d" % i for i in range(200)}
    _commit(store, 1, state)
    with store.snapshot() as snap:
        root = snap.last_app_hash
        for key in (b"k0", b"k57", b"k199"):
            assert verify_proof(root, key, snap.get(key), snap.prove(key))
        assert verify_proof(root, b"absent", None, snap.prove(b"absent"))
        assert not verify_proof(root, b"k0", b"forged", snap.prove(b"k0"))


# -- state-level property: commits track a plain dict ------------------------------

_skey = st.one_of(
    st.sampled_from([b"a", b"b", b"c/127", b"c/202"]), st.binary(min_size=1, max_size=5)
)
_block = st.dictionaries(_skey, st.one_of(st.none(), st.binary(max_size=6)), max_size=10)


@settings(max_examples=25, deadline=None)
@given(st.lists(_block, min_size=1, max_size=5))
def test_committed_roots_match_from_scratch(blocks: list[dict[bytes, bytes | None]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        s = CanonicalStore(tmp, map_size=MAP)
        model: dict[bytes, bytes] = {}
        for height, ops in enumerate(blocks, start=1):
            for key, value in ops.items():
                if value is None:
                    model.pop(key, None)
                else:
                    model[key] = value
            assert _commit(s, height, ops) == root_of(model.items())
            assert _all(s) == model
        s.close()
        s = CanonicalStore(tmp, map_size=MAP)
        assert s.last_app_hash == root_of(model.items())
        s.check_integrity()
        s.close()


# -- other processes ----------------------------------------------------------------

_READER = textwrap.dedent(
    """
    import json, sys
    from memledger.protocol.commitment import verify_proof
    from memledger.consensus.store.state import CanonicalStore, StoreError
    path, target = sys.argv[1], int(sys.argv[2])
    s = CanonicalStore(path, map_size=64 << 20, readonly=True)
    try:
        s.begin_block()
        raise SystemExit("read-only store allowed begin_block")
    except StoreError:
        pass
    seen = set()
    while True:
        with s.snapshot() as snap:
            h = snap.last_height
            mirror = snap.get(b"height")
            ok = mirror == str(h).encode() and verify_proof(
                snap.last_app_hash, b"height", mirror, snap.prove(b"height"))
            if not ok:
                raise SystemExit(f"inconsistent snapshot at {h}: {mirror!r}")
            if not seen:  # ready only once it has read the first height itself
                print("ready", flush=True)
            seen.add(h)
            if h >= target:
                print(json.dumps({"seen": sorted(seen), "app_hash": snap.last_app_hash.hex(),
                                  "n": len(list(snap.iter_prefix(b"blk/")))}))
                break
    """
)


def test_readonly_process_reads_concurrently(store: CanonicalStore, store_path: str) -> None:
    _commit(store, 1, {b"height": b"1", b"blk/1": b"x"})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER, store_path, "40"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert reader.stdout is not None
    assert reader.stdout.readline().strip() == "ready"  # reader is open before we commit on
    for h in range(2, 41):
        _commit(store, h, {b"height": str(h).encode(), b"blk/%d" % h: b"x" * (h * 50)})
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    result = json.loads(out)
    assert result["app_hash"] == store.last_app_hash.hex() and result["n"] == 40
    assert result["seen"][0] == 1 and result["seen"][-1] == 40


def test_readonly_open_requires_existing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        CanonicalStore(str(tmp_path / "nope"), readonly=True)


def apply_sequence(path: str) -> list[str]:
    """Fixed pseudo-random block sequence; returns every block's root as hex."""
    rng = random.Random(20240611)
    store = CanonicalStore(path, map_size=MAP)
    roots = []
    try:
        for height in range(1, 8):
            ops: dict[bytes, bytes | None] = {}
            for _ in range(150):
                key = b"acct/%d" % rng.randrange(400)
                ops[key] = None if rng.random() < 0.25 else rng.randbytes(rng.randrange(30))
            # Insert through a set so iteration order depends on the hash seed.
            overlay = store.begin_block()
            for key in {k for k in ops}:
                value = ops[key]
                overlay.delete(key) if value is None else overlay.put(key, value)
            root = overlay.app_hash()
            store.commit(overlay, height, root, 1)
            roots.append(root.hex())
    finally:
        store.close()
    return roots


def test_roots_identical_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    local = apply_sequence(str(tmp_path / "local"))
    assert len(set(local)) == len(local)
    for seed in ("1", "987654321"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(
            [sys.executable, __file__, "apply-sequence", str(tmp_path / f"seed-{seed}")],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=120,
        )
        assert json.loads(out.stdout) == local


# -- codec ----------------------------------------------------------------------------


def test_codec_canonical_bytes() -> None:
    rec = {"b": [1, True, None, "ü"], "a": {"z": -(1 << 63), "y": (1 << 64) - 1}, "é": ""}
    raw = codec.encode(rec)
    assert (
        raw
        == (
            '{"a":{"y":18446744073709551615,"z":-9223372036854775808},"b":[1,true,null,"ü"],"é":""}'
        ).encode()
    )
    assert codec.decode(raw) == rec
    assert codec.encode(codec.decode(raw)) == raw


def _nested(depth: int) -> object:
    obj: object = []
    for _ in range(depth - 1):
        obj = [obj]
    return obj


def test_codec_depth_limit_is_exact() -> None:
    assert codec.decode(codec.encode(_nested(codec.MAX_DEPTH))) == _nested(codec.MAX_DEPTH)


class _Text(str):
    """A str subclass: not an admitted record type."""


@pytest.mark.parametrize(
    "bad",
    [
        1.5,
        {"x": 0.0},
        [1, (2, 3)],
        {1: "int key"},
        {"s": {1, 2}},
        b"bytes",
        1 << 64,
        -(1 << 63) - 1,
        _nested(codec.MAX_DEPTH + 1),
        # lists of leaves take a fast path in the type walk: it must refuse the same
        [1, 2, 1 << 64],
        [-(1 << 63) - 1, 0],
        [1, 2.5],
        ["a", b"b"],
        [True, None, 0.0],
        [_Text("a str subclass")],
        [[0, 1 << 64]],
    ],
)
def test_codec_rejects_non_canonical_types(bad: object) -> None:
    with pytest.raises(TypeError):
        codec.encode(bad)


def test_codec_rejects_cycles_and_float_input() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(TypeError):
        codec.encode(loop)
    for raw in (b'{"a":1.0}', b"[NaN]", b"Infinity"):
        with pytest.raises(ValueError):
            codec.decode_strict(raw)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "apply-sequence":
        print(json.dumps(apply_sequence(sys.argv[2])))
    else:
        raise SystemExit("usage: test_state.py apply-sequence PATH")
