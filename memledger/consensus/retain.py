"""Block pruning: the height from which this node keeps CometBFT's blocks.

The app answers every Commit with `retain_height`; CometBFT then deletes the blocks (and
their `block_results`) below it. The value is node-local: it is not in the app hash, no
other node sees it, and it depends on this node's config and its snapshot directory,
never on the wall clock.

Bounds (docs/OPERATIONS.md, "Block pruning"):
- keep the last `retain_blocks` blocks (0 = keep every block, the default);
- never above the oldest state sync snapshot this node offers: a peer restoring the
  snapshot of height H asks RPC servers for the light blocks H, H+1 and H+2;
- CometBFT itself keeps the headers and commits still inside the evidence window
  (evidence.max_age_num_blocks and max_age_duration), so that is not ours to bound.
"""

from __future__ import annotations

#: The smallest non-zero `retain_blocks`. The REST API's block follower reads back up to
#: 64 blocks after an outage (api.follower.MAX_CATCH_UP), an export asks for the block
#: after the settled one, and `/v1/light` serves recent headers to light clients; 100
#: keeps all of those inside what the node still holds.
MIN_RETAIN_BLOCKS = 100


def retain_height(height: int, retain_blocks: int, oldest_snapshot: int | None) -> int:
    """What Commit at `height` answers: 0 (prune nothing) or the lowest height to keep.

    `oldest_snapshot` is the lowest snapshot height the node serves (None: none). A
    snapshot taken later is at `height` or above, so it never needs blocks below.
    """
    if retain_blocks <= 0 or height < 1:
        return 0
    keep_from = height - retain_blocks + 1
    if oldest_snapshot is not None:
        keep_from = min(keep_from, oldest_snapshot)
    return keep_from if keep_from > 1 else 0
