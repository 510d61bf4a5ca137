"""Equal-budget evaluation: tokens counted with the default embedder's tokenizer over a chunk's title and text,
a pipeline's answer read in order until the next chunk would pass the budget, and the `at_tokens` report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evidex.engine import Engine
from evidex.evaluation.answers import Ranked
from evidex.evaluation.budget import BUDGETS_TOKENS, TokenCounter, shown_text, within_budget
from evidex.evaluation.datasets import FamilySpec, Question
from evidex.evaluation.runner import at_tokens, evaluate
from evidex.testing.store_builders import make_chunk

EngineFactory = Callable[..., Engine]  # the make_engine fixture (tests/conftest.py)
CorpusWriter = Callable[..., Path]  # the write_corpus fixture

# Token counts of shown_text, with the packaged all-MiniLM-L6-v2 tokenizer (no [CLS] / [SEP]):
PROBES = make_chunk("probes", 0, "A liveness probe restarts a container.", title="Probes")  # 11: probe ##s a live ...
SECRETS = make_chunk("secrets", 0, "A Secret holds a password.", title="Secrets")  # 7
VOLUMES = make_chunk("volumes", 0, "Mount a volume at a path.", title="Volumes")  # 8
BARE = make_chunk("bare", 0, "a", title="")  # 1


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()


def test_a_chunk_costs_its_title_and_text_without_special_tokens(counter: TokenCounter) -> None:
    assert shown_text(PROBES) == "Probes\nA liveness probe restarts a container."
    assert shown_text(BARE) == "a"
    assert [counter.tokens(c) for c in (PROBES, SECRETS, VOLUMES, BARE)] == [11, 7, 8, 1]


def test_a_long_text_is_counted_whole(counter: TokenCounter) -> None:
    """The embedder truncates to 256 tokens to embed; a budget pays for the whole text."""
    long = make_chunk("long", 0, " ".join(["replica"] * 600), title="")
    assert counter.tokens(long) == 600


def test_the_first_chunk_that_does_not_fit_ends_the_context(counter: TokenCounter) -> None:
    ranking = [PROBES, VOLUMES, BARE]
    assert within_budget(ranking, 19, counter) == (PROBES, VOLUMES)  # 11 + 8 = 19: exactly full
    # 11 taken, 1 left: VOLUMES (8) does not fit and ends it, though BARE (1) would have fitted after it.
    assert within_budget(ranking, 12, counter) == (PROBES,)
    assert within_budget(ranking, 10, counter) == ()
    assert within_budget([PROBES, PROBES, BARE], 12, counter) == (PROBES, BARE)  # a record is read once


def test_at_tokens_reads_each_answer_in_its_own_order(counter: TokenCounter) -> None:
    question = Question("q", "how do probes and secrets work", (FamilySpec("probes", doc_ids=("probes",)),
                                                                 FamilySpec("secrets", doc_ids=("secrets",))))
    plain = Ranked((PROBES, VOLUMES, SECRETS))
    # An evidence pipeline's chunks are its context, then its deeper ranking: both read in that order.
    evidence = Ranked((PROBES, SECRETS, VOLUMES), {"context": (PROBES, SECRETS)})
    rows = [(question, plain, 1.0)]
    assert at_tokens(rows, counter, (11, 18, 19, 26)) == {
        "11": {"family_recall": 0.5, "all_found": 0.0},
        "18": {"family_recall": 0.5, "all_found": 0.0},  # VOLUMES (8) does not fit in 7: SECRETS is never read
        "19": {"family_recall": 0.5, "all_found": 0.0},
        "26": {"family_recall": 1.0, "all_found": 1.0}}
    both = at_tokens([(question, evidence, 1.0), (question, plain, 1.0)], counter, (18,))
    assert both == {"18": {"family_recall": 0.75, "all_found": 0.5}}


def test_evaluate_reports_every_budget_beside_the_k_figures(make_engine: EngineFactory,
                                                             write_corpus: CorpusWriter) -> None:
    corpus: Path = write_corpus({
        "probes.md": "# Probes\n\nA liveness probe restarts a container that stopped answering.\n",
        "secrets.md": "# Secrets\n\nA Secret holds a password that a Pod reads as a file.\n",
        "volumes.md": "# Volumes\n\nMount a volume at a path inside the container.\n"})
    engine = make_engine()
    engine.ingest([corpus])
    question = Question("q", "Which object holds a password?", (FamilySpec("secrets", source_regex=r"^secrets\.md$"),))
    report = evaluate(engine, [question], ["bm25", "full"], k=1)
    for name in ("bm25", "full"):
        row = report["pipelines"][name]
        assert list(row["at_tokens"]) == [str(b) for b in BUDGETS_TOKENS] == ["1024", "2048", "4096"]
        # Three short pages fit in every budget: the answer within it holds the family as the whole ranking does.
        assert row["at_tokens"]["1024"] == {"family_recall": 1.0, "all_found": 1.0}
