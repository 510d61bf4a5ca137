"""The malformed-input corpus (`malformed.py`), ingested as one batch: every kind gets its outcome, the good
documents beside the bad ones land, and nothing is set aside without a reason."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import malformed as m

from evidex.engine import Engine
from evidex.errors import IngestError

EngineFactory = Callable[..., Engine]


def test_the_corpus_has_at_least_fifty_kinds() -> None:
    kinds = [*m.FILES, *m.jsonl_kinds()]
    assert len(kinds) + len(m.REFUSALS) >= 50
    assert len({k.name for k in kinds} | {r[0] for r in m.REFUSALS}) == len(kinds) + len(m.REFUSALS)


def test_every_malformed_kind_gets_its_outcome(make_engine: EngineFactory, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for kind in m.FILES:
        (corpus / kind.path).write_bytes(kind.content if isinstance(kind.content, bytes) else kind.content.encode())
    (corpus / "docs.jsonl").write_bytes(m.jsonl_text())
    engine = make_engine(ingest={"max_document_bytes": m.SIZE_BOUND})
    report = engine.ingest([corpus])
    live = set(engine.store.ledger.document_hashes())
    unexplained = list(report.dead_letters)
    for kind in [*m.FILES, *m.jsonl_kinds()]:
        is_line = kind.path.startswith("docs.jsonl:")
        doc = kind.doc_id if is_line else kind.path
        letters = [d for d in report.dead_letters
                   if (d.location.endswith(f"/{kind.path}") if is_line else d.source == kind.path)]
        warned = [w.reason for w in report.warnings if w.source == doc]
        if kind.outcome is m.Outcome.DEAD_LETTER:
            assert [kind.expect in d.reason for d in letters] == [True], (kind.name, letters)
            unexplained = [d for d in unexplained if d not in letters]
        elif kind.outcome is m.Outcome.WARNING:
            assert doc in live and any(kind.expect in w for w in warned), (kind.name, warned)
        elif kind.outcome is m.Outcome.INGESTED:
            assert doc in live and not letters, (kind.name, letters)
        else:
            assert doc not in live and not letters, (kind.name, letters)
    assert not unexplained
    assert report.empty_documents == sum(k.outcome is m.Outcome.EMPTY for k in m.FILES)


@pytest.mark.parametrize(("name", "overlay", "line", "says"), m.REFUSALS, ids=[r[0] for r in m.REFUSALS])
def test_a_malformed_overlay_stops_the_run_naming_its_line(make_engine: EngineFactory, tmp_path: Path, name: str,
                                                           overlay: str, line: int, says: str) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text(m.BODY, encoding="utf-8")
    meta = tmp_path / "meta.jsonl"
    meta.write_text(overlay, encoding="utf-8")
    engine = make_engine()
    with pytest.raises(IngestError) as refused:
        engine.ingest([corpus], metadata=meta)
    assert refused.value.location == f"{meta}:{line}" and says in str(refused.value), (name, str(refused.value))
    assert not engine.store.ledger.document_hashes() and not engine.batches()
