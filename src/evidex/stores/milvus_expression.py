"""Milvus boolean expressions (`evidex.stores.milvus`): every string a filter or a query names is quoted by
`literal`, so a value is always one string, never a piece of expression; `SearchFilters` become one expression
over the live rows. A source regex cannot be evaluated by Milvus: the caller's live sources are matched in
Python, and the matching set is pushed down as `source in [...]` (or `not in`, whichever list is shorter), so
filters still apply before a search's limit."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from evidex.lexical import STOPWORDS
from evidex.stores.milvus_schema import to_epoch
from evidex.types import SearchFilters

_TERM = re.compile(r"\w+", re.UNICODE)  # how the Milvus standard tokenizer splits words


def literal(value: str) -> str:
    """`value` as a Milvus string literal: double-quoted, with backslash, quote and line breaks escaped
    (both Milvus's grammar and Milvus Lite's reject a raw line break inside a literal)."""
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
               .replace("\t", "\\t"))
    return f'"{escaped}"'


def literals(values: Iterable[str]) -> str:
    return "[" + ", ".join(literal(v) for v in values) + "]"


def query_terms(query: str) -> list[str]:
    """The distinct words of `query` as Milvus's analyzer splits them, without stopwords (like the SQLite
    store's `fts_query`: every word is a plain term, no operator survives)."""
    words = (w for w in _TERM.findall(query.lower()) if w.strip("_") and w not in STOPWORDS)
    return list(dict.fromkeys(words))


def expression(filters: SearchFilters | None, live_sources: Callable[[], list[str]]) -> str | None:
    """The Milvus filter for live chunks passing `filters`; None when nothing can pass. `live_sources` (the
    distinct sources of the live rows) is called only for a source pattern."""
    clauses = ['retired_by == ""']
    if filters is None:
        return clauses[0]
    for field, values in (("access_labels", filters.access_labels), ("evidence_family", filters.families),
                          ("doc_id", filters.doc_ids)):
        if values is None:
            continue
        if not values:
            return None
        if field == "access_labels":
            clauses.append(f"ARRAY_CONTAINS_ANY(access_labels, {literals(values)})")
        else:
            clauses.append(f"{field} in {literals(values)}")
    if filters.valid_at is not None:
        t = to_epoch(filters.valid_at, 0)
        clauses.append(f"published_at <= {t} and expires_at > {t}")
    if filters.source_pattern is not None:
        regex = re.compile(filters.source_pattern)
        sources = live_sources()
        matching = [s for s in sources if regex.search(s)]
        others = [s for s in sources if not regex.search(s)]
        if not matching:
            return None
        if others:
            clauses.append(f"source in {literals(matching)}" if len(matching) <= len(others)
                           else f"source not in {literals(others)}")
    return " and ".join(f"({c})" for c in clauses)
