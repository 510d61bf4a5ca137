"""Constrained top-k (reserve) and CRAG-style grading on tiny inline candidates, with exact expected ids
and the rules that must always hold as hypothesis properties."""

from __future__ import annotations

from evidence_support import cand, ids, make_chunk
from hypothesis import given
from hypothesis import strategies as st

from evidex.evidence.grade import Grade, GradeThresholds, grade, grade_of, supports
from evidex.evidence.plan import RequiredFamily
from evidex.evidence.reserve import reserve
from evidex.types import Candidate

# ---- reserve: exact cases ---------------------------------------------------------------------------


def test_reserve_takes_each_family_first_then_global_rank() -> None:
    a1 = cand(make_chunk("a1", doc_id="A", family="x"), 0.9)
    a2 = cand(make_chunk("a2", doc_id="A", chunk_index=1, family="x"), 0.8)
    b1 = cand(make_chunk("b1", doc_id="B", family="y"), 0.5)
    c1 = cand(make_chunk("c1", doc_id="C", family="z"), 0.3)
    ranked = [a1, a2, b1, c1]
    selection = reserve(ranked, [RequiredFamily("z", "zq", label="z")], k=2, max_per_doc=1)
    assert ids(selection.chunks) == ["a1", "c1"]  # c1 reserved; a2 and b1 cut by k
    assert selection.reserved == {"z": "c1"}
    # without a family the top-k is plain global rank under the per-document cap
    assert ids(reserve(ranked, [], k=3, max_per_doc=1).chunks) == ["a1", "b1", "c1"]
    assert ids(reserve(ranked, [], k=3, max_per_doc=0).chunks) == ["a1", "a2", "b1"]


def test_reserve_reuses_a_chunk_already_chosen_for_another_family() -> None:
    shared = cand(make_chunk("s", family="secrets"), 0.9)
    other = cand(make_chunk("o", family="rbac"), 0.2)
    families = [RequiredFamily("by-label", "q", label="secrets"),
                RequiredFamily("by-doc", "q", doc_ids=("doc-s",)),
                RequiredFamily("rbac", "q", label="rbac")]
    selection = reserve([shared, other], families, k=2)
    assert selection.reserved == {"by-label": "s", "by-doc": "s", "rbac": "o"}
    assert ids(selection.chunks) == ["s", "o"]


def test_reserve_lifts_the_per_document_cap_rather_than_leave_slots_empty() -> None:
    same_doc = [cand(make_chunk(f"p{i}", doc_id="P", chunk_index=i), 1.0 - i / 10) for i in range(4)]
    assert ids(reserve(same_doc, [], k=3, max_per_doc=1).chunks) == ["p0", "p1", "p2"]
    mixed = [*same_doc, cand(make_chunk("q0", doc_id="Q"), 0.05)]
    assert ids(reserve(mixed, [], k=3, max_per_doc=1).chunks) == ["p0", "p1", "q0"]


def test_reserve_prefers_the_chunk_that_covers_an_aspect_most() -> None:
    family = RequiredFamily("transit rotation", "transit rotation", aspect_terms=("transit", "rotat", "rewrap"))
    partial = cand(make_chunk("partial", "transit keys rotat but nothing else", doc_id="D1"), 0.9)
    full = cand(make_chunk("full", "transit rotat and rewrap every row", doc_id="D2"), 0.4)
    noise = cand(make_chunk("noise", "gardening tips", doc_id="D3"), 0.95)
    selection = reserve([noise, partial, full], [family], k=1)
    assert ids(selection.chunks) == ["full"]
    assert selection.reserved == {"transit rotation": "full"}


def test_reserve_with_k_zero_or_no_candidates() -> None:
    c = cand(make_chunk("c", family="x"), 0.5)
    assert reserve([c], [RequiredFamily("x", "q", label="x")], k=0).chunks == ()
    assert reserve([], [RequiredFamily("x", "q", label="x")], k=5).chunks == ()


# ---- reserve: properties ----------------------------------------------------------------------------
LABELS = ["f0", "f1", "f2", "f3"]


@st.composite
def candidate_pools(draw: st.DrawFn) -> list[Candidate]:
    n = draw(st.integers(min_value=0, max_value=14))
    pool = []
    for i in range(n):
        doc = draw(st.sampled_from(["d0", "d1", "d2", "d3"]))
        family = draw(st.sampled_from([None, *LABELS]))
        score = draw(st.floats(min_value=0.0, max_value=1.0, allow_nan=False))
        pool.append(cand(make_chunk(f"r{i:02d}", doc_id=doc, chunk_index=i, family=family), score))
    return sorted(pool, key=lambda c: (-c.score, c.chunk.record_id))


@given(candidate_pools(), st.lists(st.sampled_from(LABELS), unique=True, max_size=4),
       st.integers(min_value=0, max_value=8), st.integers(min_value=0, max_value=2))
def test_reserve_properties(ranked: list[Candidate], labels: list[str], k: int, max_per_doc: int) -> None:
    families = [RequiredFamily(name=f"fam-{x}", rescue_query=x, label=x) for x in labels]
    selection = reserve(ranked, families, k, max_per_doc)
    chosen = list(selection.chunks)
    # never more than k, and never fewer than the candidates allow (the cap is lifted)
    assert len(chosen) == min(k, len(ranked))
    assert len(set(ids(chosen))) == len(chosen)
    assert set(ids(chosen)) <= set(ids(ranked))
    # sorted by score
    assert [c.score for c in chosen] == sorted((c.score for c in chosen), reverse=True)
    # reserved ids are chosen members of their family
    by_id = {c.chunk.record_id: c for c in chosen}
    for family in families:
        if family.name in selection.reserved:
            assert family.matches(by_id[selection.reserved[family.name]].chunk)
    # every family with a member among the candidates is represented when the families fit in k
    if len(families) <= k:
        for family in families:
            if any(family.matches(c.chunk) for c in ranked):
                assert family.name in selection.reserved
                assert any(family.matches(c.chunk) for c in chosen)


# ---- grade: exact cases -----------------------------------------------------------------------------
T = GradeThresholds(correct=0.55, incorrect=0.25)


def test_grade_of_thresholds() -> None:
    chunk = make_chunk("g")
    assert [grade_of(cand(chunk, s), T) for s in (0.55, 0.54, 0.25, 0.249)] == [
        Grade.CORRECT, Grade.AMBIGUOUS, Grade.AMBIGUOUS, Grade.INCORRECT]


def test_grade_removes_noise_restores_a_family_and_reports_one_missing() -> None:
    good = cand(make_chunk("good", "how to rotate the transit key"), 0.9)
    noise = cand(make_chunk("noise", "gardening tips for tomatoes"), 0.1)
    weak_member = cand(make_chunk("weak", "unrelated words only", family="rbac"), 0.1)
    validated = cand(make_chunk("valid", "grant roles", family="rbac"), 0.4)  # ambiguous, not noise
    lonely = cand(make_chunk("lonely", "nothing useful", family="audit"), 0.05)
    selection = [good, noise, weak_member]
    ranked = [good, validated, noise, weak_member, lonely]
    families = [RequiredFamily("rbac", "role grant least privilege", label="rbac"),
                RequiredFamily("audit", "ledger audit event query", label="audit")]
    graded = grade(selection, ranked, families, k=3, t=T)
    assert ids(graded.chunks) == ["good", "valid"]
    assert graded.removed == ("noise", "weak")
    assert graded.restored == ("valid",)
    assert graded.missing_families == ("audit",)
    assert graded.grades == {"good": Grade.CORRECT, "valid": Grade.AMBIGUOUS}
    assert graded.overall is Grade.CORRECT


def test_grade_protects_a_low_scoring_member_that_answers_its_family() -> None:
    member = cand(make_chunk("m", "the ledger records every audit event", family="audit"), 0.1)
    noise = cand(make_chunk("n", "gardening"), 0.1)
    family = RequiredFamily("audit", "ledger audit event query", label="audit")
    assert supports(member, family, T)
    graded = grade([member, noise], [member, noise], [family], k=5, t=T)
    assert ids(graded.chunks) == ["m"]
    assert graded.removed == ("n",)
    assert graded.grades == {"m": Grade.INCORRECT}
    assert graded.missing_families == ()



def test_grade_keeps_a_family_of_chosen_records_only_those() -> None:
    """A lead for an aspect nothing met is a family of one chosen record: graded as noise, it is still kept;
    another noise chunk is not, and a chunk outside a terms-based family's records gains nothing by this."""
    lead = cand(make_chunk("lead", "leases lock shared resources"), 0.05)
    noise = cand(make_chunk("n", "gardening"), 0.05)
    chosen = RequiredFamily("(lead) lock permissions", "", record_ids=("lead",), lead=True)
    assert supports(lead, chosen, T) and not supports(noise, chosen, T)
    graded = grade([lead, noise], [lead, noise], [chosen], k=5, t=T)
    assert ids(graded.chunks) == ["lead"] and graded.removed == ("n",)
    # Any other family is still tested: knowing the record (a caller's plan, a name) does not validate noise.
    named = RequiredFamily("lock permissions", "lock permissions", aspect_terms=("lock", "permission"),
                           record_ids=("n",))
    assert not supports(noise, named, T)
    assert not supports(noise, RequiredFamily("records only", "", record_ids=("n",)), T)

def test_grade_protects_the_member_reserve_chose_not_the_first_one() -> None:
    """Two chunks meet an aspect; reserve took the one covering it most. Grading must keep that one, not
    the higher-scored partial member (which is kept anyway as ambiguous), or the reserved evidence is lost."""
    family = RequiredFamily("object quota", "cap objects namespace", aspect_terms=("cap", "object", "namespace"))
    partial = cand(make_chunk("quota-partial", "cap the object churn", doc_id="D1"), 0.4)
    full = cand(make_chunk("quota-full", "cap object counts per namespace", doc_id="D2"), 0.1)
    noise = cand(make_chunk("quota-noise", "gardening tips", doc_id="D3"), 0.9)
    assert supports(partial, family, T) and supports(full, family, T)
    selection = reserve([noise, partial, full], [family], k=3).chunks
    graded = grade(selection, selection, [family], k=3, t=T)
    assert "quota-full" in ids(graded.chunks)
    assert graded.removed == ()


def test_grade_of_only_noise_is_incorrect_overall() -> None:
    noise = cand(make_chunk("n", "gardening"), 0.1)
    graded = grade([noise], [noise], [], k=3, t=T)
    assert graded.chunks == ()
    assert graded.overall is Grade.INCORRECT


def test_grade_restored_family_displaces_the_weakest_unprotected_chunk() -> None:
    a = cand(make_chunk("a", "alpha"), 0.9)
    b = cand(make_chunk("b", "beta"), 0.8)
    c = cand(make_chunk("c", "roles", family="rbac"), 0.4)
    graded = grade([a, b], [a, b, c], [RequiredFamily("rbac", "role grant", label="rbac")], k=2, t=T)
    assert ids(graded.chunks) == ["a", "c"]
    assert graded.restored == ("c",)


def test_grade_accounts_for_every_selected_chunk_it_drops() -> None:
    """What the trace says grading removed must be what it removed: a chunk displaced to make room for a
    restored family is gone from the context, so it must be listed (or the explain trace cannot account
    for it)."""
    a = cand(make_chunk("a", "alpha"), 0.9)
    b = cand(make_chunk("b", "beta"), 0.8)
    c = cand(make_chunk("c", "roles", family="rbac"), 0.4)
    graded = grade([a, b], [a, b, c], [RequiredFamily("rbac", "role grant", label="rbac")], k=2, t=T)
    dropped = set(ids([a, b])) - set(ids(graded.chunks))
    assert dropped == {"b"}
    assert set(graded.removed) == dropped


# ---- grade: properties ------------------------------------------------------------------------------


@given(candidate_pools(), st.lists(st.sampled_from(LABELS), unique=True, max_size=4),
       st.integers(min_value=0, max_value=8))
def test_grade_properties(ranked: list[Candidate], labels: list[str], k: int) -> None:
    families = [RequiredFamily(name=f"fam-{x}", rescue_query=f"rescue {x}", label=x) for x in labels]
    selection = ranked[:k]
    graded = grade(selection, ranked, families, k, T)
    out = list(graded.chunks)
    out_ids = ids(out)
    assert len(set(out_ids)) == len(out_ids)
    assert set(out_ids) <= set(ids(ranked))
    assert len(out) <= k  # never over budget, even with more families than slots
    # noise stays only when it is some family's validated evidence
    for c in out:
        if grade_of(c, T) is Grade.INCORRECT:
            assert any(supports(c, f, T) for f in families)
    # every family is either covered by validated evidence in the output or reported missing; one with
    # validated evidence is missing only when the budget is full of other families' evidence
    for family in families:
        has_support = any(supports(c, family, T) for c in ranked)
        covered = any(supports(c, family, T) for c in out)
        assert covered != (family.name in graded.missing_families)
        if has_support and not covered:
            assert len(out) == k
            assert all(any(supports(c, f, T) for f in families if f.name not in graded.missing_families)
                       for c in out)
    assert len(set(graded.missing_families)) == len(graded.missing_families)
    assert len(set(graded.restored)) == len(graded.restored)
    assert [c.score for c in out] == sorted((c.score for c in out), reverse=True)
    assert set(graded.grades) == set(out_ids)


def test_a_phrase_aspect_is_met_by_its_rare_words_not_the_pools_common_ones() -> None:
    """"they should be capped at 50 pods" had reserved the pod lifecycle page, which holds "pods" and "50"
    (two of three terms) but says nothing of a cap. Weighted by rarity among the pool's candidates, the words
    every candidate holds count for little: the page that holds "capped" meets the aspect, and the lifecycle
    page no longer does."""
    from evidex.evidence.plan import EvidencePlan, PlanSource, with_term_weights
    from evidex.evidence.terms import terms

    common = [cand(make_chunk(f"p{i}", f"Pods restart; 50 pods per node is typical, page {i}."), 0.5)
              for i in range(30)]
    lifecycle = cand(make_chunk("lifecycle", "A pod moves through phases; at most 50 pods are shown."), 0.9)
    quota = cand(make_chunk("quota", "The namespace is capped: a quota limits how many objects it may hold."), 0.4)
    pool = [lifecycle, *common, quota]
    aspect = "they should be capped at 50 pods"
    plan = EvidencePlan((RequiredFamily(aspect, aspect, aspect_terms=terms(aspect)),), (aspect,), PlanSource.AUTO)
    plain = plan.families[0]
    assert plain.matches(lifecycle.chunk) and not plain.matches(quota.chunk)  # two of three terms, or one
    weighted = with_term_weights(plan, pool).families[0]
    assert not weighted.matches(lifecycle.chunk) and weighted.matches(quota.chunk)
    assert reserve(pool, [weighted], k=3, max_per_doc=1).reserved == {aspect: "quota"}
    # a chunk holding all of a name meets it however common its words (a page titled "Pods" is its evidence)
    named = RequiredFamily("Pods", "Pods", aspect_terms=terms("Pods"), entity=True)
    weighted_name = with_term_weights(EvidencePlan((named,), ("Pods",), PlanSource.AUTO), pool).families[0]
    assert weighted_name.matches(lifecycle.chunk) and not weighted_name.matches(quota.chunk)


def test_a_word_that_names_nothing_is_no_term_of_an_aspect() -> None:
    """"meanwhile" is rare among the candidates only by chance: as a term it weighed more than "affinity", so
    the node affinity page no longer met "can the controller add a required node affinity meanwhile" (and a
    leader-migration chunk saying "meanwhile" came close to meeting it)."""
    from evidex.evidence.plan import EvidencePlan, PlanSource, with_term_weights
    from evidex.evidence.terms import terms

    aspect = "can the controller add a required node affinity meanwhile"
    assert terms(aspect) == ("controller", "add", "requir", "node", "affinity")
    assert terms("how do completed Jobs expire on their own") == ("complet", "job", "expire")
    placing = [cand(make_chunk(f"s{i}", f"The controller places pods on a node, case {i}."), 0.5) for i in range(8)]
    rules = [cand(make_chunk(f"a{i}", f"Node affinity rules decide placement, case {i}."), 0.5) for i in range(4)]
    migration = cand(make_chunk("migration", "Meanwhile the controller manager is required to hold a lease."), 0.1)
    affinity = cand(make_chunk("affinity", "Schedule a pod using required node affinity.",
                               title="Assign Pods to Nodes using Node Affinity"), 0.3)
    pool = [*placing, *rules, migration, affinity]
    plan = EvidencePlan((RequiredFamily(aspect, aspect, aspect_terms=terms(aspect)),), (aspect,), PlanSource.AUTO)
    weighted = with_term_weights(plan, pool).families[0]
    assert weighted.matches(affinity.chunk) and not weighted.matches(migration.chunk)
    assert reserve(pool, [weighted], k=3).reserved == {aspect: "affinity"}
