"""The fused reranker: `w_ce·cross-encoder + w_ret·retrieval + w_lex·lexical overlap + w_title·title match
+ w_inlink·inlink match + exact-token bonus`, every term normalised to [0, 1] over the candidate pool.

The inlink match is the question's words against what other pages say around their links to a candidate's page
(`inlink_score`), where the index has such links and the requester may read them; without any, its weight is
dropped like the cross-encoder's.

Without a cross-encoder (the offline default: no weights can be had here, and one over 50 candidates
costs ~2 s per query on 2 cores) its weight is dropped and the rest renormalised; the result says so.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Protocol

from evidex.config import EvidenceConfig
from evidex.evidence.terms import chunk_terms, exact_tokens, terms
from evidex.retrieval.fusion import min_max
from evidex.types import Candidate


class CrossEncoder(Protocol):
    name: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...

    def tokens(self, query: str, texts: Sequence[str]) -> int:
        """How many tokens scoring these pairs feeds the model (after truncation): the cost a result reports."""
        ...


class RequestCrossEncoder:
    """A cross-encoder for one request (one query): each text is scored once, so the rerank after rescue reuses
    the first pass's scores, and the tokens it is fed are counted for the result's cost."""

    def __init__(self, model: CrossEncoder) -> None:
        self.name = model.name
        self._model = model
        self._scores: dict[str, float] = {}
        self.pairs_scored = 0
        self.tokens_used = 0

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        todo = [t for t in dict.fromkeys(texts) if t not in self._scores]
        if todo:
            self._scores.update(zip(todo, self._model.score(query, todo), strict=True))
            self.pairs_scored += len(todo)
            self.tokens_used += self._model.tokens(query, todo)
        return [self._scores[t] for t in texts]

    def tokens(self, query: str, texts: Sequence[str]) -> int:
        return self._model.tokens(query, texts)


@dataclass(frozen=True)
class RerankWeights:
    """The reranker's weights. evidex's defaults, and why, are `[evidence]`'s in `evidex.config`
    (`from_config`); there is no second set here."""

    cross_encoder: float
    retrieval: float
    lexical: float
    title: float
    linked: float  # the title is a name the best evidence mentions (a multi-hop bridge)
    exact_token_bonus: float  # per verbatim identifier, capped at 2 identifiers
    cross_encoder_top_n: int
    cited_bonus: float = 0.0  # a page the leading evidence links to (`evidex.evidence.citations`)
    inlink: float = 0.0  # what other pages say around their links to the candidate's page matches the question

    @classmethod
    def from_config(cls, ev: EvidenceConfig) -> RerankWeights:
        return cls(cross_encoder=ev.w_cross_encoder, retrieval=ev.w_retrieval, lexical=ev.w_lexical,
                   title=ev.w_title, linked=ev.w_linked, inlink=ev.w_inlink, exact_token_bonus=ev.exact_token_bonus,
                   cross_encoder_top_n=ev.cross_encoder_top_n, cited_bonus=ev.cited_bonus)


@dataclass(frozen=True)
class RerankOutcome:
    candidates: tuple[Candidate, ...]
    cross_encoder: str | None  # the model applied, or None
    weights: dict[str, float]


@lru_cache(maxsize=65536)  # a page's inlink contexts recur in every request that meets the page
def context_terms(context: str) -> frozenset[str]:
    """The terms of one inlink context, computed once (a server's warm-up computes them all)."""
    return frozenset(terms(context))


def inlink_score(query: str, inlinks: Mapping[str, Sequence[str]], sources: Sequence[str]) -> dict[str, float]:
    """BM25 of the question's words against each page's inlink contexts (a word's frequency: how many of the
    contexts hold it), the word rarities taken among `sources` (the request's candidate pages: no statistic of
    pages the request did not meet, or may not read), scaled to the best page's score (0 to 1). Empty when no
    page has a context holding a question word."""
    wanted = frozenset(terms(query))
    held = {s: [context_terms(c) for c in inlinks.get(s, ())] for s in dict.fromkeys(sources)}
    counts = {s: Counter(t for context in contexts for t in wanted & context) for s, contexts in held.items()}
    if not any(counts.values()):
        return {}
    n = len(held)
    lengths = {s: sum(len(context) for context in contexts) for s, contexts in held.items()}
    average = sum(lengths.values()) / n or 1.0
    frequency = Counter(t for count in counts.values() for t in count)
    scores = {s: sum(math.log(1 + (n - frequency[t] + 0.5) / (frequency[t] + 0.5)) * tf * 2.2
                     / (tf + 1.2 * (0.25 + 0.75 * lengths[s] / average)) for t, tf in count.items())
              for s, count in counts.items()}
    best = max(scores.values())
    return {s: v / best for s, v in scores.items()} if best > 0 else {}


def rerank(query: str, candidates: Sequence[Candidate], weights: RerankWeights,
           cross_encoder: CrossEncoder | None = None, aspects: Sequence[str] = (),
           linked: frozenset[str] = frozenset(), cited: frozenset[str] = frozenset(),
           inlinks: Mapping[str, Sequence[str]] | None = None) -> RerankOutcome:
    """`candidates` scored and sorted. `inlinks`: for candidate sources, the contexts of the readable links to
    them from other pages (`Store.inlink_contexts`)."""
    if not candidates:
        return RerankOutcome((), cross_encoder.name if cross_encoder else None, {})
    q_terms = terms(" ".join([query, *aspects]))
    per_chunk = [chunk_terms(c.chunk) for c in candidates]
    # Pool-local IDF: terms rare among the candidates discriminate between them.
    n = len(candidates)
    df = {t: sum(1 for ct, _ in per_chunk if t in ct) for t in q_terms}
    idf = {t: math.log(1 + (n + 1) / (df[t] + 0.5)) for t in q_terms}
    total_idf = sum(idf.values()) or 1.0
    lexical = [sum(idf[t] for t in q_terms if t in ct) / total_idf for ct, _ in per_chunk]
    q_set = set(q_terms)
    title = [sum(1 for t in tt if t in q_set) / len(tt) if tt else 0.0 for _, tt in per_chunk]
    retrieval = min_max([c.score for c in candidates])
    idents = exact_tokens(query)
    bonus = [weights.exact_token_bonus * min(2, sum(1 for tok in idents if tok in c.chunk.text))
             + (weights.cited_bonus if c.chunk.record_id in cited else 0.0) for c in candidates]
    ce_scores: list[float] = [0.0] * n
    w = {"retrieval": weights.retrieval, "lexical": weights.lexical, "title": weights.title}
    if linked:
        w["linked"] = weights.linked
    inlink = inlink_score(query, inlinks or {}, [c.chunk.source for c in candidates]) if weights.inlink > 0 else {}
    if inlink:
        w["inlink"] = weights.inlink
    if cross_encoder is not None and weights.cross_encoder > 0:
        top = min(n, weights.cross_encoder_top_n)
        raw = cross_encoder.score(query, [c.chunk.text for c in candidates[:top]])
        ce_scores = min_max(raw) + [0.0] * (n - top)
        w["cross_encoder"] = weights.cross_encoder
    total = sum(w.values()) or 1.0
    w = {key: value / total for key, value in w.items()}
    out = []
    for i, c in enumerate(candidates):
        parts = {"retrieval": retrieval[i], "lexical": lexical[i], "title": title[i]}
        if linked:
            parts["linked"] = 1.0 if c.chunk.record_id in linked else 0.0
        if inlink:
            parts["inlink"] = inlink.get(c.chunk.source, 0.0)
        if "cross_encoder" in w:
            parts["cross_encoder"] = ce_scores[i]
        score = sum(w[key] * parts[key] for key in w) + bonus[i]
        named = (*tuple((key, round(value, 6)) for key, value in sorted(parts.items())), ("bonus", bonus[i]))
        out.append(replace(c, score=score, scores=named))
    out.sort(key=lambda c: (-c.score, c.chunk.record_id))
    return RerankOutcome(tuple(out), cross_encoder.name if cross_encoder is not None and "cross_encoder" in w
                         else None, {key: round(v, 4) for key, v in w.items()})
