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
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from evidex.retrieval.lexical import STOPWORDS
from evidex.types import Candidate, Chunk


class PlanSource(enum.Enum):
    CALLER = "caller"
    SHAPE = "shape"
    AUTO = "auto"
    NONE = "none"


@lru_cache(maxsize=65536)
def stem(token: str) -> str:
    """A light English stemmer (plural and verb endings). Measured against Snowball on the dev sets: Snowball
    conflates more and lowered k8s family recall (0.914 -> 0.885), so the light one stays.

    Known defect: a final "e" is kept, so "namespace" / "namespaces" ("namespac") and "node" / "nodes" do not
    meet. A variant that drops it (and joins adverbs to adjectives, "stopped" to "stop") lowered k8s family
    recall 0.945 -> 0.927 by turning two reserve tie-breaks. Dropping only the final "e" (re-measured on
    2026-11-30): k8s unchanged, the blind k8s set 0.875 -> 0.865, SciFact nDCG 0.7329 -> 0.7335; not taken."""
    if token.endswith("ss") and not token.endswith("sses"):  # "class", "access": no plural to take off
        return token
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            return token[: len(token) - len(suffix)] + keep
    return token


_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


_POSSESSIVE = re.compile(r"['’]s$", re.I)


def terms(text: str) -> tuple[str, ...]:
    """Distinct stemmed content terms of `text`, in order (possessive 's dropped). The terms of
    `content_words`, computed without keeping the words: this runs many times per query."""
    return tuple(dict.fromkeys(t for w in _WORD.findall(unicodedata.normalize("NFKC", text)) if (t := _TERMS[w])))


def _term_set(text: str) -> frozenset[str]:
    """The terms of `text` as a set (`terms` without their order, at a fraction of its cost on a long text:
    this runs for every new chunk a search meets)."""
    found = set(map(_TERMS.__getitem__, _word_set(text)))
    found.discard("")
    return frozenset(found)


_ASCII_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z0-9]+)?")  # `_WORD` on ASCII text
_ASCII_SPACES = str.maketrans({chr(i): " " for i in range(128) if not (chr(i).isalnum() or chr(i) == "'")})


def _word_set(text: str) -> set[str]:
    """The distinct words `_WORD` finds in `text`. ASCII text (nearly every chunk) is split at every character
    a word cannot hold, in a third of the regular expression's time; the few pieces holding an apostrophe are
    matched with it (a word never spans a character it cannot hold, so each piece gives the words it would)."""
    if not text.isascii():
        return set(_WORD.findall(unicodedata.normalize("NFKC", text)))
    words = set(text.translate(_ASCII_SPACES).split())
    quoted = [w for w in words if "'" in w]
    if quoted:
        words.difference_update(quoted)
        for w in quoted:
            words.update(_ASCII_WORD.findall(w))
    return words


def _term_of(word: str) -> str:
    """The term of one word as `_WORD` finds it; "" for a stopword."""
    lower = _POSSESSIVE.sub("", word.lower())
    return "" if lower in STOPWORDS else stem(lower)


class _TermCache(dict[str, str]):
    """Word as written -> `_term_of` (it recurs across chunks and queries): a dict look-up costs a fraction of
    a cached call, and a chunk's term set makes one per distinct word. Starts over when full."""

    def __missing__(self, word: str) -> str:
        if len(self) >= 131072:
            self.clear()
        term = self[word] = _term_of(word)
        return term


_TERMS = _TermCache()


def content_words(text: str) -> list[tuple[str, str]]:
    """(word as written, its term) for the first occurrence of each content term of `text`, in order: the
    terms are exactly `terms(text)`."""
    seen: dict[str, str] = {}
    for word in _WORD.findall(unicodedata.normalize("NFKC", text)):  # "cafe\u0301" is "café", as typed either way
        word = _POSSESSIVE.sub("", word)
        lower = word.lower()
        if lower in STOPWORDS:
            continue
        term = stem(lower)
        if term and term not in seen:
            seen[term] = word
    return [(word, term) for term, word in seen.items()]


_TERM_CACHE: dict[tuple[str, str, str, str], tuple[frozenset[str], frozenset[str]]] = {}
_TERM_CACHE_MAX = 200_000


def chunk_terms(chunk: Chunk) -> tuple[frozenset[str], frozenset[str]]:
    """(terms of title + heading + text, terms of the title) of a chunk, cached by its record id, content
    hash, title and heading (two chunks built with one id but different text never share terms)."""
    key = (chunk.record_id, chunk.content_hash, chunk.title, chunk.heading)
    cached = _TERM_CACHE.get(key)
    if cached is None:
        title = _term_set(chunk.title)
        cached = (_term_set(f"{chunk.heading}\n{chunk.text}") | title, title)
        if len(_TERM_CACHE) >= _TERM_CACHE_MAX:
            _TERM_CACHE.clear()
        _TERM_CACHE[key] = cached
    return cached


_TERM_SHARES_MAX = 4096
_MIN_TERM_SHARE = 0.6  # an automatic aspect is met by a chunk holding this share of its terms


def rarity(frequency: int, candidates: int) -> float:
    """A word's weight among `candidates` texts of which `frequency` hold it (an IDF): a word every candidate
    holds says little of which one a question is about. Fewer than ten candidates say little of rarity."""
    n = max(candidates, 10)
    return math.log(1 + (n + 1) / (frequency + 1))


def pool_rarity(wanted: Iterable[str], candidates: Sequence[Candidate]) -> dict[str, float]:
    """The `rarity` of each wanted term among `candidates` (held in a chunk's title, heading or text)."""
    wanted = set(wanted)
    frequency = Counter(t for c in candidates for t in wanted & chunk_terms(c.chunk)[0])
    return {t: rarity(frequency[t], len(candidates)) for t in wanted}


def without_frames(plan: EvidencePlan, word_counts: Callable[[str], tuple[int, dict[str, int]]], max_share: float,
                   min_records: int, *, keep: str | None = None) -> tuple[EvidencePlan, tuple[str, ...]]:
    """`plan` without the automatic clause aspects that set the question's frame rather than ask for evidence
    ("How do I set that up", "What are the options and limits"): every word of which more than `max_share` of
    the records hold (`word_counts`: the readable records and how many hold each word, from the store). Only on
    an index of at least `min_records` such records: a small knowledge base is about one subject, whose words
    are as common there as a question's frame (a 215-chunk handbook had "rotate the signing keys" as common as
    "set that up"). A name, an identifier, the aspect `keep` (a focus) and an aspect of words the store cannot
    tell of stay, and so does the last aspect. On the k8s sets such an aspect had reserved a page that holds
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
    """`plan` with the terms of each phrase aspect (not a name, not an identifier) weighted by their rarity among
    `candidates`, the request's pool: "they should be capped at 50 pods" is then met by a chunk holding
    "capped", not by every page that says "pods" and "50"."""
    def is_phrase(f: RequiredFamily) -> bool:
        return bool(f.aspect_terms) and not (f.entity or f.verbatim)

    wanted = {t for f in plan.families if is_phrase(f) for t in f.aspect_terms}
    if not wanted:
        return plan
    weight = pool_rarity(wanted, candidates)
    families = tuple(dataclasses.replace(f, term_weights=tuple(weight[t] for t in f.aspect_terms))
                     if is_phrase(f) else f for f in plan.families)
    return dataclasses.replace(plan, families=families)


_COMPOUND = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+")  # "long-running": words, not an identifier
_ABBREVIATION = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]?", re.I)  # "e.g", "i.e."


def is_identifier(token: str) -> bool:
    """An error code, a flag, a dotted, snake_case or camelCase name, one-word quoted code: evidence of it
    holds it whole ("VL_LEASE_REVOKED" is not "VL" and "LEASE" apart). A hyphenated word, an abbreviation or
    code of several words (a pasted command or log line, with the user's own values in it) is not."""
    return not _COMPOUND.fullmatch(token) and not is_abbreviation(token) and len(token.split()) == 1


def is_abbreviation(token: str) -> bool:
    return _ABBREVIATION.fullmatch(token) is not None


_MARKDOWN_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~<>])")  # "TIDEPOOL\_IDLE\_TIMEOUT" as written in markdown
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
_FOLD_CACHED_CHARS = 16_384  # chunks are far smaller (chunking.max_chars); a huge text is folded, not kept


def fold(text: str) -> str:
    """`text` as an identifier is looked for in it: case, spacing, Unicode form, invisible characters and
    markdown escapes ignored."""
    return _fold_cached(text) if len(text) <= _FOLD_CACHED_CHARS else _fold(text)


@lru_cache(maxsize=8192)  # a chunk's text is folded once, not for every aspect and question it is tested for
def _fold_cached(text: str) -> str:
    return _fold(text)


def _fold(text: str) -> str:
    plain = unicodedata.normalize("NFKC", _MARKDOWN_ESCAPE.sub(r"\1", text)).translate(_INVISIBLE)
    return " ".join(plain.split()).casefold()


def holds_verbatim(chunk: Chunk, token: str) -> bool:
    folded = fold(token)
    return any(folded in fold(part) for part in (chunk.text, chunk.heading, chunk.title))


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

    def matches(self, chunk: Chunk) -> bool:
        return self.match_score(chunk) >= self.min_term_share

    def match_score(self, chunk: Chunk) -> float:
        """1.0 for a member by label, document or source; 0 for a chunk that does not hold an identifier aspect
        whole; 2.0 for a record known to be the aspect's best evidence; otherwise the share of the aspect's terms
        the chunk contains, each weighted by its rarity when the pipeline has set `term_weights` (title terms
        count extra: a chunk titled by the aspect is about it)."""
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
        share = sum(w for t, w in zip(self.aspect_terms, weights, strict=True) if t in have) / total
        in_title = sum(w for t, w in zip(self.aspect_terms, weights, strict=True) if t in title) / total
        if len(self._term_shares) < _TERM_SHARES_MAX:  # bounded: a configured shape's family lives on
            self._term_shares[key] = share + 0.5 * in_title
        return share + 0.5 * in_title

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

    @property
    def composition(self) -> str:
        return "chain" if self.chained else "parallel"

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source.value, "shape": self.shape, "aspects": list(self.aspects),
                "families": [f.to_dict() for f in self.families], "composition": self.composition,
                "notes": list(self.notes)}


# ---- automatic planning ----------------------------------------------------------------------------
_CODE = re.compile(r"`([^`]{2,80})`")
# A quoted string: in double quotes, or in single quotes that no letter touches on the outside (an apostrophe
# does: "the Job's retries", "peers' names"), an error message such as ('Too many missed start time').
_QUOTED = re.compile(r"[\"“]([^\"”]{3,80})[\"”]|(?<!\w)['‘]([^'’\"”\n]{3,80})['’](?!\w)")
_IDENT = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]+|[a-z]+[A-Z]\w*|[A-Z]{2,}_[A-Z_0-9]+|\w+[._]\w+(?:[._]\w+)*)")
_CONNECTORS = {"of", "and", "the", "de", "in", "on", "for", "la", "le", "von", "van", "der", "&", "du", "del"}
# A full stop ends a sentence, but not after an initial ("Harris W. Fawell", "U.S.") or a short title.
_FULL_STOP = r"(?<!\b[A-Z])(?<!\b(?:Dr|St|Mt|Jr|Sr|Mr|Ms|vs|No))(?<!\bMrs)\."
_SPLIT = re.compile(r"\s*(?:(?:[;?]|" + _FULL_STOP + r")\s|[;?]$|,(?!\d)\s*(?:and|but|while|or)?\s*|"
                    r"\s+(?:and|or|but)\s+(?=(?:how|what|why|where|when|which|who|should|can|do|does|is|are|make|"
                    r"let|stop)\b))\s*", re.I)
_CAP_WORD = re.compile(r"^[A-Z0-9][\w'’./&-]*$")
_DECIMAL = re.compile(r"^\d+\.\d+$")
_CAMEL_HUMP = re.compile(r"(?<=[a-z])(?=[A-Z])")  # between the words of a compound name: "Stateful|Set"
_QUESTION_WORDS = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are", "was",
                   "were", "do", "does", "did", "can", "could", "should", "would", "will", "in", "the", "a", "an",
                   "i", "my", "if", "and", "or", "for", "to", "of", "on", "at", "by", "from", "as", "with",
                   "we", "our", "your", "their", "its"}  # "Our JVM services ...": the name is "JVM"


_SENTENCE_END = re.compile(r"(?:(?<=[?!])|(?<=" + _FULL_STOP + r"))\s+|\n+")


def quoted_strings(text: str) -> list[str]:
    """The strings `text` quotes, in double or single quotes (`_QUOTED`), in order."""
    return [m.group(1) or m.group(2) for m in _QUOTED.finditer(text)]


def spelled_apart(name: str) -> str:
    """A compound name with its words apart: "StorageClass" -> "Storage Class" (how a page title spells it).
    Only a name of capitalised words: "iPhone" is not "i Phone"."""
    return _CAMEL_HUMP.sub(" ", name) if name[:1].isupper() else name


def sentences(text: str) -> list[str]:
    """`text` split at sentence ends (not at an initial or abbreviation) and at line breaks."""
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def entity_spans(text: str) -> list[str]:
    """Capitalised word runs (with inner connectors such as 'of', 'and'): the named entities. A run never
    crosses a sentence end, and a sentence's first word is a name only if it looks like one."""
    return [span for sentence in sentences(text) for span in _sentence_spans(sentence)]


def _sentence_spans(sentence: str) -> list[str]:
    words = [w.rstrip(".?!") for w in re.sub(r",(?!\d)", " , ", sentence).split()]
    words = [w for w in words if w]
    spans: list[list[str]] = []
    current: list[str] = []
    for i, w in enumerate(words):
        clean = w.strip("()[]{}:;!\"“”'’")
        capital = bool(clean) and bool(_CAP_WORD.match(clean))
        sentence_start = i == 0
        following = words[i + 1].strip("()[]{}:;!\"“”'’") if i + 1 < len(words) else ""
        # The pronoun "I" is capitalised but names nothing: "After I applied ..." starts with no name.
        next_capital = bool(_CAP_WORD.match(following or "x")) and following != "I"
        special = clean[1:] != clean[1:].lower()  # acronym or camelCase: a name even at a sentence start
        if capital and sentence_start and not current and not next_capital and not special:
            capital = False
        # A version or a decimal quantity qualifies a name but does not start one: "our 1.28 API server",
        # "3.5 CPUs" ("2008 Summer Olympics" and "888 7th Avenue" keep their numbers).
        if not current and _DECIMAL.match(clean):
            capital = False
        is_name = capital and not (sentence_start and clean.lower() in _QUESTION_WORDS)
        # "Kiss and Tell", but not "Indexed Job of 200 shards", "München in 1930": a number after a connector is
        # not part of the name.
        joins_names = bool(current) and clean.lower() in _CONNECTORS and next_capital and not following[:1].isdigit()
        if is_name or joins_names:
            current.append(clean)
        else:
            if current:
                spans.append(current)
            current = []
    if current:
        spans.append(current)
    out = []
    for span in spans:
        while span and span[-1].lower() in _CONNECTORS:
            span.pop()
        if span:
            span[-1] = _POSSESSIVE.sub("", span[-1])
        text = " ".join(span)
        if text and (len(span) > 1 or text.lower() not in _QUESTION_WORDS):
            out.append(text)
    return out


_UNITS = frozenset({"%", "ms", "s", "sec", "min", "h", "hr", "d", "m", "cm", "mm", "km", "nm", "µm", "um",
                     "kg", "g", "mg", "µg", "ug", "ng", "l", "L", "ml", "mL", "dl", "dL", "mol", "mmol",
                     "µmol", "umol", "nmol", "Ki", "Mi", "Gi", "Ti", "Pi", "KiB", "MiB", "GiB", "TiB", "kB",
                     "KB", "MB", "GB", "TB", "Hz", "kHz", "MHz", "GHz", "V", "mV", "W", "kW", "mW", "°C", "°F",
                     "IU", "U", "bpm", "mmHg", "rpm", "qps", "rps", "x"})
_QUANTITY = re.compile(r"^\d+(?:[.,]\d+)?([^\d/\s]+)(?:/([^\d/\s]+))?$")


def is_quantity(token: str) -> bool:
    """A number with a unit ("5mmol/L", "512Mi", "30s", "2.5GHz"); case matters ("3M" is a name, "3m" a length)."""
    m = _QUANTITY.match(token)
    return m is not None and all(u is None or u in _UNITS for u in m.groups())


def sub_questions(question: str) -> list[str]:
    # One space between words first: _SPLIT's optional spaces around a separator backtrack cubically on a
    # long run of whitespace (2,000 spaces took 40 s).
    question = " ".join(question.split())
    parts = [p.strip(" ,.") for p in _SPLIT.split(question) if p and p.strip(" ,.")]
    return [p for p in parts if len(terms(p)) >= 2]


def _split_conjoined(span: str) -> list[str]:
    """'Local H and For Against' -> both names; 'Kiss and Tell' stays one title."""
    parts = [p.strip() for p in re.split(r"\s+and\s+", span)]
    if len(parts) > 1 and all(len(p.split()) >= 2 for p in parts):
        return parts
    return [span]


def auto_plan(question: str, *, max_aspects: int = 4) -> EvidencePlan:
    """Aspects from the question alone, most specific first: identifiers and quoted strings, multi-word
    names, then sub-questions, then single-word names."""
    code = [m.group(1).strip() for m in _CODE.finditer(question)]
    identifiers = [*code, *(q.strip() for q in quoted_strings(question))]
    plain = _QUOTED.sub(" ", _CODE.sub(" ", question))
    named = [m.group(1) for m in _IDENT.finditer(plain)
             if not m.group(1).replace(".", "").isdigit() and not is_abbreviation(m.group(1))]
    identifiers.extend(named)
    # Code and identifier-like names are met only whole; a quoted title ("Kiss and Tell") by its words.
    verbatim = {a for a in [*code, *named] if is_identifier(a)}
    names = [part for span in entity_spans(plain) for part in _split_conjoined(span)]
    multi = [n for n in names if len(n.split()) > 1]
    # A lone letter or number ("T cells", "type 1 diabetes") names nothing on its own, nor does a measurement
    # ("5mmol/L", "512Mi", "30s"): evidence is about a thing, not a value.
    single = [n for n in names if len(n.split()) == 1 and len(n) > 1 and not n.isdigit() and not is_quantity(n)]
    parts = sub_questions(plain)
    clauses = parts if len(parts) > 1 else []
    unique: list[str] = []
    seen_terms: list[frozenset[str]] = []
    entities = {*identifiers, *multi, *single}
    # The most specific first, so a compound ("shop.app") makes its parts ("app", "shop") redundant.
    identifiers = sorted(identifiers, key=lambda a: -len(terms(a)))
    for a in [*identifiers, *multi, *clauses, *single]:
        t = frozenset(terms(a))
        if not t or any(t <= s for s in seen_terms):  # nothing new: already an obligation
            continue
        unique.append(a)
        seen_terms.append(t)
    if len(unique) > max_aspects:
        unique = _within_cap(unique, clauses, [*multi, *single], plain, max_aspects)
    families = tuple(RequiredFamily(name=a, rescue_query=a, aspect_terms=terms(a), entity=a in entities,
                                    verbatim=a in verbatim) for a in unique)
    source = PlanSource.AUTO if families else PlanSource.NONE
    return EvidencePlan(families=families, aspects=tuple(unique), source=source, chained=is_chained(question))


def _within_cap(aspects: list[str], clauses: list[str], names: list[str], question: str, cap: int) -> list[str]:
    """The `cap` aspects to keep of more: what the question names, then what it asks, then the scene it sets ("We
    added eight GPU nodes, a mix of A100s and T4s. How do we reserve them, ...?"). A name that only a scene clause
    held is freed from it and ranks with the names, after them ("We need a log-forwarder DaemonSet on every Windows
    node that ...": the scene goes, "DaemonSet" stays). Kept in the order of `aspects`, freed names last."""
    asked = {p for sentence in sentences(question) if _ASKS.search(sentence) for p in sub_questions(sentence)}
    scene = [a for a in aspects if a in clauses and a not in asked]
    held = [frozenset(terms(a)) for a in aspects if a not in scene]
    freed: list[str] = []
    for name in names:
        t = frozenset(terms(name))
        if t and name not in aspects and not any(t <= h for h in held):
            freed.append(name)
            held.append(t)
    named = [a for a in aspects if a not in clauses]
    chosen = [*named, *freed, *(a for a in aspects if a in clauses and a not in scene), *scene][:cap]
    kept_scene = [frozenset(terms(a)) for a in chosen if a in scene]
    # A scene clause that stays still holds its names: they need no obligation of their own.
    return [a for a in [*aspects, *freed] if a in chosen and not (a in freed and any(
        frozenset(terms(a)) <= s for s in kept_scene))]


_RELATIVE = re.compile(r"\b(?:who|whom|whose|where|which|that|when)\b|\bof\s+(?:the|a|an)\b", re.I)


_ASKS = re.compile(r"\?\s*$|^\s*(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|"
                   r"could|should|would|will|in what|in which|at what|on what|from where)\b", re.I)


_SCENE_SENTENCES = 3  # a request of this many sentences sets a scene and asks several things


def is_chained(question: str) -> bool:
    """A question composed by nesting ("the country where the composer of X was born") rather than by
    conjunction ("how do I A, and how do I B"): one clause that describes what it asks about, or any question
    that describes an entity starting from a name ("What city is the star of Sous les pieds des femmes
    from?", "Humboldt Peak, in the state where Silverton is located, is part of what range?"). A statement
    ("glycolysis is one of the primary pathways") asks for no unnamed entity, so it is never chained.

    Nor is a request that sets a scene over several sentences ("We're patching the OS on every worker. What
    prevents ..., and how should the Deployment's own rollout be tuned?"): its descriptions describe the
    requester's own things, which no page names, and there is no chain of pages to follow. A nested question
    is one sentence, or two at most ("There is a river that ... Who founded the city that lies on it?")."""
    if _ASKS.search(question) is None or len(sentences(question)) >= _SCENE_SENTENCES:
        return False
    return (len(sub_questions(question)) <= 1 and _RELATIVE.search(question) is not None) or \
        bool(described_phrases(question))


# An entity the question describes instead of naming: "the country where", "the composer of", "the drummer from",
# "the same book as", "Hello Love's performer". Attribute nouns ("the name of", "the number of") ask about an
# entity; they are not one.
_DESCRIBED = re.compile(r"\b(?:the|a|an|this|that|its|his|her|their)\s+(?:[a-z][\w-]*\s+){0,2}?[a-z][\w-]*\s+"
                        r"(?:where|of|that|which|who|whose|whom|in which|on which|at which|by which|from which|when|"
                        r"from|as)\b"
                        r"|['’]s\s+(?:[a-z][\w-]*\s+)?[a-z][\w-]*\b")
_ATTRIBUTE = re.compile(r"\b(?:name|names|instance|member|part|type|kind|number|amount|basis|end|start|beginning|"
                        r"one|most|rest|top|bottom|area|size|time|year|date)\s+of\b")


def _descriptions(question: str) -> list[re.Match[str]]:
    return [m for m in _DESCRIBED.finditer(question) if not _ATTRIBUTE.search(m.group(0))]


def described_entities(question: str) -> int:
    """How many entities a nested question describes rather than names: each is one more hop to follow
    ("Who was in charge of the country where the composer of Aschenbrodel was a citizen?": 2). A rough
    count from the wording, used to judge whether the evidence followed enough links."""
    return len(_descriptions(question))


def described_phrases(question: str) -> list[str]:
    """The descriptions of a nested question that start from a name, innermost first: what to search for
    next when a hop is missing ("the composer of Aschenbrodel was a citizen", "Hello Love's performer lived
    in when he died")."""
    # A quoted string or code span names something as surely as a capitalised one ("the country whose ccTLD
    # was ".cs"").
    names = [*entity_spans(question), *(m.group(1) for m in _CODE.finditer(question)), *quoted_strings(question)]
    found: list[str] = []
    for m in _descriptions(question):
        start = m.start()
        if m.group(0).startswith(("'", "’")):  # a possessive: the name before it is part of the description
            before = question[:start]
            owner = next((n for n in names if before.rstrip(".").endswith(n)), None)
            if owner is None:
                continue
            start -= len(owner)
        sentence = _SENTENCE_END.split(question[start:], maxsplit=1)[0]  # a description ends with its sentence
        phrase = re.split(r"[,;?]", sentence, maxsplit=1)[0].strip().rstrip(".")
        have = set(terms(phrase))
        if any(set(terms(n)) <= have for n in names):
            found.append(phrase)
    return sorted(dict.fromkeys(found), key=len)


def focus_plan(plan: EvidencePlan, aspect_focus: str | None) -> EvidencePlan:
    """Steer a plan toward one aspect: it becomes the first obligation (added if it was not there)."""
    if not aspect_focus or not aspect_focus.strip():
        return plan
    focus = aspect_focus.strip()
    focus_terms = terms(focus)
    kept = [f for f in plan.families if f.name != focus]
    first = RequiredFamily(name=focus, rescue_query=focus, aspect_terms=focus_terms,
                           verbatim=_IDENT.fullmatch(focus) is not None and is_identifier(focus))
    existing = next((f for f in plan.families if f.name == focus), None)
    aspects = (focus, *[a for a in plan.aspects if a != focus])
    return EvidencePlan(families=(existing or first, *kept), aspects=aspects, source=plan.source,
                        shape=plan.shape, notes=(*plan.notes, f"aspect focus: {focus}"), chained=plan.chained)


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
                  similarity: SimilarityToExamples | None = None) -> EvidencePlan:
    """The plan for a question: the caller's, else the first matching shape, else automatic. `similarity`
    gives the question's cosine to a shape's closest example (shapes with examples need it to match by them)."""
    if explicit is not None:
        chosen = explicit
    else:
        scores = {s.name: similarity(s) if similarity is not None and s.examples else None for s in shapes}
        shape = next((s for s in shapes if s.matches(question, scores[s.name])), None)
        if shape is not None:
            auto = auto_plan(question, max_aspects=max_aspects)
            score = scores[shape.name]
            notes = (f"similarity to the closest example: {score:.2f}",) if score is not None else ()
            chosen = EvidencePlan(families=shape.families, aspects=auto.aspects, source=PlanSource.SHAPE,
                                  shape=shape.name, chained=auto.chained, notes=notes)
        else:
            chosen = auto_plan(question, max_aspects=max_aspects)
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
                        notes=tuple(data.get("notes", ())), chained=data.get("composition") == "chain")
