"""How `evidex eval` judges confidence as a probability and the decision as an agent feels it: ECE, Brier and
balanced accuracy counted by hand on a few answers whose truth is known, the reliability diagram drawn from
them, and the table that shows them."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from evidex.errors import BackendUnavailable
from evidex.evaluation.datasets import Question
from evidex.evaluation.metrics import balanced_accuracy, brier, ece, reliability_bins
from evidex.evaluation.plots import write_reliability_diagrams
from evidex.evaluation.signal_check import check_signals
from evidex.interfaces.cli import app
from evidex.interfaces.render import render_eval


def test_ece_weighs_each_bins_gap_by_its_share() -> None:
    # Bin 0.9-1.0: 0.95 and 0.95 stated, one of two true: gap 0.45, weight 2/5. Bin 0.2-0.3: 0.25 stated,
    # false: gap 0.25, weight 1/5. Bin 0.6-0.7: 0.6 and 0.7 (0.65 mean), both true: gap 0.35, weight 2/5.
    probs = [0.95, 0.95, 0.25, 0.6, 0.7]
    truth = [True, False, False, True, True]
    expected = (2 * 0.45 + 1 * 0.25 + 2 * 0.35) / 5
    assert ece(probs, truth) == pytest.approx(expected, abs=1e-12)
    assert ece([], []) is None


def test_a_probability_of_one_falls_in_the_last_bin_and_zero_in_the_first() -> None:
    bins = reliability_bins([1.0, 0.0, 0.1], [True, False, True])
    assert bins[9] == (1, 1.0, 1.0)
    assert bins[0] == (1, 0.0, 0.0)
    assert bins[1] == (1, 0.1, 1.0)
    assert sum(n for n, _, _ in bins) == 3
    assert ece([1.0, 0.0], [True, False]) == 0.0  # said and came true exactly


def test_brier_is_the_mean_squared_gap() -> None:
    assert brier([0.8, 0.3, 1.0], [True, True, False]) == pytest.approx((0.04 + 0.49 + 1.0) / 3, abs=1e-12)
    assert brier([], []) is None


def test_balanced_accuracy_scores_an_always_proceeding_agent_one_half() -> None:
    truth = [True, True, True, False]
    assert balanced_accuracy([True] * 4, truth) == 0.5
    # 2 of 3 complete answers proceed, the incomplete one does not: (2/3 + 1) / 2.
    assert balanced_accuracy([True, True, False, False], truth) == pytest.approx(5 / 6, abs=1e-12)
    assert balanced_accuracy([True, False], [True, True]) is None  # no incomplete answer to judge


def answer(confidence: float, action: str) -> dict[str, Any]:
    return {"signals": {"confidence": confidence,
                        "coverage": {"ratio": 1.0, "families_missing": [], "families_found_but_rejected": []}},
            "decision": {"recommendation": {"action": action}}, "cost": {"latency_ms": {"signals": 0.4}}}


def signal_rows() -> list[tuple[Question, dict[str, Any], float, bool]]:
    answers = [(answer(0.95, "proceed"), True), (answer(0.95, "proceed"), False), (answer(0.25, "re-query"), False),
               (answer(0.6, "re-query"), True), (answer(0.7, "stop"), True)]
    return [(Question(id=f"q{i}", text="?", families=()), result, 1.0 if complete else 0.0, complete)
            for i, (result, complete) in enumerate(answers)]


def test_eval_reports_calibration_and_the_decisions_balanced_accuracy() -> None:
    report = check_signals(signal_rows())
    assert report["confidence_ece"] == pytest.approx(0.37, abs=1e-4)  # as counted in the first test
    assert report["confidence_brier"] == pytest.approx(
        (0.05 ** 2 + 0.95 ** 2 + 0.25 ** 2 + 0.4 ** 2 + 0.3 ** 2) / 5, abs=1e-4)
    # Proceed on 1 of 3 complete answers; not on 1 of 2 incomplete ones.
    assert report["decision_balanced_accuracy"] == pytest.approx((1 / 3 + 1 / 2) / 2, abs=1e-4)
    assert report["confidence_reliability"][9] == [2, 0.95, 0.5]
    assert sum(n for n, _, _ in report["confidence_reliability"]) == 5


def eval_report() -> dict[str, Any]:
    row = {"family_recall": 0.8, "all_found": 0.6, "family_recall_pages": 0.8, "all_found_pages": 0.6,
           "ndcg@10": None, "recall@100": None, "mrr": 0.7, "latency_ms": {"p50": 10.0, "p95": 20.0},
           "signals": check_signals(signal_rows())}
    return {"k": 10, "plan": "auto", "questions": 5, "pipelines": {"full": row}}


def test_the_table_shows_ece_brier_and_balanced_accuracy_within_80_columns() -> None:
    out = io.StringIO()
    render_eval(Console(file=out, width=80), eval_report())
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    line = next(line for line in text.splitlines() if line.startswith(" full ") and "0.370" in line)
    for figure in ("0.370", "0.243", "0.333", "0.500", "0.417"):  # ECE, Brier, both rates, balanced
        assert figure in line, figure


def test_a_reliability_diagram_is_written_per_pipeline(tmp_path: Path) -> None:
    report = eval_report()
    report["pipelines"]["hybrid"] = {k: v for k, v in report["pipelines"]["full"].items() if k != "signals"}
    written = write_reliability_diagrams(report, tmp_path / "plots")
    assert written == [tmp_path / "plots" / "reliability-full.png"]  # a plain retriever has no confidence
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_plots_end_to_end(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "backups.md").write_text("# Backups\n\nSnapshot the etcd cluster nightly and keep seven copies.\n")
    (corpus / "quota.md").write_text("# Quotas\n\nA resource quota caps namespace memory.\n")
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"id": "a", "question": "How often is etcd snapshotted?",
         "families": [{"name": "backups", "source_regex": r"^backups\.md$"}]},
        {"id": "b", "question": "What caps namespace memory?",
         "families": [{"name": "quotas", "source_regex": r"^quota\.md$"}]}]) + "\n")
    env = {"EVIDEX_EMBEDDING_CACHE_DIR": str(cache_dir), "EVIDEX_CONFIG": None}
    result = CliRunner().invoke(app, ["eval", "--corpus", str(corpus), "--questions", str(questions), "--pipelines",
                                      "hybrid,full", "--plots", str(tmp_path / "plots")], env=env)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "plots" / "reliability-full.png").is_file()
    assert not (tmp_path / "plots" / "reliability-hybrid.png").exists()
    assert "balanced accuracy" in result.stdout


def test_without_matplotlib_the_error_names_the_install_command(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an install without the extra sees
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(BackendUnavailable, match=r"pip install 'evidex\[plots\]'"):
        write_reliability_diagrams(eval_report(), tmp_path)
    result = CliRunner().invoke(app, ["eval", "--corpus", str(tmp_path), "--questions", str(tmp_path / "q.jsonl"),
                                      "--plots", str(tmp_path / "plots")], env={"EVIDEX_CONFIG": None})
    assert result.exit_code != 0 and "evidex[plots]" in result.output  # before any index is built
    assert not (tmp_path / "plots").exists()
