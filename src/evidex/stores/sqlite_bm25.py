"""FTS5's bm25() as `SqliteStore.search_sparse` (`evidex.stores.sqlite`) sums it word by word: the ranking
expression, one word's matching rows and their scores (`WordMatches`, which the store keeps per snapshot),
FTS5's idf (to take a word's rarity over the records a reader may read instead of over every record), the
cut to a search's limit in FTS5's own order (score, then rowid), and query text as FTS5 MATCH expressions.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from evidex.lexical import tokens

BM25 = "bm25(records_fts, ?, 1.0)"  # (title, text) column weights: the title weight is a setting
WordMatches = tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]  # rows' positions in the snapshot, scores


def match_words(text: str) -> list[str]:
    """Each distinct word of `text` (`evidex.lexical.tokens`) as a one-word FTS5 MATCH expression, quoted so no
    word is read as an operator, a column filter or a prefix: what a sparse search of `text` searches."""
    return [f'"{t}"' for t in dict.fromkeys(tokens(text))]


def fts_query(text: str) -> str:
    """An FTS5 MATCH expression for `text`: every distinct word quoted (no operator injection), OR-ed."""
    return " OR ".join(match_words(text))


def fts5_idf(rows: int, hits: int) -> float:
    """FTS5's bm25() idf of a word `hits` of `rows` rows hold (1e-6 where it is not positive, as FTS5 does)."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else 1e-6


def significant(values: npt.NDArray[np.float64], digits: int) -> npt.NDArray[np.float64]:
    """Positive `values` rounded to `digits` significant digits."""
    scale = 10.0 ** (digits - 1 - np.floor(np.log10(values)))
    return np.asarray(np.round(values * scale) / scale, dtype=np.float64)


def top(rows: npt.NDArray[np.intp], scores: npt.NDArray[np.float64], limit: int) -> npt.NDArray[np.intp]:
    """The `limit` best of `rows` by score, ties by row (FTS5's `ORDER BY bm25, rowid`: rows are in rowid order)."""
    if len(rows) > limit:
        # Everything scoring at least the limit-th best score; the ties at the cut are ordered below.
        floor = np.partition(scores[rows], len(rows) - limit)[len(rows) - limit]
        rows = rows[scores[rows] >= floor]
    return rows[np.lexsort((rows, -scores[rows]))][:limit]
