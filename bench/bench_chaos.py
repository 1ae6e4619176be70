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
import tempfile
from pathlib import Path
from typing import Any

from memledger.devtools.chaos import campaign
from memledger.devtools.chaos.history import History


def block_interval(out: Path) -> float | None:
    """Seconds per block while healthy: from the first two status reads of one node
    before the first fault, far enough apart."""
    ops = History.load(out / "history.jsonl").ops
    first_fault = min((o.start for o in ops if o.kind == "fault"), default=None)
    reads = [o for o in ops if o.kind == "read" and o.outcome == "ok" and o.node == 0
             and (first_fault is None or o.end < first_fault)]
    if len(reads) < 2 or reads[-1].end - reads[0].end < 1:
        return None
    blocks = int(reads[-1].result["height"]) - int(reads[0].result["height"])
    return round((reads[-1].end - reads[0].end) / blocks, 3) if blocks > 0 else None


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
    text = json.dumps(verdict, indent=1, sort_keys=True)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
