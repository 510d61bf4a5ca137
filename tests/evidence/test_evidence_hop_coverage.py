"""A nested question is only covered once the evidence hops away is in the context: at least one followed
page per entity the question describes."""

from __future__ import annotations

from pathlib import Path

import pytest
from evidence_support import constant_encoder, counting_store, make_chunk

from evidex.config import Config
from evidex.evidence.aspects import described_entities, described_phrases
from evidex.pipeline import PipelineParts, SearchRequest, run_search
from evidex.signals.compute import HOP_ASPECT, coverage, evidence_chain, recommend
from evidex.types import RetrievalMode

FILM = make_chunk("film", "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss Archer.",
                  title="Kiss and Tell (film)")
TEMPLE = make_chunk("temple", "Shirley Temple later served as United States ambassador to Ghana.",
                    title="Shirley Temple")
OTHER = make_chunk("other", "Burbank is a city in California with film studios.", title="Burbank")
WORD_SHARE = Config().evidence.min_question_word_share  # the default off-topic rule: not what this tests
CHAINED = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"


def _coverage(tmp_path: Path, corpus: list, question: str = CHAINED) -> tuple[dict, object]:  # type: ignore[type-arg]
    store = counting_store(tmp_path, corpus)
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config())
        outcome = run_search(parts, SearchRequest(question, mode=RetrievalMode.BM25))
        cov = coverage(outcome)
        return cov, recommend(outcome, cov, threshold=0.7, min_question_word_share=WORD_SHARE, confidence=1.0,
                              min_proceed_confidence=0.2, default_owner=None)
    finally:
        store.close()


def test_the_hop_is_covered_when_a_linked_page_is_in_the_context(tmp_path: Path) -> None:
    cov, _ = _coverage(tmp_path / "linked", [FILM, TEMPLE, OTHER])
    assert HOP_ASPECT in cov["aspects_covered"]


def test_the_hop_is_missing_without_it_and_the_description_is_the_focus(tmp_path: Path) -> None:
    """The hop itself is not a search phrase; the description that starts from a name is what to ask next."""
    cov, rec = _coverage(tmp_path / "unlinked", [FILM, OTHER])
    assert HOP_ASPECT in cov["aspects_missing"]
    assert rec.action == "re-query"  # type: ignore[attr-defined]
    assert rec.focus == ("the woman who portrayed Corliss Archer in the film Kiss and Tell",)  # type: ignore[attr-defined]


def test_a_relative_clause_without_a_named_start_is_no_hop(tmp_path: Path) -> None:
    """"a release that is already serving traffic" describes; there is no named entity to hop from, so the
    coverage must not demand (and a re-query could not find) a page one hop away."""
    release = make_chunk("release", "Roll back a bad release that is serving production traffic with the "
                                    "deploy tool's rollback command.", title="Rollback")
    store = counting_store(tmp_path / "plain", [release, OTHER])
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config())
        outcome = run_search(parts, SearchRequest(
            "What is the rollback procedure for a bad release that is already serving production traffic?",
            mode=RetrievalMode.BM25))
    finally:
        store.close()
    assert outcome.plan.chained and not outcome.plan.aspects
    cov = coverage(outcome)
    assert HOP_ASPECT not in cov["aspects_missing"] + cov["aspects_covered"]
    rec = recommend(outcome, cov, threshold=0.7, min_question_word_share=WORD_SHARE, confidence=1.0,
                    min_proceed_confidence=0.2, default_owner=None)
    assert rec.action == "proceed"


def test_a_when_clause_that_describes_no_entity_is_no_hop(tmp_path: Path) -> None:
    """"What happens when the Tidepool primary dies?" reads as nested ("when") but describes no entity: the hop
    had been demanded anyway (one entity assumed), so a complete answer came back "re-query" with nothing to
    focus on (a walkthrough)."""
    failover = make_chunk("failover", "When the Tidepool primary dies, the standby is promoted within thirty "
                                      "seconds and the pooler reconnects.", title="Tidepool failover")
    store = counting_store(tmp_path / "when", [failover, OTHER])
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config())
        outcome = run_search(parts, SearchRequest("What happens when the Tidepool primary dies?",
                                                  mode=RetrievalMode.BM25))
    finally:
        store.close()
    assert outcome.plan.chained and outcome.plan.aspects and described_entities(outcome.request.query) == 0
    cov = coverage(outcome)
    assert HOP_ASPECT not in cov["aspects_missing"] + cov["aspects_covered"]
    rec = recommend(outcome, cov, threshold=0.7, min_question_word_share=WORD_SHARE, confidence=1.0,
                    min_proceed_confidence=0.2, default_owner=None)
    assert rec.action == "proceed"

@pytest.mark.parametrize(("question", "described"), [
    ("Who was in charge of the country where the composer of Aschenbrodel was a citizen?", 2),
    ("What is the name of the waterfall in the country where the Bubye River is found?", 1),  # "name of": asked
    ("In which country was the composer of Kiss and Tell born?", 1),
    ("When was Kiss and Tell released?", 0),
    # A relation by origin or likeness describes an entity too: "the drummer from X", "the same year as Y".
    ("Which label signed the drummer from Bloc Party?", 1),
    ("Which novel came out in the same year as the sequel of Middlemarch?", 2),
])
def test_described_entities(question: str, described: int) -> None:
    assert described_entities(question) == described


def test_one_followed_page_does_not_cover_two_described_entities(tmp_path: Path) -> None:
    """"the country where the actress who portrayed Corliss Archer was born" describes two entities (the
    actress, the country): one linked page (Shirley Temple) is not the whole chain."""
    question = ("Which language is spoken in the country where the actress who portrayed Corliss Archer in the "
                "film Kiss and Tell was born?")
    assert described_entities(question) == 2
    cov, _ = _coverage(tmp_path / "one-hop", [FILM, TEMPLE, OTHER], question)
    assert HOP_ASPECT in cov["aspects_missing"]


def test_a_followed_page_the_named_page_does_not_lead_to_is_not_the_hop(tmp_path: Path) -> None:
    """Shirley Temple's page was found by following a name out of another page; the page the question names
    (the film) does not name her, so the context does not show that she is the woman it describes."""
    film = make_chunk("film", "Kiss and Tell is a 1945 comedy film about a teenage girl and her family.",
                      title="Kiss and Tell (film)")
    review = make_chunk("review", "The woman who portrayed Corliss Archer in the film was Shirley Temple, "
                                  "critics wrote of the government position comedy.", title="Comedy reviews")
    cov, _ = _coverage(tmp_path / "detached", [film, review, TEMPLE, OTHER])
    assert HOP_ASPECT in cov["aspects_missing"]
    cov, _ = _coverage(tmp_path / "attached", [FILM, review, TEMPLE, OTHER])  # the film's page names her
    assert HOP_ASPECT in cov["aspects_covered"]


@pytest.mark.parametrize(("question", "phrases"), [
    ("Who was in charge of the country where the composer of Aschenbrodel was a citizen?",
     ["the composer of Aschenbrodel was a citizen", "the country where the composer of Aschenbrodel was a citizen"]),
    ("In what county is the city where Harris W. Fawell was born?", ["the city where Harris W. Fawell was born"]),
    ("Who is the spouse of Big Eye's main director?",
     ["Big Eye's main director", "the spouse of Big Eye's main director"]),
    ("What is the rollback procedure for a bad release that is already serving production traffic?", []),
    # A quoted string or code span is a name too; a description ends with its sentence.
    ('Which army invaded the country whose domain was ".cs"?', ['the country whose domain was ".cs"']),
    ("I spread the replicas of a web tier across zones. When should I use `maxSkew`?", []),
])
def test_described_phrases_start_from_a_name_innermost_first(question: str, phrases: list[str]) -> None:
    assert described_phrases(question) == phrases


@pytest.mark.parametrize(("corpus", "reach"), [
    ([FILM, TEMPLE, OTHER], 2),  # the film's page names Shirley Temple, whose page is in the context
    ([FILM, OTHER], 1),  # only the page the question names
    ([TEMPLE, OTHER], 0),  # no page the question names: nothing to reach from
])
def test_the_evidence_chain_starts_at_the_named_page(tmp_path: Path, corpus: list, reach: int) -> None:  # type: ignore[type-arg]
    store = counting_store(tmp_path / f"chain{reach}", corpus)
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config())
        outcome = run_search(parts, SearchRequest(CHAINED, mode=RetrievalMode.BM25))
    finally:
        store.close()
    assert evidence_chain(outcome) == reach

