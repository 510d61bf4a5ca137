"""Fuzzing with bounded budgets: the loaders turn any bytes into a document or a dead letter (never an exception
that would end the batch), chunks stay inside their document, and question parsing takes any text."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidex.config import ChunkingConfig
from evidex.errors import EvidexError
from evidex.evidence.aspects import question_aspects, sub_questions
from evidex.ingest.limits import DocumentLimits
from evidex.ingest.loaders import LoadFailure, iter_jsonl, load_file
from evidex.ingest.run import chunk_document
from evidex.interfaces.tool import parse_arguments

BUDGET = settings(max_examples=60, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
LIMITS = DocumentLimits(max_bytes=200_000, timeout_s=5.0)
MARKUP = ["---\n", "+++\n", "title: ", "access_labels: [a]\n", "published_at: 2024-01-01\n", "# ", "## ", "\n\n",
          "===\n", "```\n", "`", "<!--", "-->", "{{<", ">}}", "[a](b)", "{#id}", "<b>", "</td><td>", "&amp;",
          "\x00", "\x1b[2J", "\ufeff", "\r\n", " ", "\t", "\u202e"]
TEXT = st.lists(st.sampled_from(MARKUP) | st.text(max_size=8), max_size=30).map("".join)


@BUDGET
@given(text=TEXT, suffix=st.sampled_from([".md", ".txt", ".html", ".markdown"]), garble=st.booleans())
def test_a_file_of_any_content_loads_or_fails_alone(tmp_path: Path, text: str, suffix: str, garble: bool) -> None:
    path = tmp_path / f"page{suffix}"
    data = text.encode("utf-8", "surrogatepass")
    path.write_bytes(data[: len(data) // 2] + b"\xff" + data[len(data) // 2:] if garble else data)
    item = load_file(path, path.name, LIMITS)
    if isinstance(item, LoadFailure):
        assert item.reason and item.source == path.name
        return
    chunks = chunk_document(item, ChunkingConfig(), datetime.now(UTC))
    for chunk in chunks:
        assert 0 <= chunk.span_start < chunk.span_end <= len(item.text)
        assert chunk.citation_anchor and chunk.text.strip()


@BUDGET
@given(lines=st.lists(st.text(max_size=40) | st.sampled_from(['{"doc_id": "a", "text": "t"}', '{"_id": 1, "text": "x"}',
                                                            "[", "{}", '{"doc_id": true}', "\x00"]), max_size=8))
def test_a_jsonl_file_of_any_lines_gives_one_item_per_nonblank_line(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(line.replace("\n", " ").replace("\r", " ") for line in lines) + "\n",
                    encoding="utf-8", errors="surrogatepass")
    items = list(iter_jsonl(path, "docs.jsonl", LIMITS))
    assert len(items) == sum(1 for line in path.read_bytes().splitlines() if line.strip())


@BUDGET
@given(question=st.text(max_size=300))
def test_any_question_parses_into_bounded_aspects(question: str) -> None:
    started = time.perf_counter()
    aspects = question_aspects(question, max_aspects=6)
    sub_questions(question)
    assert time.perf_counter() - started < 2.0
    assert len(aspects.aspects) <= 6


@BUDGET
@given(args=st.dictionaries(st.sampled_from(["query", "k", "aspect_focus", "principal", "extra"]),
                            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50)
                            | st.lists(st.integers(), max_size=3), max_size=5))
def test_tool_arguments_parse_or_are_refused_with_a_reason(args: dict[str, object]) -> None:
    try:
        parsed = parse_arguments(args)
    except (EvidexError, ValueError) as exc:
        assert str(exc)
    else:
        assert isinstance(parsed.query, str) and parsed.query.strip()
        assert 1 <= parsed.k <= 50


@pytest.mark.parametrize("size", [200_000])
def test_the_size_bound_holds_for_generated_pages_too(tmp_path: Path, size: int) -> None:
    path = tmp_path / "big.md"
    path.write_text("x" * (size + 1), encoding="utf-8")
    item = load_file(path, "big.md", LIMITS)
    assert isinstance(item, LoadFailure) and "max_document_bytes" in item.reason
