"""Which of a question's words no evidence holds (the off-topic check): identifiers whole and verbatim
(ignoring case and spacing, in the title, heading or text), every other word by its term."""

from __future__ import annotations

import itertools

import pytest

from evidex.evidence.words import speaks_of, words_held
from evidex.signals.compute import describe_off_topic
from evidex.types import Candidate, Chunk, Provenance

_IDS = itertools.count()


def evidence(text: str, heading: str = "") -> Candidate:
    n = str(next(_IDS))
    return Candidate(Chunk(record_id=f"u{n}", doc_id="d", chunk_index=0, source="s.md", title="Title", text=text,
                           citation_anchor=None, span_start=0, span_end=len(text), content_hash=f"h{n}",
                           provenance=Provenance(), heading=heading), 1.0)


@pytest.mark.parametrize(("question", "text", "heading", "asked", "missing"), [
    ("Why was VL_LEASE_REVOKED raised?", "Leases expire; VL_LEASE_EXPIRED is raised.", "", 2, ["VL_LEASE_REVOKED"]),
    ("Why was VL_LEASE_REVOKED raised?", "It is raised when a lease is revoked.", "VL_LEASE_REVOKED", 2, []),
    ("What does `kubectl get pods` print?", "KUBECTL GET  PODS prints a table.", "", 4, []),  # code of words
    ("Why does TIDEPOOL_IDLE_TIMEOUT fire?", r"Set TIDEPOOL\_IDLE\_TIMEOUT lower or it will fire", "", 2, []),
    ("Is Long-running work retried?", "long running work is retried", "", 4, []),
    ("What is at https://kubernetes.io/docs?", "See kubernetes.io for the docs.", "", 2, []),
    ("Is the k8s-prod cluster named e.g. prod?", "The cluster is named prod.", "", 4, ["k8s-prod"]),
    ("Is the caf\u00e9 open?", "The cafe\u0301 is open daily.", "", 2, []),  # composed vs decomposed accent
    ("Why was \uff36\uff2c\uff3f\uff2c\uff25\uff21\uff33\uff25 raised?", "VL and LEASE are raised apart.", "", 2,
     ["VL_LEASE"]),  # full width: one identifier, not "VL" and "LEASE"
    ("Is the cafe\u0301 open?", "The caf\u00e9 is open daily.", "", 2, []),
])
def test_unmatched_words(question: str, text: str, heading: str, asked: int, missing: list[str]) -> None:
    held = words_held(question, [chunk := evidence(text, heading)], [chunk])
    assert (held.asked, list(held.missing)) == (asked, missing)


@pytest.mark.parametrize(("focus", "text", "speaks"), [
    ("cafe\u0301 hours", "The caf\u00e9 opens at nine.", True),
    ("zzqqxx", "The caf\u00e9 opens at nine.", False),
    ("what is it", "What is it? It is a caf\u00e9.", False),  # only stopwords: nothing to hold
    ("VL_LEASE_REVOKED cafe", "The cafe raised VL_LEASE_EXPIRED.", False),  # an identifier must be whole
    ("max_pods", "Set max_pods in the kubelet file.", True),  # a lone snake_case name is one identifier
    ("max_pods", "The max number of pods per node.", False),  # its pieces apart are not it
])
def test_a_chunk_speaks_of_a_focus_only_if_it_holds_something_of_it(focus: str, text: str, speaks: bool) -> None:
    assert speaks_of(evidence(text).chunk, focus) is speaks


def test_words_weigh_their_rarity_among_the_candidates() -> None:
    """Three of five words held is most of the question, unless the three are what every candidate says and the
    two missing ones are what the question is about."""
    question = "HSM master key ceremony custodians"
    common = [evidence(f"The HSM protects the master key, entry {i}.") for i in range(20)]
    held = words_held(question, common[:3], common)
    assert (held.asked, held.missing) == (5, ("ceremony", "custodians"))
    assert held.weighted_share < 0.4 < held.held / held.asked
    assert describe_off_topic(held) == ("3 of the question's 5 words occur, but not ceremony, custodians, "
                                        "in the evidence: it may be off-topic for this index")
    rare = [*common, evidence("The key ceremony has two custodians.")]
    assert words_held(question, [rare[-1], *common[:2]], rare).weighted_share == 1.0
