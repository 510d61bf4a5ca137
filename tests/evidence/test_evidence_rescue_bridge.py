"""Rescue and bridging are bounded: counted on a real SqliteStore (a subclass that only records its
searches) holding a tiny inline corpus."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from evidence_support import (
    CountingStore,
    cand,
    constant_encoder,
    counting_store,
    ids,
    make_chunk,
    sparse_candidates,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from evidex.admission.gate import AdmissionGate, Principal
from evidex.config import Config
from evidex.evidence.bridge import bridge, bridge_entities, context_search, named, titled
from evidex.evidence.plan import RequiredFamily, explicit_plan
from evidex.evidence.rescue import rescue
from evidex.evidence.terms import terms
from evidex.evidence.titles import QUALIFIED
from evidex.pipeline import HOP_OBLIGATION, LEAD_OBLIGATION, PipelineParts, SearchRequest, run_search
from evidex.trace import StageSwitches
from evidex.types import RetrievalMode, SearchFilters

SECRETS = make_chunk("secrets", "Store the database password in Vaultline under the service path.",
                     title="Managing secrets", family="secrets")
RBAC = make_chunk("rbac", "A RoleGrant gives one team read access to one secret path, least privilege.",
                  title="RBAC roles", family="rbac")
POOL = make_chunk("pool", "The Tidepool pool size flag bounds how many connections each replica opens.",
                  title="Connection pooling")
GARDEN = make_chunk("garden", "Tomatoes need sun and water every day.", title="Gardening")
CORPUS = [SECRETS, RBAC, POOL, GARDEN]

FAM_SECRETS = RequiredFamily("secrets", "vaultline secret path", label="secrets")
FAM_RBAC = RequiredFamily("rbac", "role grant least privilege", label="rbac")
FAM_POOL = RequiredFamily("Tidepool pool size", "Tidepool pool size", aspect_terms=("tidepool", "pool", "size"))
FAM_NOTHING = RequiredFamily("ghost", "zeppelin quasar", label="ghost")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    s = counting_store(tmp_path / "idx", CORPUS)
    yield s
    s.close()


def test_one_search_per_short_family_none_for_present_ones(store: CountingStore) -> None:
    pool = [cand(SECRETS, 0.9)]
    rescued = rescue(store, [FAM_SECRETS, FAM_RBAC, FAM_POOL], pool, wide_limit=7, min_matches=1,
                     reader=None, to_candidates=sparse_candidates(store))
    added, attempts = rescued.added, rescued.attempts
    assert [c.query for c in store.sparse_calls] == ["role grant least privilege", "Tidepool pool size"]
    assert all(c.limit == 7 and not c.title_only for c in store.sparse_calls)
    # a labelled family is searched within its family; an automatic aspect over everything
    assert store.sparse_calls[0].filters == SearchFilters(families=("rbac",))
    assert store.sparse_calls[1].filters is None
    assert [a.family for a in attempts] == ["rbac", "Tidepool pool size"]
    assert sorted(ids(added)) == ["pool", "rbac"]
    assert [(a.hits >= a.added, a.added) for a in attempts] == [(True, 1), (True, 1)]
    assert store.dense_calls == 0


def test_a_family_that_finds_nothing_is_searched_once(store: CountingStore) -> None:
    rescued = rescue(store, [FAM_NOTHING], [], wide_limit=50, min_matches=1, reader=None,
                     to_candidates=sparse_candidates(store))
    added, attempts = rescued.added, rescued.attempts
    assert added == [] and rescued.leads == {}
    assert len(store.sparse_calls) == 1
    assert [(a.family, a.hits, a.added) for a in attempts] == [("ghost", 0, 0)]


def test_min_matches_decides_who_is_short(store: CountingStore) -> None:
    pool = [cand(SECRETS, 0.9), cand(RBAC, 0.5)]
    attempts = rescue(store, [FAM_SECRETS, FAM_RBAC], pool, wide_limit=50, min_matches=2, reader=None,
                      to_candidates=sparse_candidates(store)).attempts
    assert len(store.sparse_calls) == 2 and [a.family for a in attempts] == ["secrets", "rbac"]
    assert [a.added for a in attempts] == [0, 0]  # already in the pool: never added twice


def test_rescue_adds_only_members_of_the_family(store: CountingStore) -> None:
    # "pool" matches text of several chunks; only the aspect's members join
    family = RequiredFamily("tidepool flag", "pool size flag connections", aspect_terms=("tidepool", "flag"))
    added = rescue(store, [family], [], wide_limit=50, min_matches=1, reader=None,
                   to_candidates=sparse_candidates(store)).added
    assert ids(added) == ["pool"]


# Nothing holds 3 of its 4 terms: the Tidepool page holds "tidepool" and "replica" only.
FAM_QUORUM = RequiredFamily("tidepool replica quorum election", "tidepool replica quorum election",
                            aspect_terms=("tidepool", "replica", "quorum", "election"))


def test_an_aspect_nothing_meets_keeps_its_searchs_best_page_as_a_lead(store: CountingStore) -> None:
    rescued = rescue(store, [FAM_QUORUM], [cand(SECRETS, 0.9)], wide_limit=50, min_matches=1, reader=None,
                     to_candidates=sparse_candidates(store))
    assert rescued.leads == {FAM_QUORUM.name: "pool"}
    assert ids(rescued.added) == ["pool"]
    assert rescued.attempts[0].to_dict()["lead"] == "pool"
    assert not FAM_QUORUM.matches(POOL)  # a lead, not a member


def test_no_lead_from_a_leading_page_or_for_a_declared_family(store: CountingStore) -> None:
    leading = rescue(store, [FAM_QUORUM], [cand(POOL, 0.9)], wide_limit=50, min_matches=1, reader=None,
                     to_candidates=sparse_candidates(store))
    assert leading.leads == {} and leading.added == []  # the context will hold that page already
    behind = rescue(store, [FAM_QUORUM], [cand(SECRETS, 0.9), cand(POOL, 0.5)], wide_limit=50, min_matches=1,
                    reader=None, to_candidates=sparse_candidates(store), leading=1)
    assert behind.leads == {FAM_QUORUM.name: "pool"} and behind.added == []  # in the pool, below the leading one
    declared = RequiredFamily("quorum", "tidepool replica quorum election", label="quorum")
    assert rescue(store, [declared], [], wide_limit=50, min_matches=1, reader=None,
                  to_candidates=sparse_candidates(store)).leads == {}


def test_no_lead_from_a_page_that_does_not_speak_of_the_aspect(store: CountingStore) -> None:
    # The search's words ("sun") reach the garden page, but the aspect's own words are not on it.
    family = RequiredFamily("solar quorum", "sun", aspect_terms=("solar", "quorum"))
    rescued = rescue(store, [family], [], wide_limit=50, min_matches=1, reader=None,
                     to_candidates=sparse_candidates(store))
    assert store.sparse_calls and rescued.leads == {}


def test_no_lead_for_an_identifier_nothing_holds(store: CountingStore) -> None:
    """An identifier is met only whole (`tidepool_replica_quorum`, as pasted from the user's config): a page
    holding some of its words is not evidence of it, nor a lead for it (the RBAC page had been the lead of
    `extra_hosts`). The same words as a phrase get the Tidepool page as their lead."""
    identifier = dataclasses.replace(FAM_QUORUM, name="tidepool_replica_quorum_election",
                                     rescue_query="tidepool_replica_quorum_election", verbatim=True)
    assert rescue(store, [FAM_QUORUM], [], wide_limit=50, min_matches=1, reader=None,
                  to_candidates=sparse_candidates(store)).leads == {FAM_QUORUM.name: "pool"}
    rescued = rescue(store, [identifier], [], wide_limit=50, min_matches=1, reader=None,
                     to_candidates=sparse_candidates(store))
    assert store.sparse_calls[-1].query == identifier.rescue_query and rescued.attempts[0].hits > 0
    assert rescued.leads == {} and rescued.added == []


def test_pipeline_makes_one_retrieval_search_plus_one_per_short_family(store: CountingStore) -> None:
    parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate())
    plan = explicit_plan([FAM_SECRETS, FAM_RBAC, FAM_NOTHING])
    outcome = run_search(parts, SearchRequest("where does the database password live in Vaultline", plan=plan,
                                              principal=Principal.of("p", ["public"]),
                                              retrieved_at=datetime(2026, 1, 1, tzinfo=UTC),
                                              mode=RetrievalMode.BM25))
    queries = [c.query for c in store.sparse_calls]
    assert queries == ["where does the database password live in Vaultline", "role grant least privilege",
                       "zeppelin quasar"]
    assert not any(c.title_only for c in store.sparse_calls)  # not a chained question: no bridging
    assert store.dense_calls == 0
    rescue_stage = next(s for s in outcome.trace.stages if s.name == "rescue")
    assert [s["family"] for s in rescue_stage.decisions["searches"]] == ["rbac", "ghost"]
    statuses = {f.name: f.status for f in outcome.families}
    assert statuses == {"secrets": "covered", "rbac": "covered", "ghost": "missing"}



# A member of the rbac family by its label that holds none of its rescue query's words: an index page.
RBAC_INDEX = make_chunk("rbac-index", "See the team pages for who owns what.", title="Access overview",
                        family="rbac")


def test_a_declared_family_whose_only_member_is_noise_is_still_searched(tmp_path: Path) -> None:
    """A member grading would remove as noise (low score, and none of the family's rescue words) does not make
    the family present: grading would have reported it missing while its evidence was one search away."""
    store = counting_store(tmp_path / "idx", [*CORPUS, RBAC_INDEX])
    try:
        noise = rescue(store, [FAM_RBAC], [cand(SECRETS, 0.9), cand(RBAC_INDEX, 0.05)], wide_limit=50,
                       min_matches=1, reader=None, to_candidates=sparse_candidates(store))
        assert [a.family for a in noise.attempts] == ["rbac"] and ids(noise.added) == ["rbac"]
        store.sparse_calls.clear()
        for kept in (cand(RBAC_INDEX, 0.5), cand(RBAC, 0.05)):  # not noise; noise holding "least privilege"
            assert rescue(store, [FAM_RBAC], [cand(SECRETS, 0.9), kept], wide_limit=50, min_matches=1,
                          reader=None, to_candidates=sparse_candidates(store)).attempts == []
        assert store.sparse_calls == []
    finally:
        store.close()


def test_the_rescued_evidence_of_a_declared_family_survives_grading(tmp_path: Path) -> None:
    store = counting_store(tmp_path / "idx", [*CORPUS, RBAC_INDEX])
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate())
        question = "where does the database password live in Vaultline and who owns the pages"
        outcome = run_search(parts, SearchRequest(question, plan=explicit_plan([FAM_SECRETS, FAM_RBAC]),
                                                  principal=Principal.of("p", ["public"]),
                                                  retrieved_at=datetime(2026, 1, 1, tzinfo=UTC),
                                                  mode=RetrievalMode.BM25))
        rescue_stage = next(s for s in outcome.trace.stages if s.name == "rescue")
        assert [s["family"] for s in rescue_stage.decisions["searches"]] == ["rbac"]
        assert "rbac" in ids(outcome.context)
        assert {f.name: f.status for f in outcome.families} == {"secrets": "covered", "rbac": "covered"}
    finally:
        store.close()


def test_a_word_most_hits_share_cannot_pick_a_lead(tmp_path: Path) -> None:
    """"where does egress go": the page about egress leads already, and "go" is on most other hits ("notes go in
    the ops channel"): such a page had become the lead (a walkthrough). A lead must hold one of the aspect's
    telling words, held by at most half of the hits."""
    leading = make_chunk("egress", "Egress is limited to the proxy.", title="Proxy")
    others = [make_chunk(f"go{i}", text) for i, text in enumerate(
        ["Incident notes go in the ops channel.", "Deploys go out on Tuesdays.", "Backups go to the vault.",
         "Alerts go to the pager first."])]
    family = RequiredFamily("where does egress go", "where does egress go", aspect_terms=terms("where does egress go"))
    store = counting_store(tmp_path / "filler", [leading, *others])
    try:
        rescued = rescue(store, [family], [cand(leading, 0.9)], wide_limit=50, min_matches=1, reader=None,
                         to_candidates=sparse_candidates(store))
        assert rescued.leads == {}
    finally:
        store.close()
    rules = make_chunk("rules", "Egress rules for the mesh gateway.", title="Mesh")
    store = counting_store(tmp_path / "telling", [leading, rules, *others])
    try:
        rescued = rescue(store, [family], [cand(leading, 0.9)], wide_limit=50, min_matches=1, reader=None,
                         to_candidates=sparse_candidates(store))
        assert rescued.leads == {family.name: "rules"}
    finally:
        store.close()

def test_a_lead_stays_in_the_context_but_never_covers_its_aspect(store: CountingStore) -> None:
    parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate())
    outcome = run_search(parts, SearchRequest("where does the database password live in Vaultline",
                                              plan=explicit_plan([FAM_SECRETS, FAM_QUORUM]),
                                              principal=Principal.of("p", ["public"]),
                                              retrieved_at=datetime(2026, 1, 1, tzinfo=UTC),
                                              mode=RetrievalMode.BM25))
    assert "pool" in ids(outcome.context)  # kept through grading, whatever its grade
    reserve_stage = next(s for s in outcome.trace.stages if s.name == "reserve")
    assert reserve_stage.decisions["reserved"][LEAD_OBLIGATION + FAM_QUORUM.name] == "pool"
    statuses = {f.name: f.status for f in outcome.families}
    assert statuses == {"secrets": "covered", FAM_QUORUM.name: "missing"}  # the requester is told to re-query
    # Without the lead (rescue switched off) the page is not in the context at all.
    plain = run_search(parts, SearchRequest("where does the database password live in Vaultline",
                                            plan=explicit_plan([FAM_SECRETS, FAM_QUORUM]),
                                            principal=Principal.of("p", ["public"]),
                                            retrieved_at=datetime(2026, 1, 1, tzinfo=UTC), mode=RetrievalMode.BM25,
                                            switches=StageSwitches(rescue=False)))
    assert "pool" not in ids(plain.context)


# ---- bridging ---------------------------------------------------------------------------------------
FILM = make_chunk("film", "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss Archer. "
                          "It was produced by Columbia Pictures and filmed in Burbank California.",
                  title="Kiss and Tell (film)")
TEMPLE = make_chunk("temple", "Shirley Temple later served as United States ambassador to Ghana.",
                    title="Shirley Temple")
COLUMBIA = make_chunk("columbia", "Columbia Pictures is a film studio.", title="Columbia Pictures")
STREET = make_chunk("street", "Shirley walked down the street past the old temple.", title="Temple Street")
BURBANK = make_chunk("burbank", "Burbank is a city in California.", title="Burbank California")
FILM_CORPUS = [FILM, TEMPLE, COLUMBIA, STREET, BURBANK]
CHAINED = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"


def test_bridge_entities_skip_names_the_question_already_has() -> None:
    names = bridge_entities(CHAINED, [cand(FILM, 1.0)], max_entities=5)
    assert [n for n, _ in names][:2] == ["Shirley Temple", "Columbia Pictures"]
    assert any(n.startswith("Burbank California") for n, _ in names)
    assert all(src == "film" for _, src in names)
    assert "Corliss Archer" not in [n for n, _ in names]


def test_bridge_follows_names_in_the_sentence_that_answers_the_question_first() -> None:
    airport = make_chunk("airport", "Fort Dodge and Garden City run shuttles. Dodge City Regional Airport is "
                                    "located in Ford County, Kansas, and served by American Eagle.",
                         title="Dodge City Regional Airport")
    names = [n for n, _ in bridge_entities("Where is the state where Dodge City Regional Airport is located?",
                                           [cand(airport, 1.0)], max_entities=3)]
    # the "located" sentence shares the question's words: its names come before the earlier sentence's
    assert names == ["Ford County", "Kansas", "American Eagle"]


def test_bridge_names_are_not_cut_at_an_initial() -> None:
    page = make_chunk("fawell", "The papers were donated by Harris W. Fawell to North Central College.",
                      title="Fawell papers")
    names = [n for n, _ in bridge_entities("Where were the papers donated?", [cand(page, 1.0)], max_entities=3)]
    assert names[:2] == ["Harris W Fawell", "North Central College"]


def test_named_is_the_exact_page_titled_is_any_page_about_it() -> None:
    ellis = cand(make_chunk("ellis", "Ellis is a city.", title="Ellis, Kansas"), 0.1)
    kansas = cand(make_chunk("kansas", "Kansas is a state.", title="Kansas"), 0.1)
    assert named(kansas, "Kansas", QUALIFIED) and not named(ellis, "Kansas", QUALIFIED)
    assert titled(ellis, "Kansas", QUALIFIED)
    assert named(cand(FILM, 0.1), "Kiss and Tell", QUALIFIED)  # the "(film)" qualifier is ignored
    assert named(ellis, "Ellis", QUALIFIED)  # "Ellis, Kansas" is a page named Ellis, in Kansas


def test_titled() -> None:
    assert titled(cand(TEMPLE, 0.1), "Shirley Temple", QUALIFIED)
    assert titled(cand(FILM, 0.1), "Kiss and Tell", QUALIFIED)  # the "(film)" qualifier is ignored
    assert not titled(cand(STREET, 0.1), "Shirley Temple", QUALIFIED)


def test_a_title_of_a_corpus_without_qualifiers_is_one_name() -> None:
    """Where the corpus does not qualify its titles, a comma or a parenthesis is part of the name: the page
    "Tune Retries, Backoff and Timeouts" is not named "Tune Retries"."""
    tuning = cand(make_chunk("tuning", "Set the retry budget.", title="Tune Retries, Backoff and Timeouts"), 0.1)
    assert not named(tuning, "Tune Retries") and named(tuning, "Tune Retries, Backoff and Timeouts")
    assert named(tuning, "Tune Retries", QUALIFIED)  # as an encyclopaedia would read it
    abbreviated = cand(make_chunk("csi", "Drivers attach volumes.", title="Volume Driver Interface (VDI)"), 0.1)
    assert named(abbreviated, "Volume Driver Interface VDI") and not named(abbreviated, "Volume Driver Interface")
    assert not named(cand(FILM, 0.1), "Kiss and Tell")


@pytest.fixture
def film_store(tmp_path: Path) -> Iterator[CountingStore]:
    s = counting_store(tmp_path / "films", FILM_CORPUS)
    yield s
    s.close()


def test_bridge_links_only_titled_hits(film_store: CountingStore) -> None:
    added, searches = bridge(film_store, CHAINED, [cand(FILM, 1.0)], from_top=3, max_entities=1, limit=10,
                             to_candidates=sparse_candidates(film_store))
    assert [(s.entity, s.from_record, s.linked) for s in searches] == [("Shirley Temple", "film", ("temple",))]
    assert searches[0].hits >= 2  # "Temple Street" is a title hit too, but not titled by the name
    assert ids(added) == ["temple"]
    assert [(c.query, c.title_only, c.limit) for c in film_store.sparse_calls] == [("Shirley Temple", True, 10)]


@settings(max_examples=25)
@given(st.integers(min_value=0, max_value=5), st.integers(min_value=1, max_value=3),
       st.integers(min_value=1, max_value=3))
def test_bridge_is_bounded_by_max_entities(tmp_path_factory: pytest.TempPathFactory, max_entities: int,
                                           hops: int, from_top: int) -> None:
    directory = tmp_path_factory.mktemp("bridge")
    store = counting_store(directory, FILM_CORPUS)
    try:
        added, searches = bridge(store, CHAINED, [cand(FILM, 1.0), cand(COLUMBIA, 0.5)], from_top=from_top,
                                 max_entities=max_entities, limit=10, to_candidates=sparse_candidates(store))
        assert len(searches) <= max_entities
        assert len(store.sparse_calls) == len(searches)
        assert all(c.title_only for c in store.sparse_calls)
        by_id = {c.record_id: c for c in FILM_CORPUS}
        for s in searches:
            assert all(titled(cand(by_id[r], 0.0), s.entity) for r in s.linked)
        assert len(set(ids(added))) == len(added)
        assert not {"film", "columbia"} & set(ids(added))  # never re-adds what was already ranked
    finally:
        store.close()


# A nested question whose next page holds the bridge name without being titled by it.
BUBYE = make_chunk("bubye", "The Bubye River is a tributary of the Limpopo River. It is found in Zimbabwe.",
                   title="Bubye River")
# It shares no word with the question: only the name the river's page adds can find it.
FALLS = make_chunk("falls", "Victoria Falls, on the Zambezi, is the widest curtain of falling water in Zimbabwe.",
                   title="Victoria Falls")
RAPIDS = make_chunk("rapids", "A waterfall in Iceland draws many visitors each summer.", title="Gullfoss")
WATERFALL = "What is the name of the waterfall in the country where the Bubye River is found?"


def test_a_search_of_the_question_with_the_names_its_evidence_adds_links_its_best_new_hit(
        tmp_path: Path) -> None:
    store = counting_store(tmp_path / "falls", [BUBYE, FALLS, RAPIDS])
    try:
        found, search = context_search(store, WATERFALL, [cand(BUBYE, 1.0)], names=2, limit=10,
                                       held={"bubye", "rapids"}, to_candidates=sparse_candidates(store))
        assert [c.query for c in store.sparse_calls] == [f"{WATERFALL} Limpopo River Zimbabwe"]
        assert ids(found) == ["falls"] and search is not None
        assert (search.entity, search.from_record, search.linked) == ("Limpopo River + Zimbabwe", "bubye", ("falls",))
        assert search.followed == ()
        store.sparse_calls.clear()
        held = {"bubye", "falls", "rapids"}  # everything it could find is in the pool already
        assert context_search(store, WATERFALL, [cand(BUBYE, 1.0)], names=2, limit=10, held=held,
                              to_candidates=sparse_candidates(store))[0] == []
        assert context_search(store, WATERFALL, [cand(BUBYE, 1.0)], names=0, limit=10, held=set(),
                              to_candidates=sparse_candidates(store)) == ([], None)
        assert len(store.sparse_calls) == 1  # none at all when no name is to be added
    finally:
        store.close()


def test_a_nested_question_keeps_the_page_its_evidence_points_to(tmp_path: Path) -> None:
    """The page the river's page points to holds none of the question's words, so retrieval cannot find it,
    nor a title look-up of "Zimbabwe": the search of the question with the names is what finds it, and it is
    kept in the context as the next hop."""
    others = [make_chunk(f"other-{i}", f"Tomatoes need sun, water and care, note {i}.", doc_id=f"other-{i}",
                         title=f"garden note {i}") for i in range(12)]
    store = counting_store(tmp_path / "nested", [BUBYE, FALLS, RAPIDS, *others])
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate())
        request = SearchRequest(WATERFALL, k=3, principal=Principal.of("p", ["public"]),
                                retrieved_at=datetime(2026, 1, 1, tzinfo=UTC), mode=RetrievalMode.BM25)
        outcome = run_search(parts, request)
        assert outcome.plan.chained
        bridges = next(s for s in outcome.trace.stages if s.name == "bridge").decisions["bridges"]
        assert {"entity": "Limpopo River + Zimbabwe", "from": "bubye", "hits": 3, "linked": ["falls"],
                "named": [], "with_question": True} in bridges
        assert "falls" in ids(outcome.context)
        # Not a page reached by following a name (titled by it): the nested question's hops do not count it.
        assert "falls" not in outcome.followed
        off = Config().replace(evidence={"bridge_context_names": 0})
        without = run_search(PipelineParts(store=store, encode=constant_encoder, config=off, gate=AdmissionGate()),
                             request)
        assert "falls" not in ids(without.context)
    finally:
        store.close()


def test_bridge_trace_does_not_reveal_restricted_records(tmp_path: Path) -> None:
    restricted = make_chunk("restricted-temple", "Shirley Temple later served as ambassador. SECRET-TEXT",
                            title="Shirley Temple", labels=("secret",))
    store = counting_store(tmp_path / "gated", [FILM, restricted, COLUMBIA])
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate())
        outcome = run_search(parts, SearchRequest(CHAINED, principal=Principal.of("p", ["public"]),
                                                  retrieved_at=datetime(2026, 1, 1, tzinfo=UTC),
                                                  mode=RetrievalMode.BM25))
        assert outcome.plan.chained
        assert outcome.gate is not None
        # The restricted page is never linked, so it is at most an ordinary rejected candidate.
        assert all(r.reason.value == "access-label-not-granted" for r in outcome.gate.rejected)
        assert "restricted-temple" not in ids(outcome.context)
        trace = json.dumps(outcome.trace.to_dict(timing=False))
        assert "SECRET-TEXT" not in trace
        assert "restricted-temple" not in trace
    finally:
        store.close()


def test_bridge_only_follows_names_from_readable_pages(tmp_path: Path) -> None:
    """A restricted page that ranks first must not steer the bridge: names come from admitted text only."""
    restricted_film = make_chunk("restricted-film", "Kiss and Tell was secretly financed by Columbia Pictures.",
                                 title="Kiss and Tell (film)", labels=("secret",))
    store = counting_store(tmp_path / "steer", [restricted_film, COLUMBIA])
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate())
        run_search(parts, SearchRequest(CHAINED, principal=Principal.of("p", ["public"]),
                                        retrieved_at=datetime(2026, 1, 1, tzinfo=UTC), mode=RetrievalMode.BM25))
        looked_up = [c.query for c in store.sparse_calls if c.title_only]
        # Title look-ups of the question's own names are allowed; a name only the restricted page has is not.
        assert not any("Columbia" in q for q in looked_up)
        assert all(q in CHAINED for q in looked_up)
    finally:
        store.close()


def test_a_nested_question_reserves_the_page_one_hop_away(tmp_path: Path) -> None:
    """The linked page enters at the retrieval floor, below pages that merely repeat the question's words;
    the reserve still gives it a place in the top k (and says so), or the second hop is lost."""
    echoes = [make_chunk(f"echo-{i}", f"The woman who portrayed Corliss Archer held a government position; page {i}.",
                         doc_id=f"echo-{i}", title=f"Corliss Archer government position {i}") for i in range(4)]
    weak = make_chunk("weak", "A film about tomatoes.", doc_id="weak", title="Tomato film")  # the pool's floor
    # unrelated pages, so that the question's words are rare (BM25 gives a word in most pages no weight)
    others = [make_chunk(f"other-{i}", f"Tomatoes need sun, water and care, note {i}.", doc_id=f"other-{i}",
                         title=f"garden note {i}") for i in range(12)]
    store = counting_store(tmp_path / "hop", [FILM, TEMPLE, weak, *echoes, *others])
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config())
        outcome = run_search(parts, SearchRequest(CHAINED, k=3, mode=RetrievalMode.BM25))
        without = run_search(parts, SearchRequest(CHAINED, k=3, mode=RetrievalMode.BM25,
                                                  switches=StageSwitches.only("rerank", "rescue")))
    finally:
        store.close()
    assert outcome.plan.chained
    assert "temple" not in ids(without.ranked[:3])  # by score alone the hop does not make the top k
    assert "temple" in ids(outcome.context)
    assert "temple" in outcome.followed  # titled by the name followed: a hop the nested question counts
    reserve_stage = next(s for s in outcome.trace.stages if s.name == "reserve")
    assert reserve_stage.decisions["reserved"][HOP_OBLIGATION] == "temple"


def test_the_hop_reserved_is_the_page_named_by_the_followed_name(tmp_path: Path) -> None:
    """"Shirley Temple filmography" is titled by the name too, and repeats the question's words; the page
    named exactly "Shirley Temple" is still the one reserved as the hop."""
    filmography = make_chunk("filmography", "Films of the woman who portrayed Corliss Archer in Kiss and Tell, "
                                            "with each government position she held listed too.",
                             doc_id="filmography", title="Shirley Temple filmography")
    others = [make_chunk(f"other-{i}", f"Tomatoes need sun, water and care, note {i}.", doc_id=f"other-{i}",
                         title=f"garden note {i}") for i in range(12)]
    store = counting_store(tmp_path / "named", [FILM, TEMPLE, filmography, *others])
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config())
        outcome = run_search(parts, SearchRequest(CHAINED, k=3, mode=RetrievalMode.BM25))
    finally:
        store.close()
    linked = {r for s in next(s for s in outcome.trace.stages if s.name == "bridge").decisions["bridges"]
              for r in s["linked"]}
    assert {"temple", "filmography"} <= linked
    by_id = {c.chunk.record_id: c.score for c in outcome.ranked_all}
    assert by_id["filmography"] > by_id["temple"]  # by score alone the filmography would be the hop
    reserve_stage = next(s for s in outcome.trace.stages if s.name == "reserve")
    assert reserve_stage.decisions["reserved"][HOP_OBLIGATION] == "temple"
