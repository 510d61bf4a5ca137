"""The fused reranker on tiny inline candidates: the exact-token bonus, title match, weights renormalised
without a cross-encoder (and the metadata saying so), and a cross-encoder that changes the order.

The cross-encoder here is a real, tiny scoring function (token overlap) meeting the `CrossEncoder`
protocol; it is an input to the reranker, not the code under test.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from evidence_support import build_store, cand, constant_encoder, ids, make_chunk
from hypothesis import given
from hypothesis import strategies as st

from evidex.admission.gate import AdmissionGate, Principal
from evidex.config import Config
from evidex.pipeline import PipelineParts, SearchRequest, run_search
from evidex.rerank.fused import RerankWeights, exact_tokens, rerank
from evidex.types import Candidate, RetrievalMode

# The design's weights (DESIGN.md), not evidex's tuned defaults: these tests check the formula.
W = RerankWeights(cross_encoder=0.4, retrieval=0.3, lexical=0.3, title=0.15, linked=0.15, exact_token_bonus=0.1,
                  cross_encoder_top_n=30)


class OverlapCrossEncoder:
    """Scores a text by how many distinct query tokens it contains."""

    name = "token-overlap"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((query, len(texts)))
        q = set(re.findall(r"\w+", query.lower()))
        return [float(len(q & set(re.findall(r"\w+", t.lower())))) for t in texts]

    def tokens(self, query: str, texts: Sequence[str]) -> int:
        return sum(len(re.findall(r"\w+", f"{query} {t}")) for t in texts)


def _scores(c: Candidate) -> dict[str, float]:
    return dict(c.scores)


@pytest.mark.parametrize(("query", "tokens"), [
    ("How do I set `maxConnections` for the pool?", ("maxConnections",)),
    ("What does --pool-size do and why ERR_POOL_EXHAUSTED?", ("--pool-size", "ERR_POOL_EXHAUSTED")),
    ("Is checkout.api.northwind.example on v4beta2?", ("checkout.api.northwind.example", "v4beta2")),
    ("How do I rotate keys?", ()),
    # A hyphen inside a word starts no flag, and a camelCase or PascalCase name is taken whole.
    ("Does AMP-activated kinase bind UreA or PodSecurity?", ("AMP-activated", "UreA", "PodSecurity")),
    ("Run kubectl apply --dry-run=server, not -n", ("--dry-run",)),
    # snake_case in either case, as a whole word only.
    ("Why is max_pods ignored while VL_LEASE_REVOKED repeats?", ("max_pods", "VL_LEASE_REVOKED")),
])
def test_exact_tokens(query: str, tokens: tuple[str, ...]) -> None:
    assert exact_tokens(query) == tokens


def test_exact_token_bonus_for_verbatim_identifiers() -> None:
    verbatim = cand(make_chunk("verbatim", "Set maxConnections in the pooler config to bound connections.",
                               title="Pooler"), 0.5)
    prose = cand(make_chunk("prose", "Set the maximum connections in the pooler config to bound connections.",
                            title="Pooler"), 0.5)
    outcome = rerank("How do I set `maxConnections` for the pool?", [prose, verbatim], W)
    assert ids(outcome.candidates) == ["verbatim", "prose"]
    by_id = {c.chunk.record_id: _scores(c) for c in outcome.candidates}
    assert by_id["verbatim"]["bonus"] == pytest.approx(W.exact_token_bonus)
    assert by_id["prose"]["bonus"] == 0.0


def test_exact_token_bonus_is_capped_at_two_identifiers() -> None:
    text = "Run with --pool-size and --max-conns and --idle-timeout set."
    c = cand(make_chunk("all", text), 0.5)
    outcome = rerank("Do --pool-size, --max-conns and --idle-timeout interact?", [c], W)
    assert _scores(outcome.candidates[0])["bonus"] == pytest.approx(2 * W.exact_token_bonus)


def test_title_match() -> None:
    text = "Run the documented command and watch the output."
    titled = cand(make_chunk("titled", text, title="Transit key"), 0.5)
    untitled = cand(make_chunk("untitled", text, title="Gardening"), 0.5)
    outcome = rerank("rotate the transit key", [untitled, titled], W)
    assert ids(outcome.candidates) == ["titled", "untitled"]
    by_id = {c.chunk.record_id: _scores(c) for c in outcome.candidates}
    assert by_id["titled"]["title"] == 1.0 and by_id["untitled"]["title"] == 0.0


def test_weights_are_renormalised_without_a_cross_encoder() -> None:
    a = cand(make_chunk("a", "rotate the transit key with rewrap", title="Key rotation"), 0.9)
    b = cand(make_chunk("b", "a page about backups", title="Backups"), 0.2)
    outcome = rerank("rotate the transit key", [b, a], W)
    assert outcome.cross_encoder is None
    assert outcome.weights == {"retrieval": 0.4, "lexical": 0.4, "title": 0.2}
    assert math.fsum(outcome.weights.values()) == pytest.approx(1.0)
    for c in outcome.candidates:
        parts = _scores(c)
        assert "cross_encoder" not in parts
        expected = sum(outcome.weights[k] * parts[k] for k in outcome.weights) + parts["bonus"]
        assert c.score == pytest.approx(expected)
    assert ids(outcome.candidates) == ["a", "b"]


def test_a_cross_encoder_changes_the_order_and_is_reported() -> None:
    query = "which team approves production elevation requests"
    # retrieval prefers `first`; the cross-encoder prefers `second`, which names every query token
    first = cand(make_chunk("first", "elevation of production access", title="Access"), 1.0)
    second = cand(make_chunk("second", "the secondary on call approves production elevation requests for a team",
                             title="Access"), 0.0)
    plain = rerank(query, [first, second], W)
    assert ids(plain.candidates) == ["first", "second"]
    encoder = OverlapCrossEncoder()
    reranked = rerank(query, [first, second], W, cross_encoder=encoder)
    assert ids(reranked.candidates) == ["second", "first"]
    assert reranked.cross_encoder == "token-overlap"
    total = W.cross_encoder + W.retrieval + W.lexical + W.title
    assert reranked.weights["cross_encoder"] == pytest.approx(round(W.cross_encoder / total, 4))
    assert math.fsum(reranked.weights.values()) == pytest.approx(1.0, abs=1e-3)
    assert {c.chunk.record_id: _scores(c)["cross_encoder"] for c in reranked.candidates} == {"second": 1.0,
                                                                                            "first": 0.0}
    assert encoder.calls == [(query, 2)]


def test_the_cross_encoder_scores_only_the_top_n() -> None:
    pool = [cand(make_chunk(f"c{i}", f"text number {i}"), 1.0 - i / 10) for i in range(5)]
    encoder = OverlapCrossEncoder()
    outcome = rerank("text number", pool, dataclasses.replace(W, cross_encoder_top_n=2), cross_encoder=encoder)
    assert encoder.calls == [("text number", 2)]
    assert [_scores(c)["cross_encoder"] for c in outcome.candidates if c.chunk.record_id in {"c2", "c3", "c4"}] == [
        0.0, 0.0, 0.0]


def test_a_zero_cross_encoder_weight_means_none_applied() -> None:
    encoder = OverlapCrossEncoder()
    outcome = rerank("q", [cand(make_chunk("a", "q"), 0.5)], dataclasses.replace(W, cross_encoder=0.0),
                     cross_encoder=encoder)
    assert outcome.cross_encoder is None and encoder.calls == []


def test_empty_pool() -> None:
    assert rerank("q", [], W).candidates == ()


CORPUS = [
    make_chunk("elev-a", "elevation of production access", title="Access", family="rbac"),
    make_chunk("elev-b", "the secondary on call approves production elevation requests for a team",
               title="Access", family="rbac"),
]


@pytest.mark.parametrize("with_encoder", [False, True])
def test_pipeline_reports_the_reranker(tmp_path: Path, with_encoder: bool) -> None:
    store = build_store(tmp_path / "idx", CORPUS)
    try:
        encoder = OverlapCrossEncoder() if with_encoder else None
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate(),
                              cross_encoder=encoder)
        outcome = run_search(parts, SearchRequest("which team approves production elevation requests",
                                                  principal=Principal.of("p", ["public"]),
                                                  retrieved_at=datetime(2026, 1, 1, tzinfo=UTC),
                                                  mode=RetrievalMode.BM25))
        rerank_stage = next(s for s in outcome.trace.stages if s.name == "rerank")
        if with_encoder:
            assert outcome.reranker["cross_encoder"] == "token-overlap"
            assert rerank_stage.decisions == {"cross_encoder": "token-overlap"}
            assert "cross_encoder" in outcome.reranker["weights"]
        else:
            assert outcome.reranker["cross_encoder"] is None
            assert rerank_stage.decisions == {"cross_encoder": "none (offline default)"}
            assert set(outcome.reranker["weights"]) == {"retrieval", "lexical", "title"}
    finally:
        store.close()


@given(st.text(alphabet="aZ9-._ `", max_size=60))
def test_exact_tokens_start_words(query: str) -> None:
    """Every identifier starts a word (or a backquoted span), never inside one; matching from inside a word
    had made a long word quadratic."""
    def starts_a_word(i: int) -> bool:
        return i == 0 or not (query[i - 1].isalnum() or query[i - 1] == "_")

    for token in exact_tokens(query):
        assert any(query.startswith(token, i) and starts_a_word(i) for i in range(len(query)))
