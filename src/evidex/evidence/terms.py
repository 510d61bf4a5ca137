"""Words and terms: how evidex reads a question, an aspect or a chunk word by word.

A term is a word lower-cased, its possessive and plural or verb ending taken off (`stem`), stopwords and words
that name nothing ("meanwhile", "own") dropped; a chunk's terms are cached (`chunk_terms`). An identifier (a
flag, an error code, a dotted or snake_case name) is held only whole (`holds_verbatim`, ignoring case, spacing
and markdown escapes). A word's `rarity` among a request's candidates weighs what it says of which one a
question is about.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

from evidex.lexical import STOPWORDS
from evidex.types import Candidate, Chunk


@lru_cache(maxsize=65536)
def stem(token: str) -> str:
    """A light English stemmer: plural and verb endings only, so that related words meet without the
    over-conflation of a full stemmer (Snowball joins words an aspect must keep apart). English only.

    Known defect: a final "e" is kept, so "namespace" / "namespaces" ("namespac") and "node" / "nodes" do not
    meet (the variants tried are in docs/lab/evaluation.md)."""
    if token.endswith("ss") and not token.endswith("sses"):  # "class", "access": no plural to take off
        return token
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            return token[: len(token) - len(suffix)] + keep
    return token


_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
# Not terms: the full-text stopwords, and words that frame a sentence but name nothing. An aspect's terms weigh
# their rarity among the request's candidates, where such a word is rare only by chance: "meanwhile" would
# outweigh "quota" in "can the operator raise the quota meanwhile", and "own" would match "do old snapshots
# expire on their own" to a page on neither. The full-text query keeps its stopwords (the
# published BM25 baselines' tokenization).
_NOT_TERMS = STOPWORDS | frozenset(["also", "already", "anyway", "even", "ever", "hence", "however", "instead",
                                    "meanwhile", "otherwise", "own", "still", "therefore", "thus", "yet"])


_POSSESSIVE = re.compile(r"['’]s$", re.I)


def without_possessive(word: str) -> str:
    """"Kubernetes's" -> "Kubernetes"; "peers'" stays as written."""
    return _POSSESSIVE.sub("", word)


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
    """The term of one word as `_WORD` finds it; "" for a stopword or a word that names nothing."""
    lower = _POSSESSIVE.sub("", word.lower())
    return "" if lower in _NOT_TERMS else stem(lower)


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
    terms are exactly `terms(text)` (each word's term is `_term_of`'s, through the same cache)."""
    seen: dict[str, str] = {}
    for word in _WORD.findall(unicodedata.normalize("NFKC", text)):  # "cafe\u0301" is "café", as typed either way
        term = _TERMS[word]
        if term and term not in seen:
            seen[term] = _POSSESSIVE.sub("", word)
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



_COMPOUND = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+")  # "long-running": words, not an identifier
_ABBREVIATION = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]?", re.I)  # "e.g", "i.e."


# A flag starts a word ("--dry-run"); a hyphenated compound ("AMP-activated") is one token, not a flag
# "-activated"; a camelCase or PascalCase name is matched whole ("PodSecurity", "clpC"), never from inside a word.
# Every identifier starts a word: tried at every position inside one, the scans made a long word quadratic
# (a 20,000-letter query took 8 s).
_IDENTIFIER = re.compile(r"`([^`]+)`|((?<![\w-])--?[a-zA-Z][\w-]+|(?<!\w)(?:\w+(?:-\w+)+|[A-Za-z]?[a-z]+[A-Z]\w*|"
                         r"[A-Z][A-Z0-9]*_[A-Z0-9_]+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b|\w+\.\w+(?:\.\w+)*|\w*\d\w*[A-Za-z]\w*))")


@lru_cache(maxsize=1024)  # the reranker and the signals both ask, for every query
def exact_tokens(query: str) -> tuple[str, ...]:
    """Identifiers, flags, error strings and quoted code of a question that should appear verbatim in evidence
    (the reranker's exact-token bonus, the words a question holds). Wider than `is_identifier`: a hyphenated
    word or a word with digits counts here, since evidence holding it whole is a better match."""
    found = []
    for m in _IDENTIFIER.finditer(query):
        token = (m.group(1) or m.group(2)).strip()
        if len(token) >= 3:
            found.append(token)
    return tuple(dict.fromkeys(found))


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
