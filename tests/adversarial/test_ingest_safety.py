"""Ingest and the gate against hostile metadata: a JSONL record cannot take over a page read from a file, a
citation that is no web address (javascript:, data:) cites nothing, a one-line HTML page of one paragraph still
gives chunks, and the names of pages not yet published can be kept from requesters."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from evidex.admission.gate import CitationRule, GatePolicy, Principal, RejectReason, uri_scheme
from evidex.config import ChunkingConfig
from evidex.engine import Engine
from evidex.errors import ConfigError
from evidex.ingest.html import html_document
from evidex.ingest.run import chunk_document
from evidex.result import decision_json

EngineFactory = Callable[..., Engine]
AT = datetime(2026, 6, 1, tzinfo=UTC)
GUIDE = ("---\naccess_labels: [staff]\ncitation_uri: https://docs.example.test/guide\n---\n"
         "# Guide\n\nDrain the worker before you restart the queue.\n")


def _letters(report: object) -> dict[str, str]:
    return {d.source: d.reason for d in report.dead_letters}  # type: ignore[attr-defined]


def test_a_jsonl_record_cannot_replace_a_page_read_in_the_same_folder(make_engine: EngineFactory,
                                                                        tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "guide.md").write_text(GUIDE, encoding="utf-8")
    # "a-records.jsonl" sorts before "guide.md": the page is still the one kept.
    (root / "a-records.jsonl").write_text(json.dumps({
        "doc_id": "guide.md", "text": "Ignore the guide.", "access_labels": ["public"],
        "citation_uri": "https://evil.example.test/"}) + "\n", encoding="utf-8")
    engine = make_engine()
    report = engine.ingest([root])
    letters = _letters(report)
    assert len(letters) == 1
    (source, reason), = letters.items()
    assert source.startswith("guide.md@") and source.endswith("a-records.jsonl:1")
    assert "duplicate doc_id 'guide.md'" in reason and "a-records.jsonl:1" in reason
    assert "page read from" in reason and str(root / "guide.md") in reason
    [chunk] = [c for c in engine.store.all_chunks() if c.doc_id == "guide.md"]
    assert chunk.provenance.citation_uri == "https://docs.example.test/guide"
    assert chunk.provenance.access_labels == ("staff",)


def test_a_later_jsonl_record_cannot_replace_an_indexed_page(make_engine: EngineFactory, tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "guide.md").write_text(GUIDE, encoding="utf-8")
    engine = make_engine()
    engine.ingest([root])
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text(json.dumps({"doc_id": "guide.md", "text": "Replaced."}) + "\n"
                       + json.dumps({"doc_id": "note-1", "text": "A record of its own."}) + "\n", encoding="utf-8")
    report = engine.ingest([hostile])
    [reason] = _letters(report).values()
    assert reason.startswith("duplicate doc_id 'guide.md': the JSONL record at") and "guide.md (indexed)" in reason
    texts = {c.doc_id: c.text for c in engine.store.all_chunks()}
    assert "Drain the worker" in texts["guide.md"] and texts["note-1"] == "A record of its own."
    # A record may still replace a record: the same JSONL id ingested again with new text is an update.
    hostile.write_text(json.dumps({"doc_id": "note-1", "text": "A record, revised."}) + "\n", encoding="utf-8")
    again = engine.ingest([hostile])
    assert again.dead_letters == () and again.replaced_documents == 1
    assert {c.doc_id: c.text for c in engine.store.all_chunks()}["note-1"] == "A record, revised."


@pytest.mark.parametrize(("uri", "scheme"), [
    ("javascript:alert(document.cookie)", "javascript"), ("JavaScript:alert(1)", "javascript"),
    ("data:text/html;base64,PHNjcmlwdD4=", "data"), ("https://docs.example.test/a", "https"),
    ("docs/page", ""), ("  HTTP://x.test/", "http"), ("1http:x", ""),
])
def test_uri_schemes_are_read_as_rfc_3986_writes_them(uri: str, scheme: str) -> None:
    assert uri_scheme(uri) == scheme


def test_the_gate_counts_a_citation_of_another_scheme_as_none(make_engine: EngineFactory, tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    for name, uri in (("script.md", "javascript:alert(1)"), ("inline.md", "data:text/html,<b>x</b>"),
                      ("web.md", "https://docs.example.test/web")):
        (root / name).write_text(f"---\naccess_labels: [staff]\ncitation_uri: '{uri}'\n---\n# {name}\n\n"
                                 "Rotate the signing keys every quarter.\n", encoding="utf-8")
    engine = make_engine()
    report = engine.ingest([root])
    warned = {w.source: w.reason for w in report.warnings}
    assert set(warned) == {"script.md", "inline.md"}
    assert "'javascript' is not in [gate] citation_schemes (http, https)" in warned["script.md"]
    result = engine.search_with_reasoning("rotate the signing keys", principal=Principal.of("p", ["staff"]),
                                          retrieved_at=AT)
    admitted = {group["source"] for group in result["evidence"]}
    rejected = {r["source"]: r["reason"] for r in result["rejected"]["rejected"]}
    assert admitted == {"web.md"}
    assert rejected == {"script.md": RejectReason.NO_CITATION.value, "inline.md": RejectReason.NO_CITATION.value}
    # Schemes are configuration: a team that cites its wiki over another scheme says so.
    wide = make_engine(gate={"citation_schemes": "https,data"})
    assert {g["source"] for g in wide.search_with_reasoning(
        "rotate the signing keys", principal=Principal.of("p", ["staff"]), retrieved_at=AT)["evidence"]} \
        == {"web.md", "inline.md"}


def test_a_policy_without_schemes_is_refused() -> None:
    with pytest.raises(ConfigError, match="citation_schemes names no scheme"):
        GatePolicy.from_config("citation", "counts-only", " , ")
    assert GatePolicy.from_config("citation", "counts-only", "HTTPS").citation_schemes == frozenset({"https"})
    assert CitationRule().schemes == frozenset({"http", "https"})


def test_a_one_line_html_page_of_one_paragraph_over_10_mb_gives_chunks() -> None:
    """libxml2 drops a text node over 10 MB unless told otherwise: the page read as empty, 0 chunks."""
    sentence = "Restore the snapshot before you upgrade the cluster, then check it. "
    body = sentence * (10_500_000 // len(sentence))
    html = f"<html><head><title>Restore</title></head><body><main><p>{body}</p></main></body></html>"
    assert "\n" not in html
    started = time.perf_counter()
    doc = html_document(html, "restore.html", "restore.html", "Restore")
    chunks = chunk_document(doc, ChunkingConfig(), AT)
    assert time.perf_counter() - started < 10
    assert len(doc.text) == len(body.strip())
    assert len(chunks) >= len(body) // ChunkingConfig().max_chars
    assert all(c.citation_anchor == "top" for c in chunks)
    assert chunks[-1].text.endswith("then check it.")


def _embargo_corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "merger-with-acme-announcement.md").write_text(
        "---\naccess_labels: [staff]\ncitation_uri: https://docs.example.test/m\npublished_at: 2027-01-01\n---\n"
        "# Merger\n\nThe on-call rota changes when the queue moves.\n", encoding="utf-8")
    (root / "oncall.md").write_text(
        "---\naccess_labels: [staff]\ncitation_uri: https://docs.example.test/o\n---\n"
        "# On-call\n\nThe on-call rota is kept in the queue runbook.\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("hide", [False, True])
def test_the_paths_of_unpublished_pages_can_be_hidden(make_engine: EngineFactory, tmp_path: Path,
                                                      hide: bool) -> None:
    engine = make_engine(gate={"hide_unpublished_paths": hide})
    engine.ingest([_embargo_corpus(tmp_path)])
    result = engine.search_with_reasoning("on-call rota queue", principal=Principal.of("p", ["staff"]),
                                          retrieved_at=AT)
    [rejection] = result["rejected"]["rejected"]
    assert rejection["reason"] == RejectReason.NOT_PUBLISHED.value
    assert result["rejected"]["rejected_counts"][RejectReason.NOT_PUBLISHED.value] == 1
    assert ("source" in rejection) is not hide
    assert ("merger-with-acme" in decision_json(result)) is not hide
    assert [g["source"] for g in result["evidence"]] == ["oncall.md"]


def test_all_rejected_paths_can_be_hidden(make_engine: EngineFactory, tmp_path: Path) -> None:
    root = _embargo_corpus(tmp_path)
    (root / "old.md").write_text("---\naccess_labels: [staff]\nexpires_at: 2026-01-01\n---\n# Old\n\n"
                                 "The on-call rota used to live in the queue wiki.\n", encoding="utf-8")
    engine = make_engine(gate={"hide_rejected_paths": True})
    engine.ingest([root])
    result = engine.search_with_reasoning("on-call rota queue", principal=Principal.of("p", ["staff"]),
                                          retrieved_at=AT)
    reasons = sorted(r["reason"] for r in result["rejected"]["rejected"])
    assert reasons == sorted([RejectReason.NOT_PUBLISHED.value, RejectReason.EXPIRED.value])
    assert all("source" not in r for r in result["rejected"]["rejected"])
    assert "old.md" not in decision_json(result) and "merger-with-acme" not in decision_json(result)
