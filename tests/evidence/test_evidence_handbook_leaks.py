"""Nothing of a restricted page reaches an engineering-read principal: not its marker, not one of its
sentences, in the result or in the logs, for every bundled question and for queries made of the restricted
pages' own words. The same question as a security-team member does return the page, so the check can fail.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evidence_support import (
    BREAK_GLASS_QUESTION,
    ENGINEER,
    MARKER,
    QUESTIONS,
    RESTRICTED_LABEL,
    RETRIEVED_AT,
    SECURITY,
    HiddenText,
    all_chunks,
    normalised,
    open_handbook,
    restricted_text,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from evidex.embedding.protocol import Embedder
from evidex.engine import Engine
from evidex.interfaces.cli_query import DEMO_QUESTIONS
from evidex.pipeline import SearchRequest
from evidex.types import RetrievalMode

BUNDLED = [json.loads(line)["question"] for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
ALL_QUESTIONS = [*BUNDLED, *(q for _, q in DEMO_QUESTIONS)]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path, embedder: Embedder) -> Iterator[Engine]:
    e = open_handbook(tmp_path_factory.mktemp("handbook-leaks") / "idx", cache_dir, embedder)
    yield e
    e.close()


@pytest.fixture(scope="module")
def hidden(engine: Engine) -> HiddenText:
    h = restricted_text(engine)
    assert len(h.sentences) > 20 and h.record_ids
    assert any(MARKER in s for s in h.sentences)
    return h


@pytest.fixture(scope="module")
def restricted_words(engine: Engine) -> list[str]:
    words: set[str] = set()
    for c in all_chunks(engine):
        if RESTRICTED_LABEL in c.provenance.access_labels:
            words |= {w for w in re.findall(r"[A-Za-z][A-Za-z0-9-]{3,}", c.text)}
    return sorted(words)


def leaks(value: Any, hidden: HiddenText, typed: str = "") -> list[str]:
    """Restricted sentences and the marker found in `value`. What the requester typed (`typed`) is echoed
    back in the result (query, aspects, rescue queries) and is not a leak, so it is left out of the check."""
    dumped = json.dumps(value, ensure_ascii=False)
    text = normalised(value)
    found = [s for s in hidden.sentences if s in text and s not in typed]
    if MARKER not in typed and (MARKER in dumped or MARKER in json.dumps(value)):
        found.append(MARKER)
    return found


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("question", ALL_QUESTIONS)
def test_bundled_questions_leak_nothing(engine: Engine, hidden: HiddenText, question: str,
                                        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="evidex"):
        result = engine.search_with_reasoning(question, principal=ENGINEER, retrieved_at=RETRIEVED_AT)
    assert leaks(result, hidden) == []
    dumped = json.dumps(result, ensure_ascii=False)
    assert not [r for r in hidden.record_ids if r in dumped]  # access rejections are counts only
    logged = "\n".join(" ".join(r.getMessage().split()) for r in caplog.records)
    assert caplog.records  # the gate does log at DEBUG: the check is live
    assert MARKER not in logged
    assert not [s for s in hidden.sentences if s in logged]
    # A restricted page's path names it ("security/breakglass-root-token.md"): the gate logs record ids only.
    restricted_pages = {c.source for c in all_chunks(engine) if RESTRICTED_LABEL in c.provenance.access_labels}
    assert not [p for p in restricted_pages if p in logged or p.rsplit(".", 1)[0] in logged]


@settings(max_examples=30)
@given(data=st.data())
def test_queries_made_of_restricted_words_leak_nothing(engine: Engine, hidden: HiddenText,
                                                       restricted_words: list[str], data: st.DataObject) -> None:
    words = data.draw(st.lists(st.sampled_from(restricted_words), min_size=1, max_size=8), label="words")
    query = " ".join(words)
    collect = Collect()
    logger = logging.getLogger("evidex")
    old_level = logger.level
    logger.addHandler(collect)
    logger.setLevel(logging.DEBUG)
    try:
        result = engine.search_with_reasoning(query, principal=ENGINEER, retrieved_at=RETRIEVED_AT)
    finally:
        logger.removeHandler(collect)
        logger.setLevel(old_level)
    assert leaks(result, hidden, typed=query) == []
    dumped = json.dumps(result, ensure_ascii=False)
    assert not [r for r in hidden.record_ids if r in dumped]
    logged = "\n".join(" ".join(m.split()) for m in collect.messages)
    assert MARKER in query or MARKER not in logged
    assert not [s for s in hidden.sentences if s in logged and s not in query]


def test_a_query_that_is_the_marker_gets_only_its_own_words_back(engine: Engine, hidden: HiddenText) -> None:
    """The marker is the strongest lexical match for the restricted page, and the result echoes the query:
    the page must still not come back, nor any of its sentences or record ids."""
    result = engine.search_with_reasoning(MARKER, principal=ENGINEER, retrieved_at=RETRIEVED_AT)
    assert leaks(result, hidden, typed=MARKER) == []
    assert "security/breakglass-root-token.md" not in {g["source"] for g in result["evidence"]}
    assert not [r for r in hidden.record_ids if r in json.dumps(result, ensure_ascii=False)]
    assert MARKER in leaks(result, hidden)  # without the echo allowance the echo alone would be flagged


def test_the_check_can_fail_security_team_sees_the_page(engine: Engine, hidden: HiddenText) -> None:
    result = engine.search_with_reasoning(BREAK_GLASS_QUESTION, principal=SECURITY, retrieved_at=RETRIEVED_AT)
    assert "security/breakglass-root-token.md" in {g["source"] for g in result["evidence"]}
    assert MARKER in leaks(result, hidden)
    assert len(leaks(result, hidden)) > 1


@pytest.fixture(scope="module")
def restricted_only_words(engine: Engine) -> list[str]:
    """Words (five letters or more) of restricted pages whose every full-text match is restricted: by the
    index's own tokenizer and stemmer, they occur nowhere an engineer may read."""
    chunks = {c.record_id: c for c in all_chunks(engine)}
    candidates = {w.lower() for c in chunks.values() if RESTRICTED_LABEL in c.provenance.access_labels
                  for w in re.findall(r"[A-Za-z]{5,}", c.text)}
    only = sorted(w for w in candidates
                  if all(RESTRICTED_LABEL in chunks[h.record_id].provenance.access_labels
                         for h in engine.store.search_sparse(w, len(chunks))))
    assert "dublin" in only  # "safe BG-2 in the Lisbon office, or its twin in Dublin" (break-glass page)
    return only


def _probe(engine: Engine, word: str, principal: Any) -> dict[str, Any]:
    result = engine.search_with_reasoning(f"Is anything kept in {word.capitalize()}?", principal=principal,
                                          retrieved_at=RETRIEVED_AT)
    stages = {s["stage"]: s.get("decisions") or {} for s in result["trace"]}
    return {"sparse_hits": stages["retrieve"]["hits"][1],
            "lookup_hits": sum(s["hits"] for s in stages["rescue"]["names"] + stages["rescue"]["searches"]),
            "found_but_rejected": result["signals"]["coverage"]["families_found_but_rejected"],
            "covered": result["signals"]["coverage"]["families_covered"],
            "access_rejections": result["rejected"]["rejected_counts"]["access-label-not-granted"]}


def test_a_question_cannot_probe_restricted_text_for_a_word(engine: Engine, restricted_only_words: list[str]) -> None:
    """Asking about a word that only restricted pages contain must look to an engineer exactly like asking
    about a word found nowhere: no search hit counted in the trace, no aspect found-but-rejected, no access
    rejection counted. (Before, 'Dublin' came back found-but-rejected and 'Madrid' missing.) The security
    team's answer to the same questions differs, so the probe would work if anything reached through."""
    words = restricted_only_words[:: max(1, len(restricted_only_words) // 12)]
    nowhere = _probe(engine, "Zqvorth", ENGINEER)
    assert not nowhere["found_but_rejected"] and nowhere["access_rejections"] == 0
    blind = ("sparse_hits", "lookup_hits", "found_but_rejected", "access_rejections")
    for word in words:
        seen = _probe(engine, word, ENGINEER)
        assert {k: seen[k] for k in blind} == {k: nowhere[k] for k in blind}, word
    security = [_probe(engine, word, SECURITY) for word in words]
    assert all(s["sparse_hits"] > nowhere["sparse_hits"] for s in security)
    assert sum(1 for s in security if s["covered"]) >= len(words) // 2


def test_restricted_text_moves_no_readable_score(engine: Engine, restricted_only_words: list[str]) -> None:
    """Word statistics are a side channel: BM25's word rarity had been taken over every record, and the fused
    reranker's over a pool holding the restricted records a declared family brought in, so a readable page
    scored differently for a word only restricted text holds than for a made-up one. Searched by words alone
    (no embedding of the differing word), every readable score must now be the same for both; the security
    team's differ, so the probe would work if anything reached through."""
    def scores(word: str, principal: Any) -> list[tuple[Any, ...]]:
        outcome = engine.run(SearchRequest(f"root token {word}", principal=principal, retrieved_at=RETRIEVED_AT,
                                           mode=RetrievalMode.BM25))
        return [(c.chunk.record_id, round(c.score, 9), c.scores, c.sparse_score) for c in outcome.ranked]

    nowhere = scores("zqvorth", ENGINEER)
    searchable = [w for w in restricted_only_words if engine.store.search_sparse(w, 1)]  # not a stopword
    words = searchable[:: max(1, len(searchable) // 8)]
    for word in words:
        assert scores(word, ENGINEER) == nowhere, word
    assert all(scores(word, SECURITY) != scores("zqvorth", SECURITY) for word in words)

def test_a_focused_identifier_cannot_probe_restricted_text(engine: Engine) -> None:
    """A question of a declared shape pulls restricted records into the pool (the operator's choice); an aspect
    focus is the requester's own words, so a restricted record holding it must not make it found-but-rejected.
    VL_TOKEN occurs only on the restricted break-glass page: it had come back found-but-rejected, and the
    made-up VL_TOKENZ missing."""
    def focus_status(code: str) -> dict[str, Any]:
        result = engine.search_with_reasoning(BREAK_GLASS_QUESTION, aspect_focus=code, principal=ENGINEER,
                                              retrieved_at=RETRIEVED_AT)
        return {"status": next(f["status"] for f in result["families"] if f["name"] == code),
                "recommendation": {**result["decision"]["recommendation"], "focus": None}}

    assert focus_status("VL_TOKEN") == focus_status("VL_TOKENZ")
    assert focus_status("VL_TOKEN")["status"] == "missing"
