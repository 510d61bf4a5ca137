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
from evidex.interfaces.cli import DEMO_QUESTIONS

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
