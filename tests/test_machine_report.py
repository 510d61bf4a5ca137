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
