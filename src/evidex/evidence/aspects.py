"""Automatic aspects: what a question asks for, read from its words alone.

An aspect is an identifier or quoted string, a name (a capitalised word run), or a clause of a composite
question; each becomes an obligation of an automatic plan (`evidex.evidence.plan.auto_plan`). The same reading
tells whether a question is nested ("the city where the architect of X was born": `is_chained`) and which
entities it describes instead of naming (`described_phrases`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from evidex.evidence.terms import is_abbreviation, is_identifier, terms, without_possessive

_CODE = re.compile(r"`([^`]{2,80})`")
# A quoted string: in double quotes, or in single quotes that no letter touches on the outside (an apostrophe
# does: "the Job's retries", "peers' names"), an error message such as ('Too many retries for batch').
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
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)?$")
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
    quantity_unit = -1  # the index of a unit that follows a number ("40 MB"): a quantity, not a name
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
        # A version or a decimal quantity qualifies a name but does not start one: "our 3.2 proxy tier",
        # "3.5 CPUs" ("2008 Summer Olympics" and "888 7th Avenue" keep their numbers).
        if not current and _DECIMAL.match(clean):
            capital = False
        # Nor does a quantity name anything: "a 25 MB lookup table", "512 MiB", "2 CPUs", "800m CPU".
        if not current and (_NUMBER.match(clean) or is_quantity(clean)) and following in _UNITS:
            capital, quantity_unit = False, i + 1
        if i == quantity_unit:
            capital = False
        is_name = capital and not (sentence_start and clean.lower() in _QUESTION_WORDS)
        # "Salt and Light", but not "Batch of 300 tasks", "München in 1930": a number after a connector is
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
            span[-1] = without_possessive(span[-1])
        text = " ".join(span)
        if text and (len(span) > 1 or text.lower() not in _QUESTION_WORDS):
            out.append(text)
    return out


_UNITS = frozenset({"%", "ms", "s", "sec", "min", "h", "hr", "d", "m", "cm", "mm", "km", "nm", "µm", "um",
                     "kg", "g", "mg", "µg", "ug", "ng", "l", "L", "ml", "mL", "dl", "dL", "mol", "mmol",
                     "µmol", "umol", "nmol", "Ki", "Mi", "Gi", "Ti", "Pi", "KiB", "MiB", "GiB", "TiB", "kB",
                     "KB", "MB", "GB", "TB", "Hz", "kHz", "MHz", "GHz", "V", "mV", "W", "kW", "mW", "°C", "°F",
                     "IU", "U", "bpm", "mmHg", "rpm", "qps", "rps", "x",
                     # compute, counted: "2 CPUs", "800m CPU", "4 GPUs", "16 cores"
                     "CPU", "CPUs", "vCPU", "vCPUs", "GPU", "GPUs", "core", "cores"})
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
    """'Quiet Harbor and Red Lantern' -> both names; 'Salt and Light' stays one title."""
    parts = [p.strip() for p in re.split(r"\s+and\s+", span)]
    if len(parts) > 1 and all(len(p.split()) >= 2 for p in parts):
        return parts
    return [span]


@dataclass(frozen=True)
class Aspects:
    """What an automatic plan makes obligations of, most specific first, and how each is met."""

    aspects: tuple[str, ...]
    entities: frozenset[str]  # names: a page titled by one is its best evidence
    verbatim: frozenset[str]  # identifiers: only a chunk holding one whole meets it
    unheld: tuple[str, ...] = ()  # identifiers no record holds (the requester's own values): no obligation


def question_aspects(question: str, *, max_aspects: int, held: Callable[[str], bool] | None = None) -> Aspects:
    """Aspects from the question alone, most specific first: identifiers and quoted strings, multi-word
    names, then sub-questions, then single-word names; at most `max_aspects` (`_within_cap`).

    `held` tells whether the index holds an identifier whole anywhere. One it does not is the requester's own
    value (`ledger_db`, `extra_hosts`, `10.96.0.20`): no evidence can meet it, so it is no obligation and takes
    none of the cap's slots, which go to what the question asks; it is returned as `unheld`."""
    code = [m.group(1).strip() for m in _CODE.finditer(question)]
    identifiers = [*code, *(q.strip() for q in quoted_strings(question))]
    plain = _QUOTED.sub(" ", _CODE.sub(" ", question))
    named = [m.group(1) for m in _IDENT.finditer(plain)
             if not m.group(1).replace(".", "").isdigit() and not is_abbreviation(m.group(1))]
    identifiers.extend(named)
    # Code and identifier-like names are met only whole; a quoted title ("Salt and Light") by its words.
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
    # The most specific first, so a compound ("shop.app") makes its parts ("app", "shop") redundant.
    for a in [*sorted(identifiers, key=lambda a: -len(terms(a))), *multi, *clauses, *single]:
        t = _term_key(a)
        if not t or any(t <= s for s in seen_terms):  # nothing new: already an obligation
            continue
        unique.append(a)
        seen_terms.append(t)
    unheld = tuple(a for a in unique if a in verbatim and held is not None and not held(a))
    unique = [a for a in unique if a not in unheld]
    if len(unique) > max_aspects:
        unique = _within_cap(unique, clauses, [*multi, *single], plain, max_aspects)
    return Aspects(tuple(unique), frozenset({*identifiers, *multi, *single}), frozenset(verbatim), unheld)


def _term_key(text: str) -> frozenset[str]:
    """`text`'s terms as the planner compares aspects: a final "e" aside, since the light stemmer takes "es" off
    a plural ("Services" -> "servic") but keeps a singular's "e" ("Service")."""
    return frozenset(t[:-1] if t.endswith("e") else t for t in terms(text))


def names_identifier(text: str) -> bool:
    """`text` is one identifier (a flag, a dotted or camelCase name): evidence of it holds it whole."""
    return _IDENT.fullmatch(text) is not None and is_identifier(text)


def _within_cap(aspects: list[str], clauses: list[str], names: list[str], question: str, cap: int) -> list[str]:
    """The `cap` aspects to keep of more: what the question names, then what it asks, then the scene it sets ("We
    bought four new build agents, two of them with GPUs. How do we pin jobs to them, ...?"), its last clauses
    first: a scene closes on its complication, nearest the ask ("Our workers take a minute to finish a task, so we
    lengthened the shutdown wait, but now a stuck worker blocks every release for a minute"). A name that only a
    scene clause held is freed from it and ranks with the names, after them ("We want a metrics-agent DaemonSet
    on each edge machine that ...": the scene goes, "DaemonSet" stays). Kept in the order of `aspects`, freed
    names last."""
    asked = {p for sentence in sentences(question) if _ASKS.search(sentence) for p in sub_questions(sentence)}
    scene = [a for a in aspects if a in clauses and a not in asked]
    held = [_term_key(a) for a in aspects if a not in scene]
    freed: list[str] = []
    for name in names:
        t = _term_key(name)
        if t and name not in aspects and not any(t <= h for h in held):
            freed.append(name)
            held.append(t)
    named = [a for a in aspects if a not in clauses]
    chosen = [*named, *freed, *(a for a in aspects if a in clauses and a not in scene), *scene[::-1]][:cap]
    kept_scene = [_term_key(a) for a in chosen if a in scene]
    # A scene clause that stays still holds its names: they need no obligation of their own.
    return [a for a in [*aspects, *freed] if a in chosen and not (a in freed and any(
        _term_key(a) <= s for s in kept_scene))]


_RELATIVE = re.compile(r"\b(?:who|whom|whose|where|which|that|when)\b|\bof\s+(?:the|a|an)\b", re.I)


_ASKS = re.compile(r"\?\s*$|^\s*(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|"
                   r"could|should|would|will|in what|in which|at what|on what|from where)\b", re.I)


_SCENE_SENTENCES = 3  # a request of this many sentences sets a scene and asks several things


def is_chained(question: str) -> bool:
    """A question composed by nesting ("the city where the architect of X was born") rather than by
    conjunction ("how do I A, and how do I B"): one clause that describes what it asks about, or any question
    that describes an entity starting from a name ("Which city is the singer of Lantern Song
    from?", "Gray Crag, in the region where Caldport lies, belongs to which range?"). A statement
    ("glycolysis is one of the primary pathways") asks for no unnamed entity, so it is never chained.

    Nor is a request that sets a scene over several sentences ("We rotate certificates on every gateway. What
    keeps ..., and how should the gateway's own restart be paced?"): its descriptions describe the
    requester's own things, which no page names, and there is no chain of pages to follow. A nested question
    is one sentence, or two at most ("There is a river that ... Who founded the city that lies on it?")."""
    if _ASKS.search(question) is None or len(sentences(question)) >= _SCENE_SENTENCES:
        return False
    return (len(sub_questions(question)) <= 1 and _RELATIVE.search(question) is not None) or \
        bool(described_phrases(question))


# An entity the question describes instead of naming: "the city where", "the architect of", "the drummer from",
# "the same album as", "Lantern Song's singer". Attribute nouns ("the name of", "the number of") ask about an
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
    ("Who governed the city where the architect of the Harbour Library was born?": 2). A rough
    count from the wording, used to judge whether the evidence followed enough links."""
    return len(_descriptions(question))


def described_phrases(question: str) -> list[str]:
    """The descriptions of a nested question that start from a name, innermost first: what to search for
    next when a hop is missing ("the architect of the Harbour Library was born", "Lantern Song's singer lived
    in when she retired")."""
    # A quoted string or code span names something as surely as a capitalised one ("the country whose code
    # was ".zz"").
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
