#!/usr/bin/env python3
"""Run the test suite one test file per pytest process: `make test` (and so CI) uses this.

A file that passes only because an earlier file left state behind (a key, a memory, a
module-level cache, an imported side effect) fails here, so a green run proves that every
test file passes alone. Output: one line per file as it finishes; the pytest output of any
file that failed (its last 300 lines, all of it in .cache/test-logs/); then totals, the
slowest files and the command that reruns each failure. Exit status 0 only if every file
passed (a file whose tests were all deselected counts as passed).

    scripts/run_tests.py                        # tests/ (unit, fuzz, integration, e2e)
    scripts/run_tests.py tests/unit -j 1        # one unit file at a time (default 2)
    scripts/run_tests.py tests/integration -- -m "not postgres" -x

Arguments after `--` go to every pytest process.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: fast tiers first, so a broken unit test is reported before the nets start
TIERS = ("unit", "fuzz", "integration", "e2e")
#: these start real nodes and nets (timing-sensitive on a small box): one file at a time
SERIAL_TIERS = ("integration", "e2e")
NO_TESTS_COLLECTED = 5  # pytest's exit status when nothing was selected
SHOWN_LINES = 300  # of a failing file's output (node log tails can run to thousands)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b")


@dataclass
class Result:
    path: str
    returncode: int
    seconds: float
    output: str
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return self.returncode in (0, NO_TESTS_COLLECTED)

    def tally(self) -> str:
        return ", ".join(f"{n} {kind}" for kind, n in self.counts.items()) or "no tests"


def discover(paths: list[str]) -> list[Path]:
    """Every test_*.py / *_test.py under `paths` (files taken as given), fast tiers first."""
    found: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.add(path)
        elif path.is_dir():
            found.update(p for p in path.rglob("*.py")
                         if p.name.startswith("test_") or p.name.endswith("_test.py"))
        else:
            raise SystemExit(f"run_tests: no such file or directory: {raw}")

    def order(p: Path) -> tuple[int, str]:
        tier = next((i for i, name in enumerate(TIERS) if name in p.parts), len(TIERS))
        return tier, p.as_posix()

    return sorted(found, key=order)


def parse_counts(output: str) -> Counter[str]:
    """The outcome counts of pytest's final summary line."""
    for line in reversed(output.strip().splitlines()):
        if re.search(r"\bin [\d.]+s\b", line) and _COUNT.search(line):
            counts: Counter[str] = Counter()
            for n, kind in _COUNT.findall(line):
                counts["errors" if kind == "error" else kind] += int(n)
            return counts
    return Counter()


def run_file(path: Path, pytest_args: list[str]) -> Result:
    # No schemathesis pytest plugin: no test uses it (the conformance test runs the `st`
    # CLI) and importing it costs about a second of CPU per process.
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider",
           "-p", "no:schemathesis", path.as_posix(), *pytest_args]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace", stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    return Result(path.as_posix(), proc.returncode, seconds, proc.stdout,
                  parse_counts(proc.stdout))


def _rel(path: Path) -> Path:
    try:
        return path.resolve().relative_to(REPO)
    except ValueError:
        return path


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, pytest_args = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=["tests"],
                        help="test files or directories (default: tests)")
    parser.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("TEST_JOBS", 2)),
                        help="unit and fuzz files run at once (default: $TEST_JOBS or 2); "
                             "integration and e2e files always run one at a time")
    parser.add_argument("--log-dir", default=os.environ.get("TEST_LOG_DIR",
                                                            str(REPO / ".cache" / "test-logs")),
                        help="where the full output of failing files goes "
                             "(default: $TEST_LOG_DIR or .cache/test-logs)")
    args = parser.parse_args(argv)

    files = [_rel(p) for p in discover(args.paths)]
    if not files:
        print("run_tests: no test files found", file=sys.stderr)
        return 1
    width = len(str(len(files)))
    serial = [f for f in files if any(t in f.parts for t in SERIAL_TIERS)]
    parallel = [f for f in files if f not in serial]
    print(f"run_tests: {len(files)} test files, each in its own pytest process "
          f"({len(parallel)} unit/fuzz files {args.jobs} at a time, then {len(serial)} "
          f"integration/e2e files one at a time)", flush=True)
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: list[Result] = []
    lock = threading.Lock()

    def report(result: Result) -> None:
        with lock:
            results.append(result)
            status = "ok  " if result.ok else "FAIL"
            print(f"[{len(results):>{width}}/{len(files)}] {status} {result.seconds:6.1f}s  "
                  f"{result.path}  ({result.tally()})", flush=True)
            if not result.ok:
                log = log_dir / (result.path.replace("/", "__") + ".log")
                log.write_text(result.output)
                lines = result.output.rstrip().splitlines()
                shown = "\n".join(lines[-SHOWN_LINES:])
                cut = (f"[... {len(lines) - SHOWN_LINES} earlier lines in {log} ...]\n"
                       if len(lines) > SHOWN_LINES else "")
                bar = "=" * 30
                print(f"{bar} output of {result.path} (exit {result.returncode}) {bar}\n"
                      f"{cut}{shown}\n{'=' * 78}", flush=True)

    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run_file, f, pytest_args) for f in parallel]
            for future in as_completed(futures):
                report(future.result())
        for f in serial:
            report(run_file(f, pytest_args))
    except KeyboardInterrupt:
        print("\nrun_tests: interrupted", file=sys.stderr)
        return 130

    wall = time.monotonic() - started
    totals: Counter[str] = Counter()
    for r in results:
        totals.update(r.counts)
    failed = sorted((r for r in results if not r.ok), key=lambda r: r.path)
    print(f"\nrun_tests: {len(results)} files in {wall / 60:.1f} min "
          f"(sum of file times {sum(r.seconds for r in results) / 60:.1f} min): "
          f"{', '.join(f'{n} {k}' for k, n in sorted(totals.items())) or 'no tests'}")
    slowest = sorted(results, key=lambda r: r.seconds, reverse=True)[:5]
    print("slowest: " + ", ".join(f"{r.path} {r.seconds:.0f}s" for r in slowest))
    if failed:
        python = Path(sys.executable)
        if python.is_relative_to(REPO):
            python = python.relative_to(REPO)
        print(f"\n{len(failed)} of {len(results)} test files FAILED (each ran alone); rerun with:")
        for r in failed:
            print(f"  {python} -m pytest {r.path} {' '.join(pytest_args)}".rstrip()
                  + f"   # exit {r.returncode}, {r.tally()}")
        return 1
    print(f"all {len(results)} test files passed, each in its own process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
