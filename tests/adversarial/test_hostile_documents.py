"""One hostile document becomes a dead letter with its reason; the documents beside it are ingested."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from evidex.engine import Engine

EngineFactory = Callable[..., Engine]
CorpusWriter = Callable[..., Path]

GOOD = "# Rollback runbook\n\nRoll a release back with `deployctl undo` and confirm the health check.\n"


def letters(engine: Engine) -> dict[str, str]:
    return {d.source: d.reason for d in engine.store.ledger.dead_letters()}


def sources(engine: Engine) -> set[str]:
    return set(engine.store.ledger.document_hashes())


def yaml_nested(levels: int) -> str:
    return "---\n" + "".join("  " * i + f"k{i}:\n" for i in range(levels)) + "  " * levels + "v: 1\n---\nBody.\n"


def test_front_matter_nested_a_thousand_levels_is_a_dead_letter_and_the_good_page_lands(
        make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    root = write_corpus({
        "good.md": GOOD,
        "deep-yaml.md": yaml_nested(1000),
        "deep-yaml-flow.md": "---\nx: " + "[" * 1000 + "]" * 1000 + "\n---\nBody.\n",
        "deep-toml.md": "+++\nx = " + "{a = " * 1000 + "1" + "}" * 1000 + "\n+++\nBody.\n",
        "deep.jsonl": json.dumps({"doc_id": "deep", "text": "t", "m": json.loads("[" * 900 + "]" * 900)}) + "\n",
    })
    engine = make_engine()
    report = engine.ingest([root])
    assert sources(engine) == {"good.md"}
    found = letters(engine)
    assert set(found) == {"deep-yaml.md", "deep-yaml-flow.md", "deep-toml.md", "deep.jsonl:1"}
    assert all("nested deeper than 64 levels" in reason for reason in found.values()), found
    assert {d.location.rsplit(":", 1)[-1] for d in report.dead_letters if d.source == "deep-yaml.md"} == {"65"}


def test_front_matter_nested_as_deep_as_the_bound_still_loads(make_engine: EngineFactory,
                                                               write_corpus: CorpusWriter) -> None:
    engine = make_engine()
    engine.ingest([write_corpus({"ok.md": yaml_nested(60) + GOOD})])
    assert sources(engine) == {"ok.md"} and not letters(engine)


def test_a_document_over_the_size_bound_is_a_dead_letter_unread(make_engine: EngineFactory,
                                                                write_corpus: CorpusWriter) -> None:
    root = write_corpus({"good.md": GOOD, "huge.md": "# Huge\n\n" + "word " * 2_000,
                         "lines.jsonl": json.dumps({"doc_id": "small", "text": "fits"}) + "\n"
                         + json.dumps({"doc_id": "big", "text": "x" * 5_000}) + "\n"})
    engine = make_engine(ingest={"max_document_bytes": 4_000})
    engine.ingest([root])
    assert sources(engine) == {"good.md", "small"}
    assert letters(engine) == {
        "huge.md": "document of 10008 bytes is over [ingest] max_document_bytes = 4000",
        "lines.jsonl:2": "document of 5030 bytes is over [ingest] max_document_bytes = 4000"}


def test_a_document_slower_than_the_time_bound_is_a_dead_letter(make_engine: EngineFactory,
                                                                 write_corpus: CorpusWriter) -> None:
    """A 3 MB page takes far longer than 50 ms to read and chunk; the small page far less."""
    slow = "# Slow\n\n" + "".join(f"## Part {i}\n\nSome words about part {i}.\n\n" for i in range(60_000))
    engine = make_engine(ingest={"document_timeout_s": 0.05})
    engine.ingest([write_corpus({"good.md": GOOD, "slow.md": slow})])
    assert sources(engine) == {"good.md"}
    assert letters(engine)["slow.md"].endswith("took longer than [ingest] document_timeout_s = 0.05 s")


def test_a_boolean_doc_id_is_an_error_not_the_id_true(make_engine: EngineFactory,
                                                       write_corpus: CorpusWriter) -> None:
    root = write_corpus({"docs.jsonl": '{"doc_id": true, "text": "t"}\n{"_id": false, "text": "t"}\n'
                                       '{"doc_id": 7, "text": "seven"}\n'})
    engine = make_engine()
    engine.ingest([root])
    assert sources(engine) == {"7"}
    assert letters(engine) == {"docs.jsonl:1": "'doc_id' must be a string or an integer, not true",
                               "docs.jsonl:2": "'doc_id' must be a string or an integer, not false"}
