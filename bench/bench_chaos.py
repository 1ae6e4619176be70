"""The long fault campaign: every nemesis three times under the recorded workload.

Same harness as `make chaos` (memledger/devtools/chaos; docs/CHAOS.md) with the long
schedule: 24 faults of ~15 s each, 6 s healthy between them. Reports operations by kind
and outcome, faults injected, acknowledged writes lost, divergences, stale verified
reads, unresolved unknowns, and the recovery time after each heal (p50, max): seconds
until every node is two blocks past the highest height seen at the heal. The limit the
recovery is read against is measured in the same run: the chain's own block interval
while healthy (blocks per second before the first fault).

    .venv/bin/python -m bench.bench_chaos [--out DIR] [--seed N] [--json bench/results/chaos.json]

Needs root (a tmpfs for one node's home, nftables for packet loss) and toxiproxy-server
(`make toxiproxy`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from memledger.devtools.chaos import campaign
from memledger.devtools.chaos.history import History


def block_interval(out: Path) -> float | None:
    """Seconds per block while healthy: node0's status reads outside every fault (from
    its injection until the chain moved on after its heal), consecutive pairs only."""
    ops = History.load(out / "history.jsonl").ops
    faults = [(o.start, o.end + float(o.result.get("recovery_s") or 0))
              for o in ops if o.kind == "fault"]

    def healthy(t: float) -> bool:
        return not any(a <= t <= b for a, b in faults)

    reads = [o for o in ops if o.kind == "read" and o.outcome == "ok" and o.node == 0
             and healthy(o.end)]
    seconds = blocks = 0.0
    for a, b in zip(reads, reads[1:], strict=False):
        if all(healthy(t) for t in (a.end, (a.end + b.end) / 2)) and not any(
                a.end <= f <= b.end for f, _ in faults):
            seconds += b.end - a.end
            blocks += int(b.result["height"]) - int(a.result["height"])
    return round(seconds / blocks, 3) if blocks > 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="chaos-long-"))
    verdict: dict[str, Any] = campaign.run(out, campaign.LONG, args.seed,
                                           say=lambda m: print(m, flush=True))
    verdict["healthy_block_interval_s"] = block_interval(out)
    verdict["history"] = str(out / "history.jsonl")
    verdict["command"] = " ".join([".venv/bin/python -m bench.bench_chaos", *sys.argv[1:]])
    text = json.dumps(verdict, indent=1, sort_keys=True)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
