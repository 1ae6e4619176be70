"""Halting, and test-only fault injection at fixed points of the block lifecycle.

`halt` is how the app refuses to go on (DESIGN §6): it exits before answering, so a node
never reports a Commit it did not make durable. `FaultPlan` is set only from
`memledger app`'s test flags; with its defaults it does nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass

log = logging.getLogger("memledger.abci")

__all__ = ["KILL_POINTS", "RESTORE_KILL_POINT", "FaultPlan", "halt"]


def halt(message: str) -> None:
    """Stop the process before answering: a node never reports what it did not persist."""
    log.critical("HALT: %s", message)
    sys.stderr.write(f"memledger: HALT: {message}\n")
    sys.stderr.flush()
    logging.shutdown()
    os._exit(3)


KILL_POINTS = ("after_finalize", "before_flush", "in_flush", "after_flush", "in_lmdb",
               "after_lmdb")
RESTORE_KILL_POINT = "after_restore"


@dataclass
class FaultPlan:
    """Test-only fault injection, set from the command line of `memledger app`.

    `kill_point`/`kill_height` SIGKILL the process at one point of the block lifecycle
    (see KILL_POINTS), the way a power cut or OOM kill would; or at "after_restore", once a
    state-sync restore is in LMDB but before the ABCI answer that lets CometBFT save its
    state. Height 0 matches the first height the point is reached at (a snapshot's height
    is not known in advance).

    `diverge_height` makes this app a build whose state machine differs from its peers':
    from that height on it skips every tx of a block (as if its tx rules refused them all,
    without saying so in the results), so its app hash differs from the others' at the
    first block with a tx. CometBFT must then stop this node, not the net.
    """

    exit_before_commit_height: int = 0
    fail_flush_height: int = 0
    kill_point: str = ""
    kill_height: int = 0
    corrupt_snapshot_chunks: bool = False  # serve every snapshot chunk with a flipped byte
    diverge_height: int = 0

    def diverges(self, height: int) -> bool:
        return 0 < self.diverge_height <= height

    def maybe_kill(self, point: str, height: int) -> None:
        if self.kill_point == point and self.kill_height in (height, 0):
            log.critical("fault injection: SIGKILL at %s of height %d", point, height)
            logging.shutdown()
            os.kill(os.getpid(), signal.SIGKILL)
