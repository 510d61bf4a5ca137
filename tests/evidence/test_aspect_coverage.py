"""Coverage judges each planned aspect: covered by its words, else by the context holding one of the pages that
speak of it best among the admitted candidates (its own ranking), else missing; an identifier no record holds is
not in the index. Each verdict names the evidence that decided it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from evidence_support import cand, constant_encoder, counting_store, make_chunk

from evidex.config import Config
from evidex.evidence.plan import EvidencePlan, PlanSource
from evidex.pipeline import PipelineParts, SearchOutcome, SearchRequest, run_search
from evidex.signals.compute import coverage
from evidex.signals.coverage import AspectState, CoveredBy, judge_aspect, judge_aspects, own_rank, probe_of
from evidex.types import RetrievalMode

TOKENS = make_chunk("tokens", "The kubelet refreshes projected service account tokens at 80% of their lifetime.",
                    title="Token refresh")
QUOTA = make_chunk("quota", "A resource quota caps the memory a namespace may request.", title="Quotas")
MOUNTS = make_chunk("mounts", "A pod mounts its service account token as a projected volume.", title="Token mounts")
CORPUS = [TOKENS, QUOTA, MOUNTS]
# Shares one word in six with TOKENS and with MOUNTS (below the 0.6 a term match needs), none with QUOTA.
PARAPHRASE = "renewal schedule of the pod identity credentials lifetime"
UNRELATED = "how long credentials stay valid before renewal"  # no word of it in any page


def outcome_for(tmp_path: Path, aspects: tuple[str, ...], context: list[str], ranked: list[str],
                unheld: tuple[str, ...] = ()) -> SearchOutcome:
    """A real outcome whose plan, context and admitted ranking are set to the given pages (by record id)."""
    store = counting_store(tmp_path, CORPUS)
    try:
        outcome = run_search(PipelineParts(store=store, encode=constant_encoder, config=Config()),
                             SearchRequest("How are service account tokens refreshed?", mode=RetrievalMode.BM25))
    finally:
        store.close()
    by_id = {c.record_id: c for c in CORPUS}
    plan = EvidencePlan(families=(), aspects=aspects, source=PlanSource.AUTO, unheld=unheld)
    return dataclasses.replace(outcome, plan=plan, context=tuple(cand(by_id[r], 1.0) for r in context),
                               ranked=tuple(cand(by_id[r], 1.0) for r in ranked), families=())


def test_an_aspect_whose_words_the_context_holds_is_covered_by_terms(tmp_path: Path) -> None:
    outcome = outcome_for(tmp_path, ("namespace memory quota",), ["quota"], ["quota", "tokens"])
    verdict = judge_aspect(outcome, "namespace memory quota", depth=2)
    assert (verdict.status, verdict.by) == (AspectState.COVERED, CoveredBy.TERMS)
    assert verdict.score >= 0.6


def test_a_paraphrase_is_covered_when_its_best_page_is_in_the_context(tmp_path: Path) -> None:
    outcome = outcome_for(tmp_path, (PARAPHRASE,), ["tokens"], ["quota", "tokens", "mounts"])
    verdict = judge_aspect(outcome, PARAPHRASE, depth=2)
    assert (verdict.status, verdict.by, verdict.score) == (AspectState.COVERED, CoveredBy.OWN_RANKING, 0.0)
    # Its words alone would not have covered it; depth 0 judges by the words only.
    assert judge_aspect(outcome, PARAPHRASE, depth=0).status is AspectState.MISSING


def test_the_own_ranking_orders_pages_by_how_well_they_speak_of_the_aspect(tmp_path: Path) -> None:
    """QUOTA ranks first for the question but says nothing of the aspect: TOKENS, then MOUNTS (a tie broken by
    the admitted order), then QUOTA."""
    outcome = outcome_for(tmp_path, (PARAPHRASE,), ["mounts"], ["quota", "tokens", "mounts"])
    probe = probe_of(outcome, PARAPHRASE)
    assert own_rank(probe, outcome.ranked, {"doc-tokens"}) == 0
    assert own_rank(probe, outcome.ranked, {"doc-mounts"}) == 1
    assert own_rank(probe, outcome.ranked, {"doc-quota"}) is None  # it does not speak of the aspect
    assert judge_aspect(outcome, PARAPHRASE, depth=1).status is AspectState.MISSING
    assert judge_aspect(outcome, PARAPHRASE, depth=2).by is CoveredBy.OWN_RANKING


def test_a_page_that_does_not_speak_of_the_aspect_never_covers_it(tmp_path: Path) -> None:
    outcome = outcome_for(tmp_path, (UNRELATED,), ["tokens"], ["tokens", "quota"])
    verdict = judge_aspect(outcome, UNRELATED, depth=10)
    assert (verdict.status, verdict.by, verdict.score) == (AspectState.MISSING, CoveredBy.NOTHING, 0.0)


def test_coverage_reports_each_verdict_beside_the_lists_clients_read(tmp_path: Path) -> None:
    outcome = outcome_for(tmp_path, (PARAPHRASE, UNRELATED), ["tokens"], ["tokens", "quota"],
                          unheld=("TOKEN_TTL_SECONDS",))
    assert [v.status for v in judge_aspects(outcome)] == [AspectState.COVERED, AspectState.MISSING,
                                                          AspectState.NOT_IN_INDEX]
    cov = coverage(outcome)
    assert cov["aspects_covered"] == [PARAPHRASE]
    assert cov["aspects_missing"] == [UNRELATED]
    assert cov["aspects_not_in_index"] == ["TOKEN_TTL_SECONDS"]
    assert cov["ratio"] == round(1 / 3, 4)
    assert cov["aspects"] == [
        {"aspect": PARAPHRASE, "status": "covered", "by": "own-ranking", "score": 0.0},
        {"aspect": UNRELATED, "status": "missing", "by": "nothing", "score": 0.0},
        {"aspect": "TOKEN_TTL_SECONDS", "status": "not-in-index", "by": "no-record", "score": 0.0},
    ]
