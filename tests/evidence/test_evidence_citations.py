"""Pages the leading evidence links to (`evidex.evidence.citations`): how links are read and resolved, the
co-citation rule, the reranker's bonus, and that a page the requester may not read steers nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from evidence_support import build_store, cand, constant_encoder, make_chunk

from evidex.admission.gate import AdmissionGate, Principal
from evidex.config import Config
from evidex.evidence.citations import cited_records, link_paths, page_path
from evidex.pipeline import PipelineParts, SearchRequest, run_search
from evidex.rerank.fused import RerankWeights, rerank
from evidex.types import RetrievalMode


def test_a_page_is_named_without_extension_or_section_index() -> None:
    assert page_path("concepts/policy/limit-range.md") == ("concepts", "policy", "limit-range")
    assert page_path("concepts/policy/_index.md") == ("concepts", "policy")
    assert page_path("guide/README.md") == ("guide",)
    assert page_path("/docs/concepts/policy/limit-range/") == ("docs", "concepts", "policy", "limit-range")


def test_links_are_resolved_relative_to_the_citing_page_or_by_their_site_path() -> None:
    chunk = make_chunk("c", source="concepts/policy/resource-quotas.md", text=(
        "See [LimitRange](/docs/concepts/policy/limit-range/#scope), [the task](../../tasks/quota.md), "
        "[a sibling](pod-security.md?x=1), [the API](https://kubernetes.io/docs/reference/api/), "
        '<a href="../security/rbac.html">RBAC</a>, [below](#scope), [mail](mailto:ops@example.org) '
        "and [outside](../../../etc/passwd)."))
    assert link_paths(chunk) == [
        ("docs", "concepts", "policy", "limit-range"),
        ("tasks", "quota"),
        ("concepts", "policy", "pod-security"),
        ("docs", "reference", "api"),
        ("concepts", "security", "rbac"),
    ]


LIMIT_RANGE = make_chunk("lr", "LimitRange defaults", doc_id="lr", source="concepts/policy/limit-range.md")
LIMIT_RANGE_2 = make_chunk("lr2", "LimitRange scope", doc_id="lr", chunk_index=1,
                           source="concepts/policy/limit-range.md")
QUOTA = make_chunk("quota", "Quotas; defaults come from a [LimitRange](/docs/concepts/policy/limit-range/).",
                   doc_id="quota", source="concepts/policy/resource-quotas.md")
STORAGE = make_chunk("storage", "Bound claim sizes with a [LimitRange](../../concepts/policy/limit-range.md).",
                     doc_id="storage", source="tasks/administer-cluster/limit-storage-consumption.md")


def test_a_page_two_leading_pages_link_to_is_cited_by_its_best_ranked_chunk() -> None:
    ranked = [cand(QUOTA, 0.9), cand(STORAGE, 0.8), cand(LIMIT_RANGE_2, 0.5), cand(LIMIT_RANGE, 0.4)]
    assert cited_records(ranked[:2], ranked, min_pages=2) == {"lr2"}
    assert cited_records(ranked[:1], ranked, min_pages=2) == frozenset()  # one citing page is not enough
    assert cited_records(ranked[:1], ranked, min_pages=1) == {"lr2"}
    assert cited_records(ranked[:2], ranked, min_pages=0) == frozenset()  # off


def test_two_chunks_of_one_page_and_a_page_linking_to_itself_count_once_or_not_at_all() -> None:
    quota_2 = make_chunk("quota2", "Also see [LimitRange](/docs/concepts/policy/limit-range/).", doc_id="quota",
                         chunk_index=1, source="concepts/policy/resource-quotas.md")
    self_link = make_chunk("lr3", "Back to [this page](/docs/concepts/policy/limit-range/).", doc_id="lr",
                           chunk_index=2, source="concepts/policy/limit-range.md")
    ranked = [cand(QUOTA, 0.9), cand(quota_2, 0.8), cand(self_link, 0.7), cand(LIMIT_RANGE, 0.4)]
    assert cited_records(ranked[:3], ranked, min_pages=2) == frozenset()


def test_the_cited_bonus_raises_only_the_cited_candidate() -> None:
    weights = RerankWeights(cross_encoder=0.0, retrieval=0.8, lexical=0.3, title=0.1, linked=0.3,
                            exact_token_bonus=0.0, cross_encoder_top_n=0, cited_bonus=0.2)
    pool = [cand(QUOTA, 0.9), cand(STORAGE, 0.8), cand(LIMIT_RANGE, 0.4)]
    plain = {c.chunk.record_id: c.score for c in rerank("limitrange defaults", pool, weights).candidates}
    boosted = {c.chunk.record_id: c.score for c in rerank("limitrange defaults", pool, weights,
                                                          cited=frozenset({"lr"})).candidates}
    assert boosted["lr"] == plain["lr"] + 0.2
    assert boosted["quota"] == plain["quota"] and boosted["storage"] == plain["storage"]


AT = datetime(2026, 1, 1, tzinfo=UTC)
READER = Principal.of("reader", ["public"])


def _cited_in_trace(tmp_path: Path, quota_labels: tuple[str, ...]) -> list[str]:
    quota = make_chunk("quota", "namespace quota defaults: see [LimitRange](/docs/concepts/policy/limit-range/)",
                       doc_id="quota", source="concepts/policy/resource-quotas.md", labels=quota_labels)
    storage = make_chunk("storage", "namespace quota storage: see [LimitRange](../../concepts/policy/limit-range.md)",
                         doc_id="storage", source="tasks/administer-cluster/limit-storage-consumption.md")
    limit_range = make_chunk("lr", "LimitRange sets per-container bounds in a namespace", doc_id="lr",
                             source="concepts/policy/limit-range.md")
    store = build_store(tmp_path / "idx", [quota, storage, limit_range])
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate())
        outcome = run_search(parts, SearchRequest("namespace quota", k=2, principal=READER, retrieved_at=AT,
                                                  mode=RetrievalMode.BM25))
        rescue = next(s for s in outcome.trace.stages if s.name == "rescue")
        bonus = {c.chunk.record_id: dict(c.scores)["bonus"] for c in outcome.ranked}
        assert bonus["lr"] == (0.2 if "lr" in rescue.decisions["cited"] else 0.0)
        return list(rescue.decisions["cited"])
    finally:
        store.close()


def test_links_of_readable_leading_pages_cite_and_a_restricted_page_steers_nothing(tmp_path: Path) -> None:
    assert _cited_in_trace(tmp_path / "open", ("public",)) == ["lr"]
    # The quota page links to the LimitRange page too, but the requester may not read it: one citing page.
    assert _cited_in_trace(tmp_path / "restricted", ("security-team",)) == []
