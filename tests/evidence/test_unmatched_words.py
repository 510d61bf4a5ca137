"""Which of a question's words no evidence holds (the off-topic check): identifiers whole and verbatim
(ignoring case and spacing, in the title, heading or text), every other word by its term."""

from __future__ import annotations

import itertools

import pytest

from evidex.evidence.words import find_unmatched_words, speaks_of
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
    ("Is the cafe\u0301 open?", "The caf\u00e9 is open daily.", "", 2, []),
])
def test_unmatched_words(question: str, text: str, heading: str, asked: int, missing: list[str]) -> None:
    assert find_unmatched_words(question, [evidence(text, heading)]) == (asked, missing)


@pytest.mark.parametrize(("focus", "text", "speaks"), [
    ("cafe\u0301 hours", "The caf\u00e9 opens at nine.", True),
    ("zzqqxx", "The caf\u00e9 opens at nine.", False),
    ("what is it", "What is it? It is a caf\u00e9.", False),  # only stopwords: nothing to hold
    ("VL_LEASE_REVOKED cafe", "The cafe raised VL_LEASE_EXPIRED.", False),  # an identifier must be whole
])
def test_a_chunk_speaks_of_a_focus_only_if_it_holds_something_of_it(focus: str, text: str, speaks: bool) -> None:
    assert speaks_of(evidence(text).chunk, focus) is speaks
