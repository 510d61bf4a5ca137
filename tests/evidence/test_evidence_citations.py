"""Pages the leading evidence links to (`evidex.evidence.citations`): how links are read and resolved, the
co-citation rule, the reranker's bonus, and that a page the requester may not read steers nothing; and what
other pages say around their links to a page (`evidex.retrieval.links`), the reranker's inlink match."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from evidence_support import build_store, cand, constant_encoder, fill, make_chunk

from evidex.admission.gate import AdmissionGate, Principal
from evidex.config import Config
from evidex.evidence.citations import cited_records
from evidex.pipeline import PipelineParts, SearchRequest, run_search
from evidex.rerank.fused import RerankWeights, inlink_score, rerank
from evidex.retrieval.corpus import inlink_contexts
from evidex.retrieval.links import LinkIndex, link_contexts, link_paths, page_path
from evidex.types import RetrievalMode, SearchFilters


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
        cite = next(s for s in outcome.trace.stages if s.name == "cite")
        bonus = {c.chunk.record_id: dict(c.scores)["bonus"] for c in outcome.ranked}
        assert bonus["lr"] == (0.2 if "lr" in cite.decisions["cited"] else 0.0)
        return list(cite.decisions["cited"])
    finally:
        store.close()


def test_links_of_readable_leading_pages_cite_and_a_restricted_page_steers_nothing(tmp_path: Path) -> None:
    assert _cited_in_trace(tmp_path / "open", ("public",)) == ["lr"]
    # The quota page links to the LimitRange page too, but the requester may not read it: one citing page.
    assert _cited_in_trace(tmp_path / "restricted", ("security-team",)) == []


# ---- link contexts: what other pages say around their links to a page ----------------------------------------
LOGGING = make_chunk("logging", "Logs are collected on each host. To run a logging agent on every node, use a "
                     "[DaemonSet](/docs/concepts/workloads/controllers/daemonset/) that mounts /var/log.",
                     doc_id="logging", source="concepts/cluster-administration/logging.md")
DAEMONSET = make_chunk("ds", "A DaemonSet ensures that all Nodes run a copy of a Pod.", doc_id="ds",
                       source="concepts/workloads/controllers/daemonset.md")
DEPLOYMENT = make_chunk("deploy", "A Deployment runs replicas of a Pod; roll them out, and see the logging agent "
                        "section of [this page](#agents).", doc_id="deploy",
                        source="concepts/workloads/controllers/deployment.md")


def test_a_link_context_is_the_words_around_a_link_without_its_markup() -> None:
    text = ('Pods need [Secrets](../configuration/secret.md) to start; see <a href="/docs/tasks/debug/">debugging</a> '
            "or [this section](#local) and [itself](/docs/concepts/pods/pod/).")
    assert link_contexts("concepts/pods/pod.md", text, words=3) == [
        (("concepts", "configuration", "secret"), "Pods need Secrets to start; see"),
        (("docs", "tasks", "debug"), "to start; see debugging or this"),  # an HTML link's text follows its tag
    ]


def test_a_page_is_found_by_what_other_pages_say_around_their_links_to_it() -> None:
    index = LinkIndex([(c.record_id, c.source, c.text) for c in (LOGGING, DAEMONSET, DEPLOYMENT)])
    found = index.contexts([DAEMONSET.source, DEPLOYMENT.source, LOGGING.source], lambda record_id: True)
    assert list(found) == [DAEMONSET.source]
    assert "run a logging agent on every node" in found[DAEMONSET.source][0]
    assert index.contexts([DAEMONSET.source], lambda record_id: record_id != "logging") == {}
    scores = inlink_score("how do I run a logging agent on every node?", found,
                          [DEPLOYMENT.source, DAEMONSET.source, LOGGING.source])
    assert scores == {DEPLOYMENT.source: 0.0, DAEMONSET.source: 1.0, LOGGING.source: 0.0}
    assert inlink_score("rotate the signing keys", found, [DAEMONSET.source]) == {}


def test_the_inlink_match_lifts_the_page_others_describe_and_weighs_nothing_without_links() -> None:
    weights = RerankWeights(cross_encoder=0.0, retrieval=0.8, lexical=0.3, title=0.1, linked=0.3,
                            exact_token_bonus=0.0, cross_encoder_top_n=0, inlink=0.5)
    pool = [cand(DEPLOYMENT, 0.55), cand(DAEMONSET, 0.5), cand(LOGGING, 0.4)]
    query = "how do I run a logging agent on every node?"
    inlinks = {DAEMONSET.source: [c for _, c in link_contexts(LOGGING.source, LOGGING.text)]}
    plain = rerank(query, pool, weights)
    lifted = rerank(query, pool, weights, inlinks=inlinks)
    assert "inlink" not in plain.weights and lifted.weights["inlink"] == round(0.5 / 1.7, 4)
    assert [c.chunk.record_id for c in plain.candidates].index("ds") > 0
    assert lifted.candidates[0].chunk.record_id == "ds"
    assert rerank(query, pool, weights, inlinks={}).candidates == plain.candidates


def test_the_store_keeps_link_contexts_of_live_readable_records_per_snapshot(tmp_path: Path) -> None:
    secret = make_chunk("secret-link", "the break-glass vault of the [DaemonSet](/docs/concepts/workloads/controllers"
                        "/daemonset/) team", doc_id="secret", source="security/notes.md", labels=("security-team",))
    store = build_store(tmp_path / "idx", [LOGGING, DAEMONSET, secret])
    try:
        everyone = inlink_contexts(store, [DAEMONSET.source, LOGGING.source])
        assert sorted(len(v) for v in everyone.values()) == [2] and list(everyone) == [DAEMONSET.source]
        public = inlink_contexts(store, [DAEMONSET.source], SearchFilters(access_labels=("public",)))
        assert len(public[DAEMONSET.source]) == 1 and "break-glass" not in public[DAEMONSET.source][0]
        # Rewritten without its link, the logging page says nothing of the DaemonSet page any more ...
        fill(store, [make_chunk("logging-2", "Logs are collected on each host.", doc_id="logging",
                                source=LOGGING.source)], batch_id="b-rewrite")
        assert inlink_contexts(store, [DAEMONSET.source], SearchFilters(access_labels=("public",))) == {}
        # ... until that batch is rolled back.
        store.rollback()
        assert inlink_contexts(store, [DAEMONSET.source], SearchFilters(access_labels=("public",))) == public
    finally:
        store.close()


def _scores_seen_by_reader(directory: Path, restricted_text: str) -> dict[str, float]:
    rotation = make_chunk("b", "Signing keys rotate monthly; the zebra runbook lists the steps.", doc_id="b",
                          source="ops/rotation.md")
    other = make_chunk("c", "Zebra crossings and keys of the office.", doc_id="c", source="ops/office.md")
    restricted = make_chunk("a", restricted_text, doc_id="a", source="security/vault.md", labels=("security-team",))
    store = build_store(directory, [rotation, other, restricted])
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate())
        outcome = run_search(parts, SearchRequest("zebra protocol keys", k=2, principal=READER, retrieved_at=AT,
                                                  mode=RetrievalMode.BM25))
        return {c.chunk.record_id: c.score for c in outcome.ranked}
    finally:
        store.close()


def test_what_a_restricted_page_says_around_its_links_moves_no_readable_score(tmp_path: Path) -> None:
    """A page the requester may not read links the rotation page with words of the question around the link:
    the readable pages' scores are those of an index where it says nothing of it."""
    linking = _scores_seen_by_reader(tmp_path / "linking", "The zebra protocol keys are handled by the "
                                                         "[rotation runbook](/docs/ops/rotation/).")
    silent = _scores_seen_by_reader(tmp_path / "silent", "The zebra protocol keys are handled elsewhere.")
    assert linking == silent and "b" in linking and "a" not in linking
