"""Smoke test of `evidex.evaluation.bench`: a tiny run of every part, checking the report's shape.

Timings are not asserted (the machine is shared); only that every figure is there and positive.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from evidex.config import Config
from evidex.embedding.protocol import Embedder
from evidex.evaluation.bench import run_bench
from evidex.evaluation.bench_report import format_bench

pytestmark = pytest.mark.slow

TOPICS = ["deployments", "services", "volumes", "secrets", "ingress"]


def _write_docs(root: Path) -> Path:
    docs = root / "docs"
    for i, topic in enumerate(TOPICS):
        body = "\n\n".join(
            f"## Part {j}\n\n" + " ".join(f"The {topic} controller step {j}.{k} reconciles state, retries "
                                          f"on conflict and records an event." for k in range(12))
            for j in range(3))
        page = docs / ("concepts" if i % 2 else "tasks") / f"{topic}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"---\ntitle: About {topic}\n---\n# About {topic}\n\n{body}\n", encoding="utf-8")
    questions = [{"id": f"q{i}", "question": f"How do {t} retry on conflict?"} for i, t in enumerate(TOPICS)]
    lines = "".join(json.dumps(q) + "\n" for q in questions)
    (root / "questions.jsonl").write_text(lines, encoding="utf-8")
    return docs


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _latency_ok(stats: dict[str, Any], n: int) -> None:
    assert stats["n"] == n
    for key in ("p50_ms", "p95_ms", "mean_ms"):
        assert _positive(stats[key]), (key, stats)
    assert stats["p50_ms"] <= stats["p95_ms"]


def test_bench_smoke(tmp_path: Path, embedder: Embedder, cache_dir: Path) -> None:
    docs = _write_docs(tmp_path)
    config = Config().replace(index={"path": str(tmp_path / "unused")},
                              embedding={"cache_dir": str(cache_dir)})
    lines: list[str] = []
    report = run_bench(config, docs=docs, questions=tmp_path / "questions.jsonl", synthetic_chunks=2000, queries=20,
                       log=lines.append, embedder=embedder, embed_rounds=1, synthetic_batch_chunks=1000,
                       workdir=tmp_path / "work")

    assert {"environment", "goals", "embedding", "docs_latency", "synthetic", "memory", "bm25s", "checks",
            "total_s"} <= set(report)
    assert "noisy" in report["environment"]["note"]

    emb = report["embedding"]
    assert emb["documents"] == len(TOPICS) and emb["chunks"] >= len(TOPICS)
    assert emb["ingest_rounds"][0]["embedded"] == emb["chunks"]  # the empty cache made ingest really embed
    for key in ("raw_chunks_per_s", "ingest_chunks_per_s", "ratio", "raw_one_sorted_call_chunks_per_s"):
        assert _positive(emb[key]), key

    lat = report["docs_latency"]
    assert lat["queries"] == 20 and lat["distinct_queries"] == len(TOPICS)
    assert lat["query_source"].endswith("questions.jsonl")
    assert set(lat["modes"]) == {"bm25", "dense", "hybrid"}
    for stats in lat["modes"].values():
        _latency_ok(stats, 20)
    _latency_ok(lat["query_encoding"], 20)

    syn = report["synthetic"]
    assert syn["chunks"] == 2000 and syn["documents"] > 0 and syn["commit_batches"] == 2
    assert _positive(syn["build_chunks_per_s"]) and _positive(syn["index_mb"])
    assert set(syn["modes"]) == {"bm25", "dense", "hybrid", "hybrid+filter"}
    for stats in syn["modes"].values():
        _latency_ok(stats, 20)
    for stages in syn["hybrid_stages_ms"].values():
        assert set(stages) == {"dense_search", "bm25_search", "fusion", "fetch_chunks", "total"}
        _latency_ok(stages["total"], 20)
    assert 0 < syn["filter"]["passing_share"] < 1
    assert _positive(syn["fts_matching_chunks_per_query"]["mean"])

    mem = report["memory"]
    for key in ("ru_maxrss_mb", "rss_before_synthetic_mb", "rss_after_synthetic_mb",
                "rss_peak_synthetic_sampled_mb", "ru_maxrss_after_bm25s_mb"):
        assert _positive(mem[key]), key

    bm = report["bm25s"]
    if "skipped" not in bm:
        assert _positive(bm["build_s"])
        _latency_ok(bm["latency"], 20)

    expected_checks = {"ingest_over_raw", "hybrid_p50_at_2000", "hybrid_p95_at_2000", "peak_memory"}
    assert expected_checks <= set(report["checks"])
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())  # temp indexes deleted
    assert lines  # progress was logged

    table = format_bench(report)
    for part in ("1. Embedding", "2. Query latency", "3. Synthetic", "4. Memory", "5. bm25s", "Goals",
                 "noisy"):
        assert part in table, part


def test_bench_without_docs(tmp_path: Path) -> None:
    """No documents: the embedding parts are skipped, the synthetic parts still run (no model needed)."""
    report = run_bench(Config(), docs=None, synthetic_chunks=300, queries=5, log=lambda _: None,
                       synthetic_batch_chunks=200, workdir=tmp_path)
    assert "skipped" in report["embedding"] and "skipped" in report["docs_latency"]
    assert "--docs" in report["docs_latency"]["skipped"]
    assert report["synthetic"]["chunks"] == 300 and report["synthetic"]["commit_batches"] == 2
    assert "ingest_over_raw" not in report["checks"]
    assert "skipped" in format_bench(report)


def test_bench_asks_the_page_titles_without_a_questions_file(tmp_path: Path, embedder: Embedder,
                                                              cache_dir: Path) -> None:
    docs = _write_docs(tmp_path)
    config = Config().replace(embedding={"cache_dir": str(cache_dir)})
    report = run_bench(config, docs=docs, synthetic_chunks=200, queries=len(TOPICS), log=lambda _: None,
                       embedder=embedder, embed_rounds=1, synthetic_batch_chunks=200, workdir=tmp_path / "work")
    lat = report["docs_latency"]
    assert lat["query_source"] == "document titles"
    assert lat["distinct_queries"] == len(TOPICS)  # one query per page title: "About deployments", ...


@pytest.mark.parametrize(("args", "message"), [
    (["--questions", "q.jsonl"], "give both"),  # questions are asked of a folder of documents
    (["--docs", "missing-folder"], "does not exist"),
])
def test_bench_command_checks_its_folder_before_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from evidex.interfaces.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.jsonl").write_text('{"id": "q1", "question": "How do services retry?"}\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["bench", *args, "--chunks", "10"])
    assert result.exit_code == 2, result.output
    assert message in re.sub(r"[\s│╭╮╰╯─]+", " ", result.output)  # the message, unwrapped from its box
