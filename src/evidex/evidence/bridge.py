"""Bridging: the evidence a multi-hop question needs next is often named in the evidence found first
("the actor who played the keeper in Salt Road" -> the page on Salt Road names Mara Voss).

From the few best candidates, take the names they mention that the question does not, and look each
up with one bounded sparse search over titles. A hit whose title is that name joins the pool as a linked
candidate. At most `max_entities` searches per request; never a loop. Then one search of the question with
the first of those names (`context_search`): its best new hit is linked too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from evidex.evidence.aspects import entity_spans, sentences, spelled_apart
from evidex.evidence.plan import RequiredFamily
from evidex.evidence.terms import terms
from evidex.evidence.titles import PLAIN, TitleConvention
from evidex.stores.protocol import Store
from evidex.types import Candidate, ScoredId, SearchFilters


@dataclass(frozen=True)
class BridgeSearch:
    entity: str
    from_record: str
    hits: int
    linked: tuple[str, ...]  # record ids whose title is the entity (a search with the question: its best new hit)
    ms: float
    named: tuple[str, ...] = ()  # of those, the pages named exactly by the entity
    with_question: bool = False  # `context_search`: the question and the names, over the text

    @property
    def followed(self) -> tuple[str, ...]:
        """The pages reached by following a name: titled by it. A hit of a search with the question only shares
        words with the question and the names."""
        return () if self.with_question else self.linked

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"entity": self.entity, "from": self.from_record, "hits": self.hits,
                                "linked": list(self.linked), "named": list(self.named)}
        if self.with_question:
            d["with_question"] = True
        return d


def context_search(store: Store, question: str, sources: Sequence[Candidate], *, names: int, limit: int,
                   held: set[str], to_candidates: Callable[[list[ScoredId]], list[Candidate]],
                   filters: SearchFilters | None = None) -> tuple[list[Candidate], BridgeSearch | None]:
    """One sparse search of the question with the first `names` names its leading evidence adds. The page a
    nested question needs next often holds the bridge entity without being titled by it ("the bridge in
    the city where the Orrin Canal ends": the Orrin Canal page names Caldport, and the Tidegate Bridge page,
    which a title look-up of "Caldport" cannot find, holds both "bridge" and "Caldport"). Its best
    hit the pool does not hold (`held`) joins it as a linked candidate. Returns it and the search, or nothing
    when the evidence adds no name."""
    found = bridge_entities(question, sources, names) if names > 0 else []
    if not found:
        return [], None
    started = time.perf_counter()
    hits = store.search_sparse(" ".join([question, *(name for name, _ in found)]), limit, filters)
    best = next((c for c in to_candidates(hits) if c.chunk.record_id not in held), None)
    linked = (best.chunk.record_id,) if best is not None else ()
    search = BridgeSearch(" + ".join(name for name, _ in found), found[0][1], len(hits), linked,
                          (time.perf_counter() - started) * 1000, with_question=True)
    return ([best] if best is not None else []), search


def bridge_entities(question: str, top: Sequence[Candidate], max_entities: int) -> list[tuple[str, str]]:
    """(name, record id it came from): names in the top candidates that add something to the question."""
    q_terms = frozenset(terms(question))
    seen: list[frozenset[str]] = []
    out: list[tuple[str, str]] = []
    for c in top:
        own_title = frozenset(terms(c.chunk.title))
        for name in _names_by_relevance(c.chunk.text, q_terms):
            t = frozenset(terms(name))
            if not t or t <= q_terms or t == own_title or any(t == s for s in seen):
                continue
            if len(t) == 1 and (len(name) < 4 or name.isdigit()):
                continue
            seen.append(t)
            out.append((name, c.chunk.record_id))
            if len(out) >= max_entities:
                return out
    return out


@lru_cache(maxsize=256)
def _names_by_relevance(text: str, q_terms: frozenset[str]) -> tuple[str, ...]:
    """The names of `text`, those in sentences sharing more of the question's terms first (in text order
    otherwise): the sentence that answers the question names the next hop. Cached: a nested question's
    names are read by the bridge and again by `context_search`, from the same leading evidence."""
    scored: list[tuple[int, int, int, str]] = []
    for i, sentence in enumerate(sentences(text)):
        overlap = len(q_terms & set(terms(sentence)))
        scored.extend((-overlap, i, j, name) for j, name in enumerate(entity_spans(sentence)))
    return tuple(name for *_, name in sorted(scored))


def named(candidate: Candidate, entity: str, titles: TitleConvention = PLAIN) -> bool:
    """The candidate's page is named by the entity itself: its bare title (`titles`: how the corpus writes them)
    has exactly the entity's terms, or those of its words spelled apart ("StorageClass" names the page "Storage
    Classes")."""
    title = frozenset(terms(titles.bare(candidate.chunk.title)))
    return bool(title) and title in _name_terms(entity)


@lru_cache(maxsize=1024)
def _name_terms(entity: str) -> tuple[frozenset[str], frozenset[str]]:
    """The terms of a name as written and spelled apart: computed once per name, not per candidate tested."""
    return frozenset(terms(entity)), frozenset(terms(spelled_apart(entity)))


def titled(candidate: Candidate, entity: str, titles: TitleConvention = PLAIN) -> bool:
    """The candidate's title names the entity, or is named by it: either's terms hold the other's (ignoring a
    qualifier such as '(film)' where the corpus qualifies titles, `titles`)."""
    title = titles.unqualified(candidate.chunk.title)
    t, e = set(terms(title)), set(terms(entity))
    return bool(t) and bool(e) and (t <= e or e <= t)


def bridge(store: Store, question: str, ranked: Sequence[Candidate], *, from_top: int, max_entities: int,
           limit: int, to_candidates: Callable[[list[ScoredId]], list[Candidate]], hops: int = 1,
           filters: SearchFilters | None = None, titles: TitleConvention = PLAIN
           ) -> tuple[list[Candidate], list[BridgeSearch]]:
    """Follow names from the best candidates (hop 1), then from what hop 1 linked (hop 2, ...).
    `max_entities` bounds the searches of all hops together; `filters`: what the searches may see; `titles`:
    how the corpus writes titles."""
    have = {c.chunk.record_id for c in ranked}
    added: list[Candidate] = []
    searches: list[BridgeSearch] = []
    sources = list(ranked[:from_top])
    followed: set[str] = set()
    per_hop = -(-max_entities // max(1, hops))
    for _ in range(hops):
        hop_budget = min(per_hop, max_entities - len(searches))
        if hop_budget <= 0 or not sources:
            break
        names = [(e, src) for e, src in bridge_entities(question, sources, hop_budget + len(followed))
                 if e.lower() not in followed][:hop_budget]
        linked_now: list[Candidate] = []
        for entity, source in names:
            followed.add(entity.lower())
            started = time.perf_counter()
            hits = store.search_sparse(entity, limit, filters, title_only=True)
            linked = [c for c in to_candidates(hits) if titled(c, entity, titles)]
            fresh = [c for c in linked if c.chunk.record_id not in have]
            have.update(c.chunk.record_id for c in fresh)
            added.extend(fresh)
            linked_now.extend(linked[:1])
            searches.append(BridgeSearch(entity, source, len(hits), tuple(c.chunk.record_id for c in linked),
                                         (time.perf_counter() - started) * 1000,
                                         tuple(c.chunk.record_id for c in linked if named(c, entity, titles))))
        sources = linked_now
    return added, searches


def named_pages(store: Store, families: Sequence[RequiredFamily], ranked: Sequence[Candidate], *,
                max_lookups: int, limit: int, to_candidates: Callable[[list[ScoredId]], list[Candidate]],
                filters: SearchFilters | None = None, titles: TitleConvention = PLAIN
                ) -> tuple[list[Candidate], dict[str, tuple[str, ...]], list[BridgeSearch]]:
    """The pages a named aspect titles ("Pod Security Standards" for "Pod Security Standard"): its best
    evidence, better than a page that only mentions the name. Taken from the pool, else looked up with one
    title search per name (seeing only `filters`), at most `max_lookups` in all. Returns the candidates
    added, the record ids named
    per aspect, and the look-ups made."""
    have = {c.chunk.record_id for c in ranked}
    added: list[Candidate] = []
    pages: dict[str, tuple[str, ...]] = {}
    searches: list[BridgeSearch] = []
    for family in families:
        if not family.entity:
            continue
        found = [c for c in ranked if named(c, family.name, titles)]
        if not found and len(searches) < max_lookups:
            started = time.perf_counter()
            apart = spelled_apart(family.name)
            query = family.name if apart == family.name else f"{family.name} {apart}"
            hits = store.search_sparse(query, limit, filters, title_only=True)
            found = [c for c in to_candidates(hits) if named(c, family.name, titles)]
            fresh = [c for c in found if c.chunk.record_id not in have]
            have.update(c.chunk.record_id for c in fresh)
            added.extend(fresh)
            found_ids = tuple(c.chunk.record_id for c in found)
            searches.append(BridgeSearch(family.name, "(question)", len(hits), found_ids,
                                         (time.perf_counter() - started) * 1000, found_ids))
        if found:
            pages[family.name] = tuple(c.chunk.record_id for c in found)
    return added, pages, searches
