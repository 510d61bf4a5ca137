"""A named aspect's best evidence is the page its name titles: taken from the pool, else found with one
bounded title look-up, and reserved ahead of a page that only mentions the name. On a real SqliteStore
that records its searches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from evidence_support import CountingStore, cand, constant_encoder, counting_store, ids, make_chunk, sparse_candidates

from evidex.config import Config
from evidex.evidence.bridge import named_pages
from evidex.evidence.plan import EvidencePlan, PlanSource, RequiredFamily, auto_plan, with_term_weights
from evidex.evidence.reserve import reserve
from evidex.pipeline import PipelineParts, SearchRequest, run_search
from evidex.types import RetrievalMode

STANDARDS = make_chunk("pss", "Three profiles: privileged, baseline and restricted. Restricted forbids host mounts.",
                       title="Pod Security Standards")
CLUSTER_LEVEL = make_chunk("cluster-pss", "Apply the Pod Security Standard to every namespace of the cluster "
                           "with an admission configuration; Pod Security Standard labels per namespace.",
                           title="Apply Pod Security Standards at the Cluster Level")
VOLUMES = make_chunk("volumes", "A hostPath volume mounts a file or directory from the host node.",
                     title="Volumes")
GARDEN = make_chunk("garden", "Tomatoes need sun and water every day.", title="Gardening")
CORPUS = [STANDARDS, CLUSTER_LEVEL, VOLUMES, GARDEN]

PSS = RequiredFamily("Pod Security Standard", "Pod Security Standard",
                     aspect_terms=("pod", "security", "standard"), entity=True)
PHRASE = RequiredFamily("which levels refuse a pod", "which levels refuse a pod",
                        aspect_terms=("level", "refuse", "pod"))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    s = counting_store(tmp_path / "idx", CORPUS)
    yield s
    s.close()


def test_a_named_page_outside_the_pool_is_looked_up_once_by_title(store: CountingStore) -> None:
    pool = [cand(CLUSTER_LEVEL, 0.9), cand(VOLUMES, 0.8)]
    added, pages, lookups = named_pages(store, [PSS, PHRASE], pool, max_lookups=4, limit=10,
                                        to_candidates=sparse_candidates(store))
    assert ids(added) == ["pss"]  # "Pod Security Standards" is named by the aspect; the cluster page is not
    assert pages == {"Pod Security Standard": ("pss",)}
    assert [(c.query, c.title_only) for c in store.sparse_calls] == [("Pod Security Standard", True)]
    assert [s.entity for s in lookups] == ["Pod Security Standard"]  # a phrase is never looked up


def test_a_compound_name_finds_the_page_that_spells_it_apart(tmp_path: Path) -> None:
    """"StorageClass" names the page "Storage Classes" (and "class" / "classes" are one term)."""
    classes = make_chunk("classes", "Each StorageClass names a provisioner and parameters.", title="Storage Classes")
    claims = make_chunk("claims", "A claim may ask for a StorageClass by name.", title="Persistent Volumes")
    family = RequiredFamily("StorageClass", "StorageClass", aspect_terms=("storageclass",), entity=True)
    store = counting_store(tmp_path / "idx", [classes, claims, GARDEN])
    try:
        added, pages, _ = named_pages(store, [family], [cand(claims, 0.9)], max_lookups=4, limit=10,
                                      to_candidates=sparse_candidates(store))
        assert ids(added) == ["classes"]
        assert pages == {"StorageClass": ("classes",)}
        assert [c.query for c in store.sparse_calls] == ["StorageClass Storage Class"]
    finally:
        store.close()


def test_a_named_page_already_in_the_pool_costs_no_search(store: CountingStore) -> None:
    pool = [cand(CLUSTER_LEVEL, 0.9), cand(STANDARDS, 0.2)]
    added, pages, lookups = named_pages(store, [PSS], pool, max_lookups=4, limit=10,
                                        to_candidates=sparse_candidates(store))
    assert added == [] and lookups == [] and store.sparse_calls == []
    assert pages == {"Pod Security Standard": ("pss",)}


def test_look_ups_are_bounded(store: CountingStore) -> None:
    names = [RequiredFamily(f"Name{i}", f"Name{i}", aspect_terms=(f"name{i}",), entity=True) for i in range(6)]
    _, _, lookups = named_pages(store, names, [], max_lookups=2, limit=10, to_candidates=sparse_candidates(store))
    assert len(lookups) == 2 and len(store.sparse_calls) == 2


def test_reserve_prefers_the_named_page_over_a_chosen_page_that_only_mentions_the_name() -> None:
    known = RequiredFamily(PSS.name, PSS.rescue_query, aspect_terms=PSS.aspect_terms, entity=True,
                           record_ids=("pss",))
    ranked = [cand(CLUSTER_LEVEL, 0.9), cand(VOLUMES, 0.8), cand(GARDEN, 0.5), cand(STANDARDS, 0.1)]
    without = reserve(ranked, [PSS], k=2)
    assert "pss" not in ids(without.chunks)  # the cluster page meets the aspect by its words
    with_known = reserve(ranked, [known], k=2)
    assert with_known.reserved == {PSS.name: "pss"}
    assert ids(with_known.chunks) == ["cluster-pss", "pss"]


def test_a_named_page_that_was_not_admitted_does_not_cost_a_slot() -> None:
    """The gate rejected the named page: a chosen page that mentions the name meets the family, as before,
    instead of a second mention taking a slot."""
    known = RequiredFamily(PSS.name, PSS.rescue_query, aspect_terms=PSS.aspect_terms, entity=True,
                           record_ids=("pss",))
    cluster = RequiredFamily("cluster level", "cluster level", aspect_terms=("cluster", "level"))
    notes = make_chunk("notes", "Pod Security Standard notes.", title="Notes")
    admitted = [cand(CLUSTER_LEVEL, 0.9), cand(VOLUMES, 0.8), cand(notes, 0.3)]
    selection = reserve(admitted, [cluster, known], k=2)
    assert selection.reserved == {"cluster level": "cluster-pss", PSS.name: "cluster-pss"}
    assert ids(selection.chunks) == ["cluster-pss", "volumes"]


def test_auto_plan_marks_names_not_clauses_as_entities() -> None:
    plan = auto_plan("What are the risks of mounting a hostPath volume, and which Pod Security Standard levels "
                     "would refuse such a pod?")
    kinds = {f.name: f.entity for f in plan.families}
    assert kinds == {"hostPath": True, "Pod Security Standard": True,
                     "What are the risks of mounting a hostPath volume": False,
                     "which Pod Security Standard levels would refuse such a pod": False}


def test_the_pipeline_reserves_the_named_page_found_by_look_up(tmp_path: Path) -> None:
    fillers = [make_chunk(f"fill-{i}", f"Pod Security Standard levels refuse a pod that mounts a hostPath volume, "
                                       f"part {i}.", title=f"Pod Security Standard admission notes {i}")
               for i in range(6)]
    store = counting_store(tmp_path / "pipe", [*CORPUS, *fillers])
    try:
        config = Config().replace(evidence={"pool_size": 3})  # the named page falls outside the pool
        parts = PipelineParts(store=store, encode=constant_encoder, config=config)
        question = "Which Pod Security Standard levels would refuse a pod that mounts a hostPath volume?"
        outcome = run_search(parts, SearchRequest(question, k=3, mode=RetrievalMode.BM25))
        assert "pss" in ids(outcome.context)
        rescue_stage = next(s for s in outcome.trace.stages if s.name == "rescue")
        found = {n["entity"]: n["named"] for n in rescue_stage.decisions["names"]}
        assert found["Pod Security Standard"] == ["pss"]
        assert found["hostPath"] == []  # looked up (no page in the pool is titled by it), none found
        reserve_stage = next(s for s in outcome.trace.stages if s.name == "reserve")
        assert reserve_stage.decisions["reserved"]["Pod Security Standard"] == "pss"
    finally:
        store.close()


def test_a_name_held_in_part_is_met_only_by_its_rare_words() -> None:
    """A page titled by a common word of a name is not its evidence ("SQL Server" against "API Server Bypass
    Risks", where every candidate says "server"): the aspect stays unmet, so the rescue searches for it instead
    of reserving a page that does not name it. A page on the rare part of a name does meet it (the page on
    either of "Cypress and Ajuga"), and a chunk holding all of a name meets it however common its words."""
    bypass = make_chunk("bypass", "The API server can be bypassed through the kubelet or etcd.",
                        title="API Server Bypass Risks")
    mention = make_chunk("mention", "The app reads SQL Server credentials from a Secret.", title="Secrets")
    servers = [make_chunk(f"s{i}", f"Server {i} answers the API server's calls.") for i in range(12)]
    cypress = make_chunk("cypress", "Cypress is a genus of conifers.", title="Cypress")
    pool = [cand(c, 0.5) for c in [bypass, mention, *servers, cypress]]
    names = (RequiredFamily("SQL Server", "SQL Server", aspect_terms=("sql", "server"), entity=True),
             RequiredFamily("Cypress and Ajuga", "Cypress and Ajuga", aspect_terms=("cypress", "ajuga"), entity=True))
    plan = EvidencePlan(names, tuple(n.name for n in names), PlanSource.AUTO)
    sql_server, cypress_and_ajuga = with_term_weights(plan, pool).families
    assert names[0].matches(bypass)  # unweighted, one word of two in the title was enough
    assert not sql_server.matches(bypass) and not any(sql_server.matches(c) for c in servers)
    assert sql_server.matches(mention)
    assert cypress_and_ajuga.matches(cypress)
