"""Where a latency was measured: `evidex eval` and `evidex bench` name the machine (cores, CPU model, and
whether it has int8 dot-product instructions), because the same code runs about twice as fast on one 2-core
machine of this project as on another."""

from __future__ import annotations

import io
import os
from pathlib import Path

from rich.console import Console

from evidex.evaluation.measure import machine
from evidex.interfaces.render import render_eval


def test_the_machine_is_read_off_this_one() -> None:
    info = machine()
    assert info["cpus"] == (os.cpu_count() or 1)
    assert isinstance(info["cpu"], str) and info["cpu"]
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        text = cpuinfo.read_text(errors="replace")
        model = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name"))
        assert info["cpu"] == model
        assert info["int8_dot_product"] == any(flag in text.split() for flag in ("avx512_vnni", "avx_vnni", "amx_int8"))


def test_the_eval_table_says_where_its_latency_was_measured() -> None:
    row = {"family_recall": 0.9, "all_found": 0.8, "family_recall_pages": 0.9, "all_found_pages": 0.8,
           "ndcg@10": None, "recall@100": None, "mrr": 1.0, "latency_ms": {"p50": 12.0, "p95": 20.0}}
    report = {"k": 10, "plan": "auto", "questions": 3, "gate": None, "pipelines": {"full": row},
              "machine": {"cpus": 2, "cpu": "AMD EPYC", "int8_dot_product": False, "platform": "Linux"}}
    out = io.StringIO()
    render_eval(Console(file=out, width=200), report)
    assert "latency measured on 2 × AMD EPYC (without int8 dot-product instructions)" in out.getvalue()


def test_the_eval_tables_read_whole_in_an_80_column_terminal() -> None:
    """`eval_all.sh` tees the tables into files at 80 columns, where headers and names read "pipel…", "+rera…",
    "confid…" and "0.872 / 0.688" broke over three lines, and a ninth signals column once pushed the last one
    (what the signals cost) off the table."""
    row = {"family_recall": 0.8507, "all_found": 0.84, "family_recall_pages": 0.8721, "all_found_pages": 0.6875,
           "ndcg@10": 0.7331, "recall@100": 0.9562, "mrr": 0.7028, "latency_ms": {"p50": 14.52, "p95": 21.43},
           "signals": {"confidence_spearman": 0.5298, "confidence_spearman_ceiling": 0.8932, "confidence_auroc": 0.83,
                       "coverage_precision": 0.8694, "coverage_recall": 0.9246, "coverage_auroc": 0.5809,
                       "requery_when_incomplete": 0.3333,
                       "signals_ms": {"p50": 0.57, "p95": 0.9}},
           "leaks": 0, "admissible_family_recall": 0.9557, "found_but_rejected": {"reported": 7, "expected": 7},
           "access_withheld": {"withheld": 3, "expected": 3},
           "reject_reasons": {"expired-at-retrieval-time": 191, "missing-exact-citation-anchor": 88}}
    names = ["bm25", "dense", "hybrid", "+rerank", "+rescue", "+reserve", "+grade", "full"]
    report = {"k": 10, "plan": "auto", "questions": 300, "pipelines": {n: row for n in names},
              "gate": {"principal_labels": ["engineering-read"], "retrieved_at": "2026-11-30T00:00:00+00:00"},
              "machine": {"cpus": 2, "cpu": "AMD EPYC", "int8_dot_product": False, "platform": "Linux"}}
    out = io.StringIO()
    render_eval(Console(file=out, width=80), report)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    for figure in ("0.851 / 0.840", "0.872 / 0.688", "0.733", "0.956", "0.703", "14.5 / 21.4", "0.530", "0.893",
                   "0.830", "0.869 / 0.925", "0.581", "0.333", "0.57", "7 / 7", "3 / 3"):
        assert any(figure in line for line in lines), figure
    for name in names:
        assert any(line.startswith(f" {name} ") for line in lines), name
    assert not [line for line in lines if line.replace("… in 10", "").count("…")]  # its header starts with one
    # A column with nothing to show is left out: no nDCG for page families.
    out = io.StringIO()
    render_eval(Console(file=out, width=80), {**report, "pipelines": {"full": {**row, "ndcg@10": None}}})
    assert "nDCG" not in out.getvalue() and "0.733" not in out.getvalue()
