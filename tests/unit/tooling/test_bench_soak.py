"""The soak bench's slope and sampling helpers (bench/bench_soak.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.bench_soak import (
    all_slopes,
    disk_bytes,
    fd_count,
    process_sample,
    rss_bytes,
    slope_per_hour,
    slopes,
)


def test_slope_per_hour_of_a_line() -> None:
    ts = [0.0, 10.0, 20.0, 30.0]
    assert slope_per_hour(ts, [5.0 + t * 0.5 for t in ts]) == pytest.approx(1800.0)
    assert slope_per_hour(ts, [7.0] * 4) == 0.0


def test_slope_fits_least_squares_through_noise() -> None:
    ts = [0.0, 3600.0, 7200.0]
    assert slope_per_hour(ts, [0.0, 2.0, 1.0]) == pytest.approx(0.5)


def test_slope_of_too_few_points_is_zero() -> None:
    assert slope_per_hour([], []) == 0.0
    assert slope_per_hour([1.0], [1.0]) == 0.0
    assert slope_per_hour([1.0, 1.0], [1.0, 2.0]) == 0.0


def test_second_half_skips_warm_up() -> None:
    ts = [float(t) for t in range(0, 3600, 60)]
    ys = [t if t < 1800 else 1800.0 for t in ts]  # grows, then flat
    got = slopes(ts, ys)
    assert got["full"] > 1000
    assert got["second_half"] == 0.0


def test_all_slopes_per_node_metric_and_part() -> None:
    samples = [{"t": t, "nodes": {"node0": {"fds": {"app": 10 + t / 360, "total": 50}}}}
               for t in (0.0, 360.0, 720.0, 1080.0)]
    got = all_slopes(samples)
    assert got["node0"]["fds"]["app"]["full"] == pytest.approx(10.0)
    assert got["node0"]["fds"]["total"]["full"] == 0.0


def test_process_sample_reads_this_process(tmp_path: Path) -> None:
    me = os.getpid()
    assert rss_bytes(me) > 1024 * 1024
    before = fd_count(me)
    with open(tmp_path / "f", "w"):
        assert fd_count(me) == before + 1
    rss, fds = process_sample({"app": [me], "voter": [me]})
    assert rss["total"] == pytest.approx(rss["app"] + rss["voter"], abs=0.05)
    assert fds["total"] == fds["app"] + fds["voter"] >= 2
    assert rss["cometbft"] == 0 and fds["cometbft"] == 0


def test_gone_process_reads_as_zero() -> None:
    assert rss_bytes(2**22 + 7) == 0
    assert fd_count(2**22 + 7) == 0


def test_disk_bytes_counts_allocated_blocks(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_bytes(b"\1" * 100_000)
    (tmp_path / "sparse").open("wb").truncate(50_000_000)  # a hole takes no blocks
    assert 100_000 <= disk_bytes(tmp_path) < 1_000_000
    assert disk_bytes(tmp_path / "a" / "x") == disk_bytes(tmp_path / "a")
    assert disk_bytes(tmp_path / "missing") == 0
