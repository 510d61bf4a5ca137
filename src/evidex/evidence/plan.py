"""Evidence plans: which families of evidence a question needs, each with a rescue query.

Three sources, recorded in the plan:
- `caller`: an explicit plan passed with the request (the evaluation's oracle plan);
- `shape:<name>`: a question shape declared as data in evidex.toml (keywords / patterns -> families);
- `auto`: no shape matched, so the question is split into aspects (identifiers, named entities, key
  phrases of its sub-questions) and each aspect becomes an obligation with its own rescue query.
Unknown shapes never fail: a question with no usable aspect gets an empty plan and plain retrieval.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evidex.evidence.aspects import is_chained, names_identifier, question_aspects
from evidex.evidence.terms import chunk_terms, holds_verbatim, pool_rarity, terms
from evidex.types import Candidate, Chunk


class PlanSource(enum.Enum):
    CALLER = "caller"
    SHAPE = "shape"
    AUTO = "auto"
    NONE = "none"


_TERM_SHARES_MAX = 4096
_MIN_TERM_SHARE = 0.6  # an automatic aspect is met by a chunk holding this share of its terms


@dataclass(frozen=True)
class RequiredFamily:
    """An evidence obligation. A chunk meets it by family label, source pattern, document id, or (for an
    automatic aspect) by containing enough of the aspect's terms."""

    name: str
    rescue_query: str
    label: str | None = None  # the chunk's stored evidence_family
    source_regex: str | None = None
    doc_ids: tuple[str, ...] = ()
    aspect_terms: tuple[str, ...] = ()
    # Each aspect term's rarity among the request's candidates (`with_term_weights`); empty: all weigh the same.
    term_weights: tuple[float, ...] = ()
    record_ids: tuple[str, ...] = ()  # known best evidence: a focused search's best hits, the pages the name titles
    min_term_share: float = _MIN_TERM_SHARE
    entity: bool = False  # the aspect is a name (not a phrase): a page titled by it is its best evidence
    verbatim: bool = False  # the aspect is an identifier: only a chunk holding it whole meets it
    lead: bool = False  # the lead kept for an aspect nothing met (see `rescue`): kept whatever its grade
    # The term share per chunk, computed once: a request tests each candidate against each aspect in several stages.
    _term_shares: dict[tuple[str, str, str, str], float] = field(default_factory=dict, init=False, repr=False,
                                                                 compare=False)
    _scores: dict[int, tuple[Chunk, float]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def matches(self, chunk: Chunk) -> bool:
        return self.match_score(chunk) >= self.min_term_share

    def match_score(self, chunk: Chunk) -> float:
        """1.0 for a member by label, document or source; 0 for a chunk that does not hold an identifier aspect
        whole; 2.0 for a record known to be the aspect's best evidence; otherwise the share of the aspect's terms
        the chunk contains, each weighted by its rarity when the pipeline has set `term_weights` (title terms
        count extra: a chunk titled by the aspect is about it). Kept per chunk object (chunks are frozen): the
        stages of a request ask it of the same candidates again and again."""
        kept = self._scores.get(id(chunk))
        if kept is not None and kept[0] is chunk:  # the entry holds the chunk: its id is not another's
            return kept[1]
        score = self._match_score(chunk)
        if len(self._scores) < _TERM_SHARES_MAX:
            self._scores[id(chunk)] = (chunk, score)
        return score

    def _match_score(self, chunk: Chunk) -> float:
        if self.label is not None and chunk.provenance.evidence_family == self.label:
            return 1.0
        if self.doc_ids and chunk.doc_id in self.doc_ids:
            return 1.0
        if self.source_regex is not None and re.search(self.source_regex, chunk.source):
            return 1.0
        if self.verbatim and not holds_verbatim(chunk, self.name):  # however it was found (a focused search)
            return 0.0
        if chunk.record_id in self.record_ids:
            return 2.0
        if not self.aspect_terms:
            return 0.0
        key = (chunk.record_id, chunk.content_hash, chunk.title, chunk.heading)
        cached = self._term_shares.get(key)
        if cached is not None:
            return cached
        have, title = chunk_terms(chunk)
        weights = self.term_weights or (1.0,) * len(self.aspect_terms)
        total = sum(weights)
        pairs = tuple(zip(self.aspect_terms, weights, strict=True))
        held = [w for t, w in pairs if t in have]
        score = sum(held) / total
        if held and title:  # the title's terms are among the chunk's: none held, none in the title
            score += 0.5 * (sum([w for t, w in pairs if t in title]) / total)
        if len(self._term_shares) < _TERM_SHARES_MAX:  # bounded: a configured shape's family lives on
            self._term_shares[key] = score
        return score

    @property
    def is_store_filterable(self) -> bool:
        return self.label is not None or self.source_regex is not None or bool(self.doc_ids)

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"name": self.name, "rescue_query": self.rescue_query}
        if self.label is not None:
            d["label"] = self.label
        if self.source_regex is not None:
            d["source_regex"] = self.source_regex
        if self.doc_ids:
            d["doc_ids"] = list(self.doc_ids)
        if self.aspect_terms:
            d["aspect_terms"] = list(self.aspect_terms)
        if self.record_ids:
            d["record_ids"] = list(self.record_ids)
        if self.min_term_share != _MIN_TERM_SHARE:
            d["min_term_share"] = self.min_term_share
        if self.entity:
            d["entity"] = True
        if self.verbatim:
            d["verbatim"] = True
        if self.lead:
            d["lead"] = True
        return d


@dataclass(frozen=True)
class EvidencePlan:
    families: tuple[RequiredFamily, ...]
    aspects: tuple[str, ...]
    source: PlanSource
    shape: str | None = None
    notes: tuple[str, ...] = field(default=())
    chained: bool = False  # one clause describing an unnamed entity: follow names (bridging) to find it
    # Identifiers the question quotes that no record the requester may read holds whole (`question_aspects`):
    # the requester's own values, no obligation.
    unheld: tuple[str, ...] = ()

    @property
    def composition(self) -> str:
        return "chain" if self.chained else "parallel"

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"source": self.source.value, "shape": self.shape, "aspects": list(self.aspects),
                                "families": [f.to_dict() for f in self.families], "composition": self.composition,
                                "notes": list(self.notes)}
        if self.unheld:
            d["not_in_index"] = list(self.unheld)
        return d



def auto_plan(question: str, *, max_aspects: int = 4, held: Callable[[str], bool] | None = None) -> EvidencePlan:
    """A plan from the question alone: each of its aspects (`question_aspects`) an obligation with its own rescue
    query, the aspect's words. `held`: whether the index holds an identifier (one it does not is no obligation;
    the plan's `unheld` names it)."""
    found = question_aspects(question, max_aspects=max_aspects, held=held)
    families = tuple(RequiredFamily(name=a, rescue_query=a, aspect_terms=terms(a), entity=a in found.entities,
                                    verbatim=a in found.verbatim) for a in found.aspects)
    source = PlanSource.AUTO if families else PlanSource.NONE
    return EvidencePlan(families=families, aspects=found.aspects, source=source, chained=is_chained(question),
                        unheld=found.unheld)


def without_frames(plan: EvidencePlan, word_counts: Callable[[str], tuple[int, dict[str, int]]], max_share: float,
                   min_records: int, *, keep: str | None = None) -> tuple[EvidencePlan, tuple[str, ...]]:
    """`plan` without the automatic clause aspects that set the question's frame rather than ask for evidence
    ("How do I turn that on", "Which settings exist for it"): every word of which more than `max_share` of
    the records hold (`word_counts`: the readable records and how many hold each word, from the store). Only on
    an index of at least `min_records` such records: a small knowledge base is about one subject, whose words
    are as common there as a question's frame (a 215-chunk handbook had "rotate the signing keys" as common as
    "turn that on"). A name, an identifier, the aspect `keep` (a focus) and an aspect of words the store cannot
    tell of stay, and so does the last aspect: a frame aspect would otherwise reserve a page that merely holds
    its common words in place of a family's page. Returns the plan and the aspects dropped."""
    if plan.source is not PlanSource.AUTO or max_share >= 1:
        return plan, ()

    def is_frame(f: RequiredFamily) -> bool:
        if f.entity or f.verbatim or f.name == keep:
            return False
        records, holding = word_counts(f.rescue_query)
        return records >= min_records and bool(holding) and all(n > max_share * records for n in holding.values())

    frames = tuple(f.name for f in plan.families if is_frame(f))
    if not frames or len(frames) == len(plan.families):
        return plan, ()
    kept = tuple(f for f in plan.families if f.name not in frames)
    return dataclasses.replace(plan, families=kept, aspects=tuple(a for a in plan.aspects if a not in frames)), frames


def with_term_weights(plan: EvidencePlan, candidates: Sequence[Candidate]) -> EvidencePlan:
    """`plan` with the terms of each aspect but an identifier (met only whole) weighted by their rarity
    among `candidates`, the request's pool: "they should stop at 20 replicas" is then met by a chunk holding
    "capped", not by every page that says "pods" and "50"; a name held in part, only by its rare words ("SQL
    Server" not by a page titled "API Server ..."; "Cypress and Ajuga" by the page on either). A chunk holding
    all of an aspect's terms meets it however common they are."""
    def weighs(f: RequiredFamily) -> bool:
        return bool(f.aspect_terms) and not f.verbatim

    wanted = {t for f in plan.families if weighs(f) for t in f.aspect_terms}
    if not wanted:
        return plan
    weight = pool_rarity(wanted, candidates)
    families = tuple(dataclasses.replace(f, term_weights=tuple(weight[t] for t in f.aspect_terms))
                     if weighs(f) else f for f in plan.families)
    return dataclasses.replace(plan, families=families)



def focus_plan(plan: EvidencePlan, aspect_focus: str | None) -> EvidencePlan:
    """Steer a plan toward one aspect: it becomes the first obligation (added if it was not there)."""
    if not aspect_focus or not aspect_focus.strip():
        return plan
    focus = aspect_focus.strip()
    focus_terms = terms(focus)
    kept = [f for f in plan.families if f.name != focus]
    first = RequiredFamily(name=focus, rescue_query=focus, aspect_terms=focus_terms, verbatim=names_identifier(focus))
    existing = next((f for f in plan.families if f.name == focus), None)
    aspects = (focus, *[a for a in plan.aspects if a != focus])
    return EvidencePlan(families=(existing or first, *kept), aspects=aspects, source=plan.source,
                        shape=plan.shape, notes=(*plan.notes, f"aspect focus: {focus}"), chained=plan.chained,
                        unheld=tuple(a for a in plan.unheld if a != focus))


@dataclass(frozen=True)
class QuestionShape:
    """A question shape declared in evidex.toml ([[shapes]]): detectors -> required families."""

    name: str
    families: tuple[RequiredFamily, ...]
    keywords: tuple[str, ...] = ()
    min_keywords: int = 2
    patterns: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    min_similarity: float = 0.7

    def matches(self, question: str, similarity: float | None = None) -> bool:
        """By a pattern, by enough keywords, or (given the question's `similarity` to its closest example)
        by being close enough to an example question."""
        if any(re.search(p, question, re.I) for p in self.patterns):
            return True
        have = set(terms(question))
        hits = sum(1 for k in self.keywords if set(terms(k)) <= have)
        if self.keywords and hits >= self.min_keywords:
            return True
        return bool(self.examples) and similarity is not None and similarity >= self.min_similarity


SimilarityToExamples = Callable[[QuestionShape], float | None]


def plan_question(question: str, *, shapes: Sequence[QuestionShape] = (), explicit: EvidencePlan | None = None,
                  aspect_focus: str | None = None, max_aspects: int = 4,
                  similarity: SimilarityToExamples | None = None,
                  held: Callable[[str], bool] | None = None) -> EvidencePlan:
    """The plan for a question: the caller's, else the first matching shape, else automatic. `similarity`
    gives the question's cosine to a shape's closest example (shapes with examples need it to match by them);
    `held`, whether the index holds an identifier the question quotes (`auto_plan`)."""
    if explicit is not None:
        chosen = explicit
    else:
        scores = {s.name: similarity(s) if similarity is not None and s.examples else None for s in shapes}
        shape = next((s for s in shapes if s.matches(question, scores[s.name])), None)
        if shape is not None:
            auto = auto_plan(question, max_aspects=max_aspects, held=held)
            score = scores[shape.name]
            notes = (f"similarity to the closest example: {score:.2f}",) if score is not None else ()
            chosen = EvidencePlan(families=shape.families, aspects=auto.aspects, source=PlanSource.SHAPE,
                                  shape=shape.name, chained=auto.chained, notes=notes, unheld=auto.unheld)
        else:
            chosen = auto_plan(question, max_aspects=max_aspects, held=held)
    return focus_plan(chosen, aspect_focus)


def explicit_plan(families: Sequence[RequiredFamily], aspects: Sequence[str] = (), question: str = "") -> EvidencePlan:
    return EvidencePlan(families=tuple(families), aspects=tuple(aspects), source=PlanSource.CALLER,
                        chained=is_chained(question) if question else False)


def plan_from_dict(data: dict[str, Any]) -> EvidencePlan:
    """The inverse of `EvidencePlan.to_dict` (a replayed request's explicit plan)."""
    families = tuple(
        RequiredFamily(name=f["name"], rescue_query=f["rescue_query"], label=f.get("label"),
                       source_regex=f.get("source_regex"), doc_ids=tuple(f.get("doc_ids", ())),
                       aspect_terms=tuple(f.get("aspect_terms", ())), record_ids=tuple(f.get("record_ids", ())),
                       min_term_share=float(f.get("min_term_share", _MIN_TERM_SHARE)),
                       entity=bool(f.get("entity", False)), verbatim=bool(f.get("verbatim", False)),
                       lead=bool(f.get("lead", False)))
        for f in data.get("families", ()))
    return EvidencePlan(families=families, aspects=tuple(data.get("aspects", ())),
                        source=PlanSource(data.get("source", "caller")), shape=data.get("shape"),
                        notes=tuple(data.get("notes", ())), chained=data.get("composition") == "chain",
                        unheld=tuple(data.get("not_in_index", ())))
