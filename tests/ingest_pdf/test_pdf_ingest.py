"""PDF ingest on PDFs these tests write with reportlab: text per page cited `page=N`, headings from the outline,
a scanned (text-less) page reported, and unreadable, encrypted or text-less files as dead letters."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from evidex.config import ChunkingConfig
from evidex.engine import Engine
from evidex.ingest.loaders import LoadFailure, iter_documents, load_file
from evidex.ingest.run import chunk_document
from evidex.types import Document, RetrievalMode

EngineFactory = Callable[..., Engine]  # the make_engine fixture (tests/conftest.py)
CorpusWriter = Callable[..., Path]  # the write_corpus fixture

SMALL = ChunkingConfig(max_chars=400, overlap_chars=0, min_chars=1)


def write_pdf(pages: Sequence[Sequence[str]], outline: Sequence[tuple[int, str, int]] = (),
              blank: Sequence[int] = ()) -> bytes:
    """A PDF with one page per item of `pages` (its lines, top down), outline entries (page index, title, level;
    an entry points at its page's top), and the pages in `blank` drawn as an image only (a scan: no text)."""
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4)
    pdf.setTitle("Vaultkeeper operations manual")
    for index, lines in enumerate(pages):
        for number, (page, title, level) in enumerate(outline):
            if page == index:  # one destination per entry: reportlab names an entry by its destination
                pdf.bookmarkPage(f"entry{number}")
                pdf.addOutlineEntry(title, f"entry{number}", level=level)
        if index in blank:
            pdf.setFillGray(0.3)
            pdf.rect(72, 500, 300, 200, fill=1)  # what a scanner leaves: marks, no text
        y = 780
        for line in lines:
            pdf.drawString(72, y, line)
            y -= 18
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


MANUAL = [
    ["Installing", "Unpack the release archive on every storage node.", "Start the agent with vaultctl start."],
    ["Sealing volumes", "A sealed volume accepts no more writes.", "Restoring",
     "Stop the writers before restoring a snapshot."],
    ["Stop the writers and replay the write-ahead log after the restore finishes."],
]
OUTLINE = [(0, "Installing", 0), (1, "Sealing volumes", 0), (1, "Restoring", 1)]


def load(tmp_path: Path, data: bytes, name: str = "manual.pdf") -> Document | LoadFailure:
    path = tmp_path / name
    path.write_bytes(data)
    return load_file(path, name)


def test_pages_cite_their_page_and_chunks_carry_the_outline_heading(tmp_path: Path) -> None:
    doc = load(tmp_path, write_pdf(MANUAL, OUTLINE))
    assert isinstance(doc, Document)
    assert (doc.fmt, doc.title, doc.warnings) == ("pdf", "Vaultkeeper operations manual", ())
    assert doc.anchors == {"page=1", "page=2", "page=3"}
    chunks = chunk_document(doc, SMALL, datetime.now(UTC))
    assert [(c.citation_anchor, c.heading, c.text.splitlines()[0]) for c in chunks] == [
        ("page=1", "Installing", "Installing"),
        ("page=2", "Sealing volumes", "Sealing volumes"),
        ("page=2", "Restoring", "Restoring"),  # the entry starts at the line holding its title
        ("page=3", "Restoring", "Stop the writers and replay the write-ahead log after the restore finishes."),
    ]
    assert "Start the agent with vaultctl start." in chunks[0].text
    assert "Restoring" not in chunks[1].text


def test_without_an_outline_every_page_is_a_section_without_a_heading(tmp_path: Path) -> None:
    doc = load(tmp_path, write_pdf(MANUAL))
    assert isinstance(doc, Document)
    chunks = chunk_document(doc, SMALL, datetime.now(UTC))
    assert [(c.citation_anchor, c.heading) for c in chunks] == [("page=1", ""), ("page=2", ""), ("page=3", "")]
    assert "# " not in " ".join(c.text for c in chunks)


def test_a_scanned_page_is_reported_and_the_rest_is_indexed(tmp_path: Path) -> None:
    pages = [MANUAL[0], [], MANUAL[2]]
    doc = load(tmp_path, write_pdf(pages, blank=[1]))
    assert isinstance(doc, Document)
    assert doc.warnings == ("page 2 has no extractable text (a scanned image?): not indexed",)
    assert [c.citation_anchor for c in chunk_document(doc, SMALL, datetime.now(UTC))] == ["page=1", "page=3"]


def test_a_pdf_without_any_text_is_a_dead_letter_with_the_reason(tmp_path: Path) -> None:
    failure = load(tmp_path, write_pdf([[], []], blank=[0, 1]))
    assert isinstance(failure, LoadFailure)
    assert failure.reason == "no extractable text on any of its 2 page(s) (scanned images? OCR it first)"


@pytest.mark.parametrize("data", [b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog", b"", b"not a pdf at all"])
def test_a_damaged_file_is_a_dead_letter(tmp_path: Path, data: bytes) -> None:
    failure = load(tmp_path, data)
    assert isinstance(failure, LoadFailure) and failure.reason.startswith("not a readable PDF")


def test_a_truncated_pdf_is_a_dead_letter(tmp_path: Path) -> None:
    whole = write_pdf(MANUAL, OUTLINE)
    failure = load(tmp_path, whole[: len(whole) // 3])
    assert isinstance(failure, LoadFailure) and failure.reason.startswith("not a readable PDF")


def test_an_encrypted_pdf_is_a_dead_letter_unless_it_opens_without_a_password(tmp_path: Path) -> None:
    def encrypted(user_password: str) -> bytes:
        writer = PdfWriter(clone_from=PdfReader(io.BytesIO(write_pdf(MANUAL))))
        writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm="RC4-128")
        out = io.BytesIO()
        writer.write(out)
        return out.getvalue()

    failure = load(tmp_path, encrypted("reader-secret"))
    assert isinstance(failure, LoadFailure)
    assert failure.reason == "encrypted: the PDF needs a password to read its text"
    opened = load(tmp_path, encrypted(""), "open.pdf")  # an owner password alone restricts editing, not reading
    assert isinstance(opened, Document) and "vaultctl start" in opened.text


def test_pdfs_in_a_folder_are_ingested_searched_and_cited_by_page(make_engine: EngineFactory,
                                                                   write_corpus: CorpusWriter) -> None:
    corpus = write_corpus({"manual.pdf": write_pdf(MANUAL, OUTLINE), "broken.pdf": b"%PDF-1.4 broken",
                           "notes.md": "# Notes\n\nKeep the archive bucket private.\n"})
    engine = make_engine()
    report = engine.ingest([corpus])
    assert [(d.source, d.reason.split(":")[0]) for d in report.dead_letters] == [("broken.pdf", "not a readable PDF")]
    (hit,) = engine.search("replay the write-ahead log", k=1, mode=RetrievalMode.BM25)
    assert (hit.chunk.source, hit.chunk.citation_anchor, hit.chunk.heading) == ("manual.pdf", "page=3", "Restoring")
    assert {d.source for d in iter_documents(corpus) if isinstance(d, Document)} == {"manual.pdf", "notes.md"}
