"""Equal-budget evaluation: what a pipeline's answer holds within a context budget in tokens.

An agent pays for tokens, not for chunks: ten chunks of one pipeline may cost twice the text of another's ten.
Every pipeline is therefore also scored on the context it would give within 1,024, 2,048 and 4,096 tokens
(`BUDGETS_TOKENS`), counted with the default embedder's tokenizer (the `tokenizer.json` shipped beside the
packaged ONNX model, `evidex/data/default-model/`).

What is counted. A chunk costs the tokens of its title, a newline and its text (`shown_text`): what a context
shows of it. No special tokens ([CLS], [SEP]) and no truncation (the embedder truncates to 256 tokens to embed;
a budget counts the whole text).

How a budget is spent (`within_budget`). A pipeline's answer is read in its own order, and a chunk is taken
while it fits in what is left; the first chunk that does not fit ends the context (it is not skipped in favour
of a shorter one further down: an agent reads a ranking from the top). The same rule holds for every pipeline;
only the order differs. A plain retriever's order is its ranking. An evidence pipeline's order is its context
(the reserved and graded selection, with the neighbours assembly added) and then its deeper admitted ranking,
so a budget larger than its context is filled the way a plain ranking is.

    >>> counter = TokenCounter()
    >>> within_budget(ranking, 2048, counter)  # the chunks an answer within 2,048 tokens holds
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evidex.embedding.export_dir import TOKENIZER_FILE
from evidex.embedding.onnx_graph import PACKAGED_MODEL, packaged_data_dir
from evidex.errors import BackendUnavailable
from evidex.types import Chunk

BUDGETS_TOKENS: tuple[int, ...] = (1024, 2048, 4096)


def shown_text(chunk: Chunk) -> str:
    """The text a context shows of a chunk, and that a budget counts: its title, a newline, its text (the text
    alone when the chunk has no title)."""
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


def default_tokenizer_file() -> Path:
    """The tokenizer of the default embedder: the one shipped with the packaged ONNX model."""
    return packaged_data_dir() / PACKAGED_MODEL / TOKENIZER_FILE


class TokenCounter:
    """Counts a chunk's tokens (`shown_text`) with a `tokenizers` tokenizer file, untruncated and without special
    tokens; each record is counted once (by record id and content hash)."""

    def __init__(self, tokenizer_file: Path | None = None) -> None:
        try:
            import tokenizers
        except ImportError as exc:  # a core dependency: only a broken install lacks it
            raise BackendUnavailable("counting tokens needs the tokenizers package: pip install -e .") from exc
        self._tokenizer: Any = tokenizers.Tokenizer.from_file(str(tokenizer_file or default_tokenizer_file()))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._counts: dict[tuple[str, str], int] = {}

    def text_tokens(self, text: str) -> int:
        """Tokens of `text`, without special tokens."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def tokens(self, chunk: Chunk) -> int:
        key = (chunk.record_id, chunk.content_hash)
        if key not in self._counts:
            self._counts[key] = self.text_tokens(shown_text(chunk))
        return self._counts[key]


def within_budget(chunks: Sequence[Chunk], budget_tokens: int, counter: TokenCounter) -> tuple[Chunk, ...]:
    """The chunks read in order while each fits in what is left of `budget_tokens`; the first that does not fit
    ends the context. A record met twice is read once."""
    taken: list[Chunk] = []
    seen: set[str] = set()
    left = budget_tokens
    for chunk in chunks:
        if chunk.record_id in seen:
            continue
        cost = counter.tokens(chunk)
        if cost > left:
            break
        seen.add(chunk.record_id)
        taken.append(chunk)
        left -= cost
    return tuple(taken)
