"""The home lock and the death signal that `memledger start` relies on, without a node.

tests/integration/test_supervisor_kill.py checks the same with real SIGKILLs of a real
node; these pin the pieces down quickly and in isolation.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memledger.daemon.home import HomeInUseError, NodeHome
from memledger.sdk.waiting import WaitTimeout, wait_until

REPO = Path(__file__).parents[3]


def _dead(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def _gone(pid: int, timeout: float) -> bool:
    try:
        return wait_until(lambda: _dead(pid), timeout, 0.02, what=f"pid {pid} to die")
    except WaitTimeout:
        return False


def test_second_lock_refused_naming_the_live_holder(tmp_path: Path) -> None:
    home = NodeHome(tmp_path)
    held = home.lock()
    assert held is not None
    try:
        with pytest.raises(HomeInUseError) as info:
            home.lock()
        message = str(info.value)
        assert info.value.holder == os.getpid()
        assert f"in use by a running `memledger start` (pid {os.getpid()})" in message
        assert str(tmp_path.resolve()) in message and "\n" not in message
    finally:
        held.close()
    again = home.lock()  # released by close, as the kernel does when the holder dies
    assert again is not None
    again.close()


def test_lock_inherited_by_a_child_outlives_its_dead_holder(tmp_path: Path) -> None:
    """A child holding the inherited descriptor keeps the home locked after the holder
    is gone; the message then says the holder has exited."""
    script = textwrap.dedent(f"""
        import subprocess, sys, time
        from memledger.daemon.home import NodeHome
        handle = NodeHome({str(tmp_path)!r}).lock()
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 pass_fds=(handle.fileno(),))
        print(child.pid, flush=True)
        time.sleep(60)
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert holder.stdout is not None
    child = int(holder.stdout.readline())
    try:
        holder.kill()
        holder.wait(10)
        with pytest.raises(HomeInUseError) as info:
            NodeHome(tmp_path).lock()
        assert info.value.holder == holder.pid
        assert f"`memledger start` pid {holder.pid}, which has exited" in str(info.value)
    finally:
        os.kill(child, signal.SIGKILL)
    assert _gone(child, 5)
    handle = wait_until(lambda: NodeHome(tmp_path).lock(), 5, 0.05,
                        what="the lock to be released after its last holder died",
                        ignore=(HomeInUseError,))
    handle.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_child_dies_with_its_sigkilled_parent() -> None:
    script = textwrap.dedent("""
        import subprocess, sys, time
        from memledger.daemon.supervisor import die_with_parent
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 preexec_fn=die_with_parent())
        print(child.pid, flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert not _gone(child, 0.2)
    parent.kill()
    parent.wait(10)
    try:
        assert _gone(child, 5), "child outlived its SIGKILLed parent"
    finally:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
