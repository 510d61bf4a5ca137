"""What a question (or an aspect focus) says, word by word, and which of its words the evidence holds.

An identifier (a flag, an error code, a dotted or snake_case name, quoted code) is one word, held only
verbatim, ignoring case and spacing: its pieces ("LEASE", "REVOKED") occurring apart say nothing of it. Any
other word is held by its term.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from evidex.evidence.terms import (
    chunk_terms,
    content_words,
    exact_tokens,
    holds_verbatim,
    is_abbreviation,
    is_identifier,
    pool_rarity,
    rarity,
)
from evidex.types import Candidate, Chunk

_URL_SCHEME = re.compile(r"\b[a-z][a-z0-9+.-]*://", re.I)


@lru_cache(maxsize=1024)  # the pipeline (an aspect focus) and the signals (the question) both ask
def question_words(query: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(the identifiers `query` names, (word as written, term) for each of its other content words). Read in
    NFKC, as terms are: a full-width "ＶＬ＿ＬＥＡＳＥ" is the identifier VL_LEASE, not two words."""
    query = _URL_SCHEME.sub(" ", unicodedata.normalize("NFKC", query))
    tokens = sorted(exact_tokens(query), key=len, reverse=True)  # "k8s-prod" before the "k8s" inside it
    plain = query
    for token in tokens:
        plain = plain.replace(token, " ")
    identifiers = tuple(t for t in tokens if is_identifier(t))
    words = content_words(" ".join([plain, *(t for t in tokens if not is_identifier(t) and not is_abbreviation(t))]))
    return identifiers, tuple(words)


@dataclass(frozen=True)
class WordsHeld:
    asked: int  # words the question says (an identifier is one word)
    missing: tuple[str, ...]  # those no evidence holds, as written
    weighted_share: float  # the share held, each word weighted by its rarity among the candidates

    @property
    def held(self) -> int:
        return self.asked - len(self.missing)


def words_held(query: str, context: Sequence[Candidate], candidates: Sequence[Candidate]) -> WordsHeld:
    """Which of the question's words the evidence (`context`) holds, and how much they weigh: a word weighs its
    IDF among `candidates` (the admitted pool), so "key" held while "ceremony" and "custodians" are not holds
    little of "HSM master key ceremony custodians". A word no candidate holds weighs most."""
    identifiers, words = question_words(query)
    n = len(candidates)
    total = held_weight = 0.0
    missing: list[str] = []
    # An identifier names one thing: it weighs as the rarest word. (Looking for it in the whole pool, folding
    # every text, cost a millisecond at p95.)
    for token in identifiers:
        w = rarity(0, n)
        total += w
        if any(holds_verbatim(c.chunk, token) for c in context):
            held_weight += w
        else:
            missing.append(token)
    wanted = {term for _, term in words}
    weight = pool_rarity(wanted, candidates)
    found: set[str] = set()
    for c in context:
        found |= wanted & chunk_terms(c.chunk)[0]
    for word, term in words:
        w = weight[term]
        total += w
        if term in found:
            held_weight += w
        else:
            missing.append(word)
    asked = len(identifiers) + len(words)
    return WordsHeld(asked, tuple(missing), held_weight / total if total else 1.0)


def speaks_of(chunk: Chunk, focus: str) -> bool:
    """Whether a chunk holds anything of `focus`: every identifier it names, whole, and at least one of its
    other words (an aspect focus of only identifiers: those). A focused search always returns its nearest
    neighbours; for a focus the index knows nothing of ("QZXW-991", "flux capacitor calibration") they are noise,
    not evidence of it."""
    identifiers, words = question_words(focus)
    if not identifiers and not words:  # only stopwords or punctuation ("what is it", "???"): nothing to hold
        return False
    if not all(holds_verbatim(chunk, t) for t in identifiers):
        return False
    return not words or bool({term for _, term in words} & chunk_terms(chunk)[0])
