"""`evidex bench --chunks A,B --json F --plots D`: every size measured in its own processes, with the same keys,
the approximate dense index forced on at the larger size; a tiny run (timings are not asserted)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evidex.evaluation.bench_plots import PLOT_FILE
from evidex.evaluation.bench_report import dominant_stage
from evidex.interfaces.cli import app

pytestmark = pytest.mark.slow


def test_bench_at_two_sizes_writes_one_entry_per_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("faiss")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evidex.toml").write_text("[index]\nann_min_chunks = 500\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["bench", "--chunks", "400,800", "--queries", "12", "--json", "report.json",
                                      "--plots", "plots", "--config", "evidex.toml"])
    assert result.exit_code == 0, result.output
    sizes = json.loads((tmp_path / "report.json").read_text())["sizes"]
    assert set(sizes) == {"400", "800"}
    assert set(sizes["400"]) == set(sizes["800"])
    assert sizes["400"]["approximate"] is False and sizes["800"]["approximate"] is True
    for figures in sizes.values():
        assert figures["peak_rss_mb"] > 0 and figures["disk_mb"] > 0
        for mode in ("hybrid", "full", "filtered_1pct", "filtered_10pct", "filtered_50pct", "hybrid_filter"):
            latency = figures["latency_ms"][mode]
            assert 0 < latency["p50"] <= latency["p95"], mode
        for key in ("ann_recall_at_10", "filtered_1pct_recall_at_10", "filtered_50pct_hybrid_recall_at_10"):
            assert 0.9 <= figures[key] <= 1.0 and not math.isnan(figures[key]), key
        assert dominant_stage(figures) in ("bm25 search", "dense search", "pipeline stages after retrieval")
    assert 0 < sizes["800"]["filter_shares"]["filtered_10pct"] < sizes["800"]["filter_shares"]["filtered_50pct"]
    assert (tmp_path / "plots" / PLOT_FILE).stat().st_size > 10_000
    assert "6. Cost as the index grows" in result.output


def test_bench_refuses_a_size_that_is_not_a_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["bench", "--chunks", "10k"])
    assert result.exit_code == 2 and "comma-separated" in result.output
