"""What a question (or an aspect focus) says, word by word, and which of its words the evidence holds.

An identifier (a flag, an error code, a dotted or snake_case name, quoted code) is one word, held only
verbatim, ignoring case and spacing: its pieces ("LEASE", "REVOKED") occurring apart say nothing of it. Any
other word is held by its term.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from evidex.evidence.plan import chunk_terms, content_words, holds_verbatim, is_abbreviation, is_identifier
from evidex.rerank.fused import exact_tokens
from evidex.types import Candidate, Chunk

_URL_SCHEME = re.compile(r"\b[a-z][a-z0-9+.-]*://", re.I)


@lru_cache(maxsize=1024)  # the pipeline (an aspect focus) and the signals (the question) both ask
def question_words(query: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(the identifiers `query` names, (word as written, term) for each of its other content words)."""
    query = _URL_SCHEME.sub(" ", query)
    tokens = sorted(exact_tokens(query), key=len, reverse=True)  # "k8s-prod" before the "k8s" inside it
    plain = query
    for token in tokens:
        plain = plain.replace(token, " ")
    identifiers = tuple(t for t in tokens if is_identifier(t))
    words = content_words(" ".join([plain, *(t for t in tokens if not is_identifier(t) and not is_abbreviation(t))]))
    return identifiers, tuple(words)


def find_unmatched_words(query: str, context: Sequence[Candidate]) -> tuple[int, list[str]]:
    """(how many words the question says, the ones no evidence holds)."""
    identifiers, words = question_words(query)
    wanted = {term for _, term in words}
    found: set[str] = set()
    for c in context:
        found |= wanted & chunk_terms(c.chunk)[0]
    missing = [t for t in identifiers if not any(holds_verbatim(c.chunk, t) for c in context)]
    missing += [word for word, term in words if term not in found]
    return len(identifiers) + len(words), missing


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
