"""A process SIGKILLed inside an LMDB read transaction (a `projection rebuild`, the REST
API, the rebuild child) no longer pins the writer's freed pages for good.

Its reader slot stayed in lock.mdb until someone asked LMDB to check: no page freed after
its snapshot could be reused, so data.mdb grew every block, and a state of a few hundred
KiB filled a 32 MiB map within 130 blocks (the node halts "canonical state is full").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from memledger.consensus.store.state import CanonicalStore

REPO = Path(__file__).parents[3]
MAP = 32 << 20
KEYS, VALUE = 50, 4000

HOLDER = r"""
import sys, time
from memledger.consensus.store.state import CanonicalStore
store = CanonicalStore(sys.argv[1], readonly=True)  # the REST API: open, no transaction
store.last_height
print("open", flush=True)
time.sleep(3600)
"""

READER = r"""
import sys, time
from memledger.consensus.store.state import CanonicalStore
store = CanonicalStore(sys.argv[1], readonly=True)
with store.snapshot() as view:
    view.last_height
    print("in a read transaction", flush=True)
    time.sleep(3600)
"""


def _block(store: CanonicalStore, height: int) -> None:
    """The same keys rewritten: the live state stays ~200 KiB."""
    overlay = store.begin_block()
    for k in range(KEYS):
        overlay.put(f"k/{k:03d}".encode(), os.urandom(VALUE))
    store.commit(overlay, height, overlay.app_hash(), 1)


def _started(code: str, path: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], text=True,
                             stdout=subprocess.PIPE, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.stdout is not None and child.stdout.readline()
    return child


def _dead_reader(path: Path) -> int:
    reader = _started(READER, path)
    reader.send_signal(signal.SIGKILL)
    reader.wait(10)
    return reader.pid


def test_a_killed_reader_does_not_fill_the_map(tmp_path: Path) -> None:
    path = tmp_path / "state"
    store = CanonicalStore(str(path), map_size=MAP)
    _block(store, 1)
    pid = _dead_reader(path)
    assert f"{pid}" in store._env.readers()  # its slot is still there
    for height in range(2, 400):  # MapFullError near block 130 before the fix
        _block(store, height)
    assert f"{pid}" not in store._env.readers()
    assert (path / "data.mdb").stat().st_size < MAP // 4
    store.close()


def test_a_writer_opening_clears_what_a_dead_reader_left(tmp_path: Path) -> None:
    """A restart of the app while the REST API keeps the store open: LMDB resets its
    reader table only when no process has the store open."""
    path = tmp_path / "state"
    store = CanonicalStore(str(path), map_size=MAP)
    _block(store, 1)
    store.close()
    holder = _started(HOLDER, path)
    try:
        pid = _dead_reader(path)
        again = CanonicalStore(str(path), map_size=MAP)
        assert f"{pid}" not in again._env.readers()
        again.close()
    finally:
        holder.kill()
        holder.wait(10)
