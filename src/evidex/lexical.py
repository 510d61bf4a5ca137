"""What a word is, for every lexical step: lower-cased letters and digits, without stopwords.

The sparse search of each store, the planner's aspect terms, the reranker's word overlap and the evaluation
all read words this way, so one question's words are the same everywhere. This module imports nothing from
evidex (like `evidex.types` and `evidex.errors`): stores and stages alike build on it.

    >>> tokens("How do the Pods reach etcd_backups?")
    ['pods', 'reach', 'etcd', 'backups']
"""

from __future__ import annotations

import re

# A short English stopword list (Lucene's default set plus question words): dropping these keeps BM25
# queries fast on large indexes and matches how the published BM25 baselines tokenize.
STOPWORDS = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "do", "does", "did",
    "can", "could", "should", "would", "i", "you", "we", "he", "she", "my", "your", "our", "its", "from", "has",
    "have", "had", "been", "were", "than", "so", "any", "all", "some",
])
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens without stopwords, in order, duplicates kept."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]
