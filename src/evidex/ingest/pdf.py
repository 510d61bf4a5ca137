"""PDF files as documents: the text of each page, cited by page (`manual.pdf#page=3`, the open parameter every
PDF viewer and browser follows, RFC 8118), under the heading the PDF's outline gives that part.

Text comes from pypdf (pure Python, BSD licensed; chosen over pypdfium2 and PyMuPDF: see the ingest notes in
docs/). It is an optional extra: without it a PDF becomes a dead letter naming the install command, and the
rest of an ingest still lands.

- A page is one section at least, anchored `page=N`. Where the outline (bookmarks) has entries, a chunk under
  an entry carries its title as heading: an entry starts at the line of its page that holds its title, or at
  the top of its page when no line does.
- A page without extractable text (a scanned image) is skipped and named in the document's warnings; a PDF
  with no text on any page, an encrypted one that opens with no empty password, and a file pypdf cannot
  read are dead letters with the reason.

    >>> doc = pdf_document(Path("runbook.pdf").read_bytes(), "runbook.pdf", "runbook.pdf", "Runbook")
    >>> doc.sections[0].anchor
    'page=1'
"""

from __future__ import annotations

import dataclasses
import io
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evidex.errors import BackendUnavailable, IngestError
from evidex.ingest.sections import missing_anchors
from evidex.types import Document, Section

if TYPE_CHECKING:
    from pypdf import PdfReader

PDF_EXTRA = "pip install 'evidex[pdf]'"
_BLANK_RUNS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


@dataclass(frozen=True)
class _Entry:
    page: int  # 0-based
    title: str


def pdf_document(raw: bytes, source: str, origin: str, default_title: str) -> Document:
    """One PDF as a document with a section per page (split further where an outline entry starts on it).
    Raises IngestError for a file that is not a readable PDF or holds no text, BackendUnavailable without pypdf."""
    reader = _open(raw)
    try:
        texts = [_page_text(page) for page in reader.pages]
        entries = list(_outline(reader))
        title = " ".join(str(reader.metadata.title or "").split()) if reader.metadata is not None else ""
    except (IngestError, BackendUnavailable):
        raise
    except Exception as exc:  # pypdf reports a damaged file by many exception types
        raise IngestError(f"not a readable PDF: {_describe(exc)}") from None
    blank = [n for n, text in enumerate(texts, start=1) if not text.strip()]
    if len(blank) == len(texts):
        raise IngestError(f"no extractable text on any of its {len(texts)} page(s) (scanned images? OCR it first)")
    text, sections = _sections(texts, entries)
    doc = Document(doc_id=source, source=source, title=title or default_title, text=text, fmt="pdf",
                   origin=origin, sections=sections,
                   anchors=frozenset(f"page={n}" for n in range(1, len(texts) + 1)))
    warnings = [f"page {n} has no extractable text (a scanned image?): not indexed" for n in blank]
    warnings += [f"citation anchor #{a} does not exist in the PDF: its chunks cite no anchor" for a in
                 missing_anchors(doc)]
    return dataclasses.replace(doc, warnings=tuple(warnings)) if warnings else doc


def _pypdf() -> Any:
    try:
        import pypdf  # the optional extra: imported when a PDF is read
    except ImportError as exc:
        raise BackendUnavailable(f"reading PDF files needs pypdf: {PDF_EXTRA} ({exc})") from None
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a damaged file is reported once, as a dead letter
    return pypdf


def _open(raw: bytes) -> PdfReader:
    pypdf = _pypdf()
    try:
        reader: PdfReader = pypdf.PdfReader(io.BytesIO(raw))
        if reader.is_encrypted and not reader.decrypt(""):  # owner-password-only files open with ""
            raise IngestError("encrypted: the PDF needs a password to read its text")
        _ = len(reader.pages)
    except IngestError:
        raise
    except pypdf.errors.DependencyError as exc:  # AES without the cryptography package
        raise IngestError(f"encrypted: {exc}") from None
    except Exception as exc:  # pypdf reports a damaged file by many exception types
        raise IngestError(f"not a readable PDF: {_describe(exc)}") from None
    return reader


def _describe(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _page_text(page: Any) -> str:
    text = "\n".join(line.rstrip() for line in str(page.extract_text() or "").splitlines())
    return _BLANK_RUNS.sub("\n\n", text).strip()


def _outline(reader: PdfReader) -> Iterator[_Entry]:
    """The outline's entries in document order (nested entries flattened), each with its 0-based page."""
    stack: list[Any] = [list(reader.outline)]
    while stack:
        items = stack.pop()
        if not items:
            continue
        head, rest = items[0], items[1:]
        stack.append(rest)
        if isinstance(head, list):
            stack.append(head)
            continue
        page = reader.get_destination_page_number(head)
        title = " ".join(str(getattr(head, "title", "") or "").split())
        if page is not None and page >= 0 and title:
            yield _Entry(page, title)


def _sections(texts: Sequence[str], entries: Sequence[_Entry]) -> tuple[str, tuple[Section, ...]]:
    """The pages' text joined, and a section per page with text, split where an outline entry starts."""
    by_page: dict[int, list[_Entry]] = {}
    for entry in sorted(entries, key=lambda e: e.page):  # stable: document order within a page
        by_page.setdefault(entry.page, []).append(entry)
    parts: list[str] = []
    sections: list[Section] = []
    offset = 0
    heading = ""
    for index, page_text in enumerate(texts):
        starts = _entry_starts(page_text, by_page.get(index, []))
        if page_text.strip():
            anchor = f"page={index + 1}"
            if not starts or starts[0][0] > 0:
                sections.append(Section(offset, anchor, heading))
            for at, title in starts:
                sections.append(Section(offset + at, anchor, title))
            parts.append(page_text)
            offset += len(page_text) + 2
        if starts:
            heading = starts[-1][1]
    return "\n\n".join(parts), tuple(sections)


def _entry_starts(text: str, entries: Sequence[_Entry]) -> list[tuple[int, str]]:
    """Where each entry starts on its page: the first line at or after the previous entry's start that begins
    with its title (whitespace and case aside), else the top of the page."""
    starts: list[tuple[int, str]] = []
    position = 0
    lines = [(m.start(), " ".join(m.group().split()).lower()) for m in re.finditer(r"[^\n]+", text)]
    for entry in entries:
        wanted = entry.title.lower()
        at = next((start for start, line in lines if start >= position and line.startswith(wanted)), None)
        if at is None:
            at = position
        starts.append((at, entry.title))
        position = at
    deduped: dict[int, str] = {}
    for at, title in starts:  # two entries at one place: the later (deeper) title names what follows
        deduped[at] = title
    return sorted(deduped.items())
