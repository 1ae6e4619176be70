"""The recall plots: drawn from bench_recall's reports beside the suite's results, and
skipped (never failing) when those reports are missing."""

from __future__ import annotations

import json
from pathlib import Path

from bench import plots

PNG = b"\x89PNG\r\n\x1a\n"


def _latency(p50: float, p99: float) -> dict[str, float]:
    return {"n": 300, "first_query": p99, "p50": p50, "p99": p99}


def test_recall_plots_from_the_parent_folder(tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    modes = ("text", "semantic", "hybrid")
    kinds = ("common word", "rare word", "paraphrase")
    (tmp_path / "recall_scale_1m.json").write_text(json.dumps({
        "size": 1_000_000, "backend": "sqlite", "write_rate_per_s": 100,
        "latency_ms": {f"{m} / {k}": _latency(5.0, 9.0) for m in modes for k in kinds}}))
    table = {k: {"n": 10, "recall@5": 0.5, "mrr": 0.4}
             for k in ("paraphrase", "keyword", "mixed", "conversation")}
    (tmp_path / "recall.json").write_text(json.dumps({"results": [{
        "embedder": {"name": "wordllama-l2_supercat-128", "dim": 128},
        "modes": {m: table for m in modes}}]}))
    written = {p.name for p in plots.render(full)}
    assert {"recall_latency.png", "recall_quality.png"} <= written
    for name in ("recall_latency.png", "recall_quality.png"):
        assert (full / "plots" / name).read_bytes()[:8] == PNG


def test_recall_plots_skip_without_reports(tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    stale = full / "plots" / "recall_latency.png"
    stale.parent.mkdir()
    stale.write_bytes(PNG)
    written = {p.name for p in plots.render(full)}
    assert not {"recall_latency.png", "recall_quality.png"} & written
    assert not stale.exists()


def test_recall_latency_draws_each_backend_s_latest_run(tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    cells = {f"{m} / {k}": _latency(5.0, 9.0) for m in ("text", "semantic", "hybrid")
             for k in ("common word", "rare word", "paraphrase")}
    for name, backend in (("recall_scale_1m.json", "sqlite"),
                          ("recall_scale_1m_champions.json", "sqlite"),
                          ("recall_scale_1m_pg.json", "postgresql+psycopg")):
        (tmp_path / name).write_text(json.dumps({
            "size": 1_000_000, "backend": backend, "write_rate_per_s": 100,
            "latency_ms": cells}))
    figure = plots.plot_recall_latency(full)
    sources = " ".join(text.get_text() for text in figure.texts)
    assert "recall_scale_1m_champions.json" in sources
    assert "recall_scale_1m_pg.json" in sources
    assert "recall_scale_1m.json" not in sources


def test_the_minilm_latency_plot_names_its_embedder(tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    cells = {f"{m} / {k}": _latency(6.0, 12.0) for m in ("text", "semantic", "hybrid")
             for k in ("common word", "rare word", "paraphrase")}
    command = "bench/bench_recall.py --scale 1000000 --embedders minilm-int8:128"
    for name, backend in (("recall_scale_1m_minilm_int8_128.json", "sqlite"),
                          ("recall_scale_1m.json", "sqlite")):
        (tmp_path / name).write_text(json.dumps({
            "size": 1_000_000, "backend": backend, "write_rate_per_s": 100,
            "latency_ms": cells, "command": command if "minilm" in name else ""}))
    figure = plots.plot_recall_latency_minilm(full)
    titles = " ".join(ax.get_title() for ax in figure.axes)
    assert "minilm-int8:128" in titles and "SQLite" in titles
    assert "wordllama" in " ".join(ax.get_title() for ax in plots.plot_recall_latency(full).axes)
