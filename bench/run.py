"""Run the whole benchmark suite and record machine-readable results.

    .venv/bin/python bench/run.py            # full suite, 100k and 1M (< 20 min on 2 vCPUs)
    .venv/bin/python bench/run.py --quick    # small sizes, for CI (measures, never gates)

Each benchmark is its own module printing JSON; results go to bench/results/<name>.json
together with the commit and machine they were measured on, and bench/plots.py then draws
PNGs of them into bench/results/<full|quick>/plots/. BENCHMARKS.md summarises the latest
full run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"

FULL: dict[str, list[str]] = {
    "engine": ["bench.bench_engine", "--txs", "5000"],
    "apphash": ["bench.bench_apphash"],
    "flush": ["bench.bench_flush", "--sizes", "100", "1000", "10000"],
    "e2e": ["bench.bench_e2e", "--nodes", "1", "4", "--duration", "20", "--rate", "300"],
    "resources": ["bench.bench_resources", "--memories", "50000"],
    # 100k then 1M memories on both backends; SQLite filled through the Commit path so the
    # same run yields disk bytes and RSS per memory at 1M.
    "read": ["bench.bench_read", "--million", "--canonical"],
    "nonce": ["bench.bench_nonce", "--writers", "1", "8", "64", "--submits", "1000"],
    "statesync": ["bench.bench_statesync", "--net", "100000", "--sizes", "100000", "1000000"],
    # Verified reads: proof bytes and client verify time at 100k and 1M, REST prove cost.
    "proofs": ["bench.bench_proofs", "--sizes", "100000", "1000000", "--node"],
    # Issue 38: the voter's near-copy check (error rates, cost per vote at 10k memories)
    # and verifiable export / offline verification of 10k memories.
    "nearcopy": ["bench.bench_nearcopy", "--node", "--memories", "10000"],
    "bundle": ["bench.bench_bundle", "--memories", "10000"],
}
QUICK: dict[str, list[str]] = {
    "engine": ["bench.bench_engine", "--txs", "500", "--rounds", "1"],
    "apphash": ["bench.bench_apphash", "--quick", "--blocks", "2"],
    "flush": ["bench.bench_flush", "--sizes", "100", "1000", "--no-postgres"],
    "read": ["bench.bench_read", "--quick", "--no-postgres", "--queries", "50",
             "--seconds", "2", "--canonical"],
    "e2e": ["bench.bench_e2e", "--nodes", "1", "--duration", "5", "--rate", "50"],
    "resources": ["bench.bench_resources", "--memories", "2000"],
    "nonce": ["bench.bench_nonce", "--writers", "1", "8", "--submits", "100"],
    "statesync": ["bench.bench_statesync", "--net", "1000", "--sizes", "5000",
                  "--replay-sample", "1000"],
}


def _machine() -> dict[str, Any]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=REPO).stdout.strip()
    return {"commit": commit, "python": platform.python_version(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.platform()}


def run_one(name: str, argv: list[str], out_dir: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                          env=env, cwd=REPO)
    elapsed = round(time.monotonic() - started, 1)
    if proc.returncode != 0:
        raise RuntimeError(f"bench {name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = {"command": " ".join(["python", "-m", *argv]), "wall_s": elapsed,
              "result": json.loads(proc.stdout)}
    (out_dir / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def render_plots(out_dir: Path) -> None:
    """Draw out_dir/plots/*.png; a failure is reported, not fatal (the JSON is recorded)."""
    print("== plots: python -m bench.plots", flush=True)
    proc = subprocess.run([sys.executable, "-m", "bench.plots", "--dir", str(out_dir)],
                          env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO)
    if proc.returncode != 0:
        print(f"   plots failed ({proc.returncode}); rerun: python -m bench.plots --dir "
              f"{out_dir}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="+", default=None)
    args = parser.parse_args()
    suite = QUICK if args.quick else FULL
    out_dir = RESULTS / ("quick" if args.quick else "full")
    out_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"machine": _machine(), "quick": args.quick, "benches": {}}
    previous = out_dir / "summary.json"
    if args.only and previous.exists():
        # Re-running some benches keeps the others' records, each with its own commit.
        kept = json.loads(previous.read_text())
        for name, record in kept.get("benches", {}).items():
            record.setdefault("commit", kept.get("machine", {}).get("commit"))
            summary["benches"][name] = record
    for name, argv in suite.items():
        if args.only and name not in args.only:
            continue
        print(f"== {name}: python -m {' '.join(argv)}", flush=True)
        summary["benches"][name] = {**run_one(name, argv, out_dir),
                                    "commit": summary["machine"]["commit"]}
        print(f"   done in {summary['benches'][name]['wall_s']} s", flush=True)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    render_plots(out_dir)
    print(json.dumps(summary["machine"]))


if __name__ == "__main__":
    main()
