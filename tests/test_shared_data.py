"""Regression checks on the shared development data (../shared/data beside the clone, as CI has it).

A user's fresh machine has no shared data: these tests then skip and say why. The k8s index is built
once (about 3,600 chunks) and cached under the evaluation cache, like `evidex eval` does.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from evidex.admission.gate import Principal
from evidex.config import Config
from evidex.evaluation.datasets import load_questions
from evidex.evaluation.runner import evaluate, open_eval_engine

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
EVAL = Path(__file__).resolve().parents[1] / "eval"
BLIND_SETS = [line for raw in (EVAL / "blind_sets.txt").read_text(encoding="utf-8").splitlines()
              if (line := raw.split("#", 1)[0].strip())]  # as eval/dev_sets.py reads it
K8S = DATA / "k8s"
pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.slow,
    pytest.mark.skipif(not (K8S / "docs").is_dir(), reason=f"shared evaluation data not found at {DATA}"),
]


@pytest.fixture(scope="module")
def k8s(cache_dir: Path, embedder: Any) -> Any:
    config = Config().replace(embedding={"cache_dir": str(cache_dir)})
    engine = open_eval_engine(config, [K8S / "docs"], K8S / "overlay.jsonl", embedder=embedder)
    yield engine
    engine.close()


def test_the_oracle_plan_finds_every_family(k8s: Any) -> None:
    questions = load_questions(K8S / "questions.jsonl")[:12]
    report = evaluate(k8s, questions, ["hybrid", "full"], k=10, plan="oracle")
    assert report["pipelines"]["full"]["all_found"] == 1.0
    assert report["machine"]["cpus"] >= 1 and report["machine"]["cpu"]  # where its latencies were measured
    assert report["pipelines"]["full"]["family_recall"] >= report["pipelines"]["hybrid"]["family_recall"]


def test_the_gate_leaks_nothing_and_reports_rejected_families(k8s: Any) -> None:
    questions = load_questions(K8S / "questions.jsonl")
    report = evaluate(k8s, questions, ["hybrid", "full"], k=10, principal=Principal.of("eval", ["engineering-read"]),
                      retrieved_at=datetime(2026, 11, 30, tzinfo=UTC))
    full = report["pipelines"]["full"]
    assert full["leaks"] == 0
    assert report["pipelines"]["hybrid"]["leaks"] > 0  # the ungated retriever does leak: the check can fail
    assert full["found_but_rejected"]["reported"] == full["found_but_rejected"]["expected"]
    # An automatic plan's aspects are the requester's words: evidence rejected for access only stays unseen.
    assert full["access_withheld"]["withheld"] == full["access_withheld"]["expected"] > 0
    assert full["found_but_rejected"]["expected"] > 0
    assert sum(full["reject_reasons"].values()) > 0


def test_the_leak_check_sees_a_rejected_text_inside_a_result(k8s: Any) -> None:
    """A result is JSON: every newline and quote of a chunk text is escaped there, so the check must read the
    decoded strings. Injecting one multi-line rejected text into a real result must count as one leak."""
    from evidex.evaluation.gate_audit import GateAudit
    from evidex.pipeline import SearchRequest

    who, at = Principal.of("eval", ["engineering-read"]), datetime(2026, 11, 30, tzinfo=UTC)
    audit = GateAudit.build(k8s, who, at)
    result = k8s.result_of(k8s.run(SearchRequest(load_questions(K8S / "questions.jsonl")[0].text,
                                                 principal=who, retrieved_at=at)))
    assert audit.leaks_in(result) == 0
    secret = next(t for t in audit.secret_texts.values() if "\n" in t and '"' in t)
    result["evidence"][0]["chunks"][0]["text"] = secret
    assert audit.leaks_in(result) == 1


@pytest.mark.parametrize("folder", BLIND_SETS)
def test_the_blind_questions_name_real_pages_and_disjoint_families(folder: str) -> None:
    """Every set of `eval/blind_sets.txt`: every family pattern matches a page of the corpus, and no page belongs to
    two families of one question (a question that could be completed by one page would measure nothing)."""
    pages = [p.relative_to(K8S / "docs").as_posix() for p in (K8S / "docs").rglob("*.md")]
    questions = load_questions(EVAL / folder / "questions.jsonl")
    assert len(questions) == 24 and len({q.id for q in questions}) == 24
    for q in questions:
        owners: dict[str, str] = {}
        for family in q.families:
            assert family.source_regex is not None
            matched = [p for p in pages if re.search(family.source_regex, p)]
            assert matched, f"{q.id}: {family.name} matches no page"
            for page in matched:
                assert owners.setdefault(page, family.name) == family.name, f"{q.id}: {page} in two families"


def test_every_blind_set_folder_is_listed() -> None:
    """A set added to eval/ but not to eval/blind_sets.txt would silently drop out of every blind-set run."""
    folders = sorted(p.parent.name for p in EVAL.glob("*/questions.jsonl"))
    assert sorted(BLIND_SETS) == folders and len(set(BLIND_SETS)) == len(BLIND_SETS)
