"""PNG plots of recorded benchmark results, for the figures where a curve says more than a table.

    .venv/bin/python -m bench.plots             # bench/results/full  -> bench/results/full/plots
    .venv/bin/python -m bench.plots --quick     # bench/results/quick -> bench/results/quick/plots
    .venv/bin/python -m bench.plots --dir DIR   # any results directory -> DIR/plots

Reads the JSON that bench/run.py writes (each file is {"command", "wall_s", "result"}).
A plot whose inputs are missing or incomplete is skipped with a printed note (and any
stale PNG of that name removed); this never fails. bench/run.py calls it after each run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib import style  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

# Applied on top of matplotlib's own defaults.
STYLE: dict[str, Any] = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
    "axes.spines.right": False, "savefig.dpi": 120,
}
COLORS = {"sqlite": "#1f77b4", "postgresql": "#d62728", "memledger": "#1f77b4",
          "kvstore": "#7f7f7f", "app_hash": "#2ca02c", "commit": "#9467bd"}
BACKEND_LABEL = {"sqlite": "SQLite (FTS5)", "postgresql": "PostgreSQL (tsvector + GIN)"}
QUERY_LABEL = {"common_1_word": "common word", "rare_1_word": "rare word",
               "mixed_2_words": "two words"}


class Skip(Exception):
    """Raised by a plotter when its inputs are not there."""


def _load(path: Path) -> Any:
    """The `result` of one results file (or the whole document if it has none); None if absent."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc.get("result", doc) if isinstance(doc, dict) else None


def _source(results: Path, name: str) -> str:
    """`name.json`, plus the commit it was measured at when summary.json vouches for it."""
    summary = _load(results / "summary.json") or {}
    bench = summary.get("benches", {}).get(name) if isinstance(summary, dict) else None
    commit = summary.get("machine", {}).get("commit") if isinstance(summary, dict) else None
    if isinstance(bench, dict):
        commit = bench.get("commit", commit)  # `run.py --only` records it per bench
    if bench and commit and bench.get("result") == _load(results / f"{name}.json"):
        return f"{name}.json @ {commit}"
    return f"{name}.json"


def _fmt(value: float) -> str:
    """A value label: 1,234 / 56 / 7.8."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def _size(n: int) -> str:
    """100000 -> 100k, 1000000 -> 1M."""
    for div, unit in ((1_000_000, "M"), (1_000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def _figure(width: float, height: float, title: str, footnote: str) -> Figure:
    """A pyplot-free figure with a bold title and a small source note bottom right."""
    fig = Figure(figsize=(width, height), layout="constrained")
    fig.suptitle(title, fontweight="bold")
    fig.supxlabel(f"source: {footnote}", x=0.995, ha="right", fontsize=7, color="#666666")
    return fig


def _plain_log_y(ax: Axes) -> None:
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def _log_x(ax: Axes, xs: list[int]) -> None:
    ax.set_xscale("log")
    ax.set_xticks(xs, [f"{x:,}" for x in xs])
    ax.minorticks_off()
    ax.set_xlim(xs[0] / 2, xs[-1] * 2)


def _label_points(ax: Axes, xs: list[int], ys: list[float], color: str,
                  series: list[list[float]], dx: int = 0) -> None:
    """Value labels above each point if it is the top one of `series`, else below.

    `dx` > 0 moves them right of the point (clear of error-bar whiskers).
    """
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        top = y >= max(other[i] for other in series)
        ax.annotate(_fmt(y), (x, y), textcoords="offset points",
                    xytext=(dx, (2 if dx else 7) * (1 if top else -1)),
                    ha="left" if dx else "center", va="bottom" if top else "top", fontsize=8,
                    color=color)


def _label_bars(ax: Axes, bars: Any) -> None:
    ax.bar_label(bars, labels=[_fmt(b.get_height()) for b in bars], padding=2, fontsize=8)


def plot_flush(results: Path) -> Figure:
    """Projection flush per block and per tx vs block size, one line per backend."""
    rows = (_load(results / "flush.json") or {}).get("results") or []
    rows = sorted(rows, key=lambda r: r["txs"])
    backends = [b for b in ("sqlite", "postgres") if rows and all(f"{b}_ms" in r for r in rows)]
    if not backends:
        raise Skip("flush.json missing or has no per-backend timings")
    xs = [int(r["txs"]) for r in rows]
    ms = {b: [float(r[f"{b}_ms"]) for r in rows] for b in backends}
    us = {b: [float(r[f"{b}_us_per_tx"]) for r in rows] for b in backends}
    fig = _figure(10, 4.2, "SQL projection flush vs block size", _source(results, "flush"))
    per_block, per_tx = fig.subplots(1, 2)
    for b in backends:
        name = "postgresql" if b == "postgres" else b
        label, color = ("PostgreSQL" if b == "postgres" else "SQLite"), COLORS[name]
        per_block.plot(xs, ms[b], "o-", color=color, label=label)
        per_tx.plot(xs, us[b], "o-", color=color, label=label)
        _label_points(per_block, xs, ms[b], color, list(ms.values()))
        _label_points(per_tx, xs, us[b], color, list(us.values()))
    _plain_log_y(per_block)
    every = [v for b in backends for v in ms[b]]
    per_block.set_ylim(min(every) / 2, max(every) * 2)
    per_block.set(title="Flush time per block", xlabel="memory submits per block (log)",
                  ylabel="flush time per block (ms, log)")
    per_tx.set_ylim(0, max(per_tx.get_ylim()[1], 1) * 1.1)
    per_tx.set(title="Flush cost per tx (flat = linear in block size)",
               xlabel="memory submits per block (log)", ylabel="flush time per tx (µs)")
    for ax in (per_block, per_tx):
        _log_x(ax, xs)
        ax.legend(loc="best")
    return fig


def plot_apphash(results: Path) -> Figure:
    """app_hash() and commit() medians (min-max whiskers) vs state size at fixed changes."""
    data = _load(results / "apphash.json") or {}
    rows = sorted(data.get("results") or [], key=lambda r: r["state_keys"])
    if len(rows) < 2:
        raise Skip("apphash.json missing or has fewer than two state sizes")
    xs = [int(r["state_keys"]) for r in rows]
    changes = rows[0]["changes_per_block"]
    ratio = xs[-1] // xs[0]
    growth = ", ".join(f"{what} ×{rows[-1][what]['median_ms'] / rows[0][what]['median_ms']:.1f}"
                       for what in ("app_hash", "commit"))
    fig = _figure(7.5, 4.6, f"App-hash update vs state size ({changes:,} changed keys/block)",
                  _source(results, "apphash"))
    ax = fig.subplots()
    medians = {what: [float(r[what]["median_ms"]) for r in rows] for what in ("app_hash", "commit")}
    for what, label in (("app_hash", "overlay.app_hash() median"),
                        ("commit", "store.commit() median (fsync)")):
        med = medians[what]
        low = [m - float(r[what]["min_ms"]) for m, r in zip(med, rows, strict=True)]
        high = [float(r[what]["max_ms"]) - m for m, r in zip(med, rows, strict=True)]
        ax.errorbar(xs, med, yerr=[low, high], fmt="o-", capsize=4, color=COLORS[what],
                    label=f"{label}; whiskers min–max")
        _label_points(ax, xs, med, COLORS[what], list(medians.values()), dx=10)
    _log_x(ax, xs)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.set(title=f"{ratio}× more state costs {growth} (O(state) would be ×{ratio})",
           xlabel="keys in state (log)", ylabel="time per block (ms)")
    ax.legend(loc="upper left")
    return fig


ENGINE_MODES = (("warm", "warm: verified by CheckTx"),
                ("helper", "helper: verified ahead on a 2nd core"),
                ("inline", "inline: verified on the executing thread"))


def plot_engine(results: Path) -> Figure:
    """FinalizeBlock tx/s as a fraction of the raw verify rate, per signature path."""
    data = _load(results / "engine.json") or {}
    modes = [(m, label) for m, label in ENGINE_MODES if isinstance(data.get(m), dict)]
    if not modes or "raw_ed25519_verify_per_s" not in data:
        raise Skip("engine.json missing or from before the per-mode format")
    verify = data["raw_ed25519_verify_per_s"]
    fig = _figure(8, 4.4, f"FinalizeBlock throughput vs raw Ed25519 verify "
                          f"({verify:,}/s, one core, same run)", _source(results, "engine"))
    ax = fig.subplots()
    width = 0.38
    kinds = (("submit", "memory submits", "#1f77b4"), ("vote", "votes", "#ff7f0e"))
    for i, (kind, label, color) in enumerate(kinds):
        pos = [k + (i - 0.5) * width for k in range(len(modes))]
        bars = ax.bar(pos, [data[m][f"{kind}_ratio_to_verify"] for m, _ in modes], width,
                      color=color, label=f"{data['txs_per_block']:,} {label}")
        ax.bar_label(bars, labels=[f"{data[m][f'{kind}_ratio_to_verify']:.2f}\n"
                                   f"{data[m][f'{kind}_finalize_tx_per_s']:,}/s"
                                   for m, _ in modes], fontsize=8, padding=2)
    ax.axhline(0.8, color="black", ls="--", lw=1, label="target 0.8")
    ax.set_xticks(range(len(modes)), [label.replace(": ", ":\n") for _, label in modes])
    ax.grid(axis="x", visible=False)
    ax.set_ylim(0, max(1.2, ax.get_ylim()[1] * 1.15))
    ax.set(ylabel="block tx/s ÷ raw verify/s")
    ax.legend(loc="upper right")
    return fig


def plot_e2e(results: Path) -> Figure:
    """Committed tx/s and submit→commit latency, memledger vs kvstore, per net size."""
    data = _load(results / "e2e.json") or {}
    nets = data.get("nets") or {}
    names = sorted((n for n in nets if {"memledger", "kvstore"} <= set(nets[n])),
                   key=lambda n: int(n.split("-")[0]) if n.split("-")[0].isdigit() else 0)
    if not names:
        raise Skip("e2e.json missing or has no memledger/kvstore pair")
    apps = ("memledger", "kvstore")
    fig = _figure(11, 4.4, "End to end through CometBFT: memledger vs kvstore (same load)",
                  _source(results, "e2e"))
    thr, lat = fig.subplots(1, 2)
    width = 0.38
    for i, app in enumerate(apps):
        pos = [k + (i - 0.5) * width for k in range(len(names))]
        bars = thr.bar(pos, [nets[n][app]["committed_per_s"] for n in names], width,
                       color=COLORS[app], label=app)
        _label_bars(thr, bars)
    if "rate" in data:
        thr.axhline(data["rate"], color="black", ls="--", lw=1,
                    label=f"offered {data['rate']:,.0f} tx/s")
    thr.set_ylim(0, thr.get_ylim()[1] * 1.3)
    thr.set(title="Committed throughput", ylabel="txs committed per second (tx/s)")
    width = 0.2
    for i, (app, pct) in enumerate((a, p) for a in apps for p in ("p50", "p99")):
        pos = [k + (i - 1.5) * width for k in range(len(names))]
        bars = lat.bar(pos, [nets[n][app]["latency_ms"][pct] for n in names], width,
                       color=COLORS[app], alpha=1.0 if pct == "p50" else 0.55,
                       hatch=None if pct == "p50" else "//", label=f"{app} {pct}")
        _label_bars(lat, bars)
    lat.set_ylim(0, lat.get_ylim()[1] * 1.1)
    lat.set(title="Submit → commit latency", ylabel="latency (ms)")
    ticks = [n.replace("-node", " nodes").replace("1 nodes", "1 node") for n in names]
    ratios = [f"\nmemledger/kvstore = {nets[n]['throughput_ratio']:.2f}"
              if "throughput_ratio" in nets[n] else "" for n in names]
    for ax, labels in ((thr, [t + r for t, r in zip(ticks, ratios, strict=True)]),
                       (lat, ticks)):
        ax.set_xticks(range(len(names)), labels)
        ax.set_xlabel("validators in the net")
        ax.grid(axis="x", visible=False)
    thr.legend(loc="upper center", ncols=3)
    lat.legend(loc="upper left")
    return fig


def _read_search(results: Path) -> tuple[dict[int, dict[str, dict[str, Any]]], list[str]]:
    """{size: {backend: search}} from read.json first, then read_*.json filling gaps."""
    found: dict[int, dict[str, dict[str, Any]]] = {}
    sources: list[str] = []
    files = sorted(results.glob("read*.json"), key=lambda p: (p.stem != "read", p.name))
    for path in files:
        data = _load(path)
        if not isinstance(data, dict):
            continue
        if "backends" in data:
            backends = data["backends"]
        elif "postgres" in path.stem or "sqlite" in path.stem:  # one backend, no wrapper
            backends = {"postgresql" if "postgres" in path.stem else "sqlite": data}
        else:
            continue
        used = False
        for backend, sizes in backends.items():
            for size, entry in sizes.items():
                if "search" in entry and backend not in found.setdefault(int(size), {}):
                    found[int(size)][backend] = entry["search"]
                    used = True
        if used:
            sources.append(path.name)
    return {s: b for s, b in found.items() if b}, sources


def plot_read(results: Path) -> Figure:
    """Full-text search p50 (bar) and p99 (whisker) by query kind and backend, per size."""
    found, sources = _read_search(results)
    if not found:
        raise Skip("no read*.json with search latencies")
    sizes = sorted(found)
    note = " (separate runs: compare with care)" if len(sources) > 1 else ""
    fig = _figure(5 * len(sizes) + 1, 4.6, "Full-text search latency (API query, limit 20)",
                  ", ".join(sources) + note)
    axes = fig.subplots(1, len(sizes), sharey=True, squeeze=False)[0]
    for ax, size in zip(axes, sizes, strict=True):
        backends = [b for b in ("sqlite", "postgresql") if b in found[size]]
        kinds = [k for k in QUERY_LABEL if any(k in found[size][b] for b in backends)]
        width = 0.8 / len(backends)
        for i, backend in enumerate(backends):
            search = found[size][backend]
            ks = [k for k in kinds if k in search]
            pos = [kinds.index(k) + (i - (len(backends) - 1) / 2) * width for k in ks]
            p50 = [float(search[k]["p50_ms"]) for k in ks]
            p99 = [float(search[k]["p99_ms"]) for k in ks]
            ax.bar(pos, p50, width, color=COLORS[backend],
                   label=f"{BACKEND_LABEL.get(backend, backend)}")
            ax.errorbar(pos, p50, yerr=[[0] * len(p50), [h - m for h, m in zip(p99, p50,
                                                                                strict=True)]],
                        fmt="none", ecolor="black", capsize=4, lw=1)
            for x, m, h in zip(pos, p50, p99, strict=True):
                ax.annotate(f"{_fmt(m)}\n/{_fmt(h)}", (x, h), textcoords="offset points",
                            xytext=(0, 3), ha="center", fontsize=7)
        _plain_log_y(ax)
        ax.set_xticks(range(len(kinds)), [QUERY_LABEL[k] for k in kinds])
        ax.grid(axis="x", visible=False)
        ax.set(title=f"{_size(size)} memories", xlabel="query kind")
        ax.legend(loc="upper right", title="bar = p50, whisker = p99 (ms)",
                  title_fontsize=8)
    axes[0].set_ylabel("latency per query (ms, log)")
    low = min(float(s[k]["p50_ms"]) for b in found.values() for s in b.values() for k in s)
    axes[0].set_ylim(low / 2, axes[0].get_ylim()[1] * 4)  # room for labels and legend
    return fig


RECALL_GOAL_MS = 20.0
RECALL_MODES = {"text": "#1f77b4", "semantic": "#2ca02c", "hybrid": "#9467bd"}
RECALL_KINDS = ["common word", "rare word", "paraphrase"]


#: per backend, its 1M runs under writes, latest first (BENCHMARKS.md section 9; on
#: PostgreSQL the run with 1,000 queries per cell, the steadier p99)
RECALL_RUNS = (("recall_scale_1m_one_check_1000q.json", "recall_scale_1m_champions.json",
                "recall_scale_1m.json"),
               ("recall_scale_1m_pg_read_your_writes.json",
                "recall_scale_1m_pg_one_check_1000q_b.json",
                "recall_scale_1m_pg_one_check_1000q.json",
                "recall_scale_1m_pg_one_statement_1000q.json",
                "recall_scale_1m_pg_champions_1000q.json", "recall_scale_1m_pg_champions.json",
                "recall_scale_1m_pg.json"))


def _recall_file(results: Path, name: str) -> tuple[Any, str]:
    """bench_recall's reports are kept beside the suite's results (bench/results/), not
    made by bench/run.py: look in `results`, then its parent."""
    for folder in (results, results.parent):
        data = _load(folder / name)
        if isinstance(data, dict):
            return data, name
    raise Skip(f"no {name}")


#: the same runs with the default embedder (`minilm-int8:128`, since session 15), per backend
RECALL_RUNS_MINILM = (("recall_scale_1m_default.json", "recall_scale_1m_minilm_int8_128.json"),
                      ("recall_scale_1m_pg_minilm_int8_128_b.json",
                       "recall_scale_1m_pg_minilm_int8_128.json"))


def _embedder_of(data: dict[str, Any]) -> str:
    """The embedder a scale run was made with: its recorded command's --embedders, else
    the model its report names, else wordllama (the default when runs named neither)."""
    words = str(data.get("command", "")).split()
    if "--embedders" in words[:-1]:
        return words[words.index("--embedders") + 1]
    recorded = data.get("embedder")
    if isinstance(recorded, dict) and recorded.get("name"):
        return _SPEC_OF.get(str(recorded["name"]), str(recorded["name"]))
    return "wordllama"


#: the config spec of a model name a report records, so panels name models one way
_SPEC_OF = {"all-MiniLM-L6-v2-int8-128": "minilm-int8:128",
            "wordllama-l2_supercat-128": "wordllama"}


def plot_recall_latency(results: Path) -> Figure:
    """Ranked search p50 (bar) and p99 (whisker) per mode and query kind at scale, under
    writes, against the 20 ms p99 goal: one panel per backend's latest recorded run."""
    return _recall_latency(results, RECALL_RUNS, "recall_scale_1m*.json")


def plot_recall_latency_minilm(results: Path) -> Figure:
    """The same with `embedder: "minilm-int8:128"`, the default."""
    return _recall_latency(results, RECALL_RUNS_MINILM,
                           "recall_scale_1m_default.json or *minilm_int8_128.json")


def _recall_latency(results: Path, groups: tuple[tuple[str, ...], ...], wanted: str) -> Figure:
    runs = []
    for names in groups:
        for name in names:  # the latest recorded run of each backend
            try:
                runs.append(_recall_file(results, name))
                break
            except Skip:
                continue
    if not runs:
        raise Skip(f"no {wanted}")
    fig = _figure(5.5 * len(runs) + 0.5, 4.6,
                  "Recall latency at scale, in process, limit 10, under writes",
                  ", ".join(name for _, name in runs))
    axes = fig.subplots(1, len(runs), sharey=True, squeeze=False)[0]
    for ax, (data, _) in zip(axes, runs, strict=True):
        lat = data["latency_ms"]
        modes = [m for m in RECALL_MODES if f"{m} / common word" in lat]
        width = 0.8 / len(modes)
        for i, mode in enumerate(modes):
            pos = [k + (i - (len(modes) - 1) / 2) * width for k in range(len(RECALL_KINDS))]
            p50 = [float(lat[f"{mode} / {kind}"]["p50"]) for kind in RECALL_KINDS]
            p99 = [float(lat[f"{mode} / {kind}"]["p99"]) for kind in RECALL_KINDS]
            ax.bar(pos, p50, width, color=RECALL_MODES[mode], label=mode)
            ax.errorbar(pos, p50, yerr=[[0.0] * len(p50),
                                        [h - m for h, m in zip(p99, p50, strict=True)]],
                        fmt="none", ecolor="black", capsize=3, lw=1)
            for x, h in zip(pos, p99, strict=True):
                ax.annotate(_fmt(h), (x, h), textcoords="offset points", xytext=(0, 2),
                            ha="center", fontsize=7)
        ax.axhline(RECALL_GOAL_MS, color="#d62728", ls="--", lw=1)
        ax.annotate("p99 goal 20 ms", (len(RECALL_KINDS) - 0.5, RECALL_GOAL_MS),
                    ha="right", va="bottom", fontsize=8, color="#d62728")
        _plain_log_y(ax)
        ax.set_xticks(range(len(RECALL_KINDS)), RECALL_KINDS)
        ax.grid(axis="x", visible=False)
        backend = "PostgreSQL" if str(data.get("backend", "")).startswith("postgresql") \
            else "SQLite"
        ax.set(title=f"{_size(int(data['size']))} memories, {backend}, "
                     f"{data.get('write_rate_per_s', 0)} writes/s, {_embedder_of(data)}",
               xlabel="query")
        ax.legend(loc="upper left", title="bar = p50, whisker = p99 (ms)", title_fontsize=8)
    axes[0].set_ylabel("latency per query (ms, log)")
    top = max(float(v["p99"]) for data, _ in runs for v in data["latency_ms"].values())
    low = min(float(v["p50"]) for data, _ in runs for v in data["latency_ms"].values())
    axes[0].set_ylim(low / 2, top * 12)  # room above the whiskers for the legend
    return fig


def plot_recall_quality(results: Path) -> Figure:
    """recall@5 per query kind and mode on the committed evaluation set, per embedder."""
    data, name = _recall_file(results, "recall.json")
    kinds = ["paraphrase", "keyword", "mixed", "conversation"]
    embedders = data["results"]
    fig = _figure(5 * len(embedders) + 0.5, 4.2, "Recall quality: recall@5 on the evaluation set",
                  name)
    axes = fig.subplots(1, len(embedders), sharey=True, squeeze=False)[0]
    for ax, entry in zip(axes, embedders, strict=True):
        modes = [m for m in RECALL_MODES if m in entry["modes"]]
        width = 0.8 / len(modes)
        for i, mode in enumerate(modes):
            pos = [k + (i - (len(modes) - 1) / 2) * width for k in range(len(kinds))]
            bars = ax.bar(pos, [float(entry["modes"][mode][k]["recall@5"]) for k in kinds],
                          width, color=RECALL_MODES[mode], label=mode)
            ax.bar_label(bars, labels=[f"{b.get_height():.2f}" for b in bars], padding=2,
                         fontsize=7)
        ax.set_xticks(range(len(kinds)), kinds)
        ax.grid(axis="x", visible=False)
        ax.set(title=f"{entry['embedder']['name']} ({entry['embedder']['dim']} dims)",
               ylim=(0, 1.15), xlabel="query kind")
        ax.legend(loc="upper right", ncols=3, fontsize=8)
    axes[0].set_ylabel("recall@5")
    return fig


PLOTS: dict[str, Callable[[Path], Figure]] = {
    "engine": plot_engine, "flush": plot_flush, "apphash": plot_apphash, "e2e": plot_e2e,
    "read": plot_read, "recall_latency": plot_recall_latency,
    "recall_latency_minilm": plot_recall_latency_minilm,
    "recall_quality": plot_recall_quality,
}


def render(results: Path, out: Path | None = None) -> list[Path]:
    """Write every plot whose inputs exist under `results` to `out`; returns the PNGs."""
    out = out or results / "plots"
    written: list[Path] = []
    for name, plot in PLOTS.items():
        target = out / f"{name}.png"
        with matplotlib.rc_context():
            style.use(["default", STYLE])  # ignore any user matplotlibrc
            try:
                fig = plot(results)
            except (Skip, KeyError, TypeError, ValueError, IndexError, ZeroDivisionError,
                    AttributeError) as exc:
                reason = exc if isinstance(exc, Skip) else f"{type(exc).__name__}: {exc}"
                print(f"plots: skipped {name}.png ({reason})", flush=True)
                target.unlink(missing_ok=True)
                continue
            out.mkdir(parents=True, exist_ok=True)
            fig.savefig(target, format="png", metadata={"Software": None})
        written.append(target)
        print(f"plots: wrote {target}", flush=True)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="bench/results/quick")
    parser.add_argument("--dir", type=Path, default=None, help="a results directory")
    parser.add_argument("--out", type=Path, default=None, help="default: <dir>/plots")
    args = parser.parse_args(argv)
    results = args.dir or RESULTS / ("quick" if args.quick else "full")
    if not results.is_dir():
        print(f"plots: no results directory {results}; nothing to plot", file=sys.stderr)
        return
    render(results, args.out)


if __name__ == "__main__":
    main()
