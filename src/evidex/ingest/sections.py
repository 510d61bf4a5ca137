"""Chunking for documents whose loader already read their structure (HTML pages, PDFs), and the check that
every anchor they cite exists in the source.

An HTML page's sections and a PDF's pages come from the source itself (`Document.sections`), so their text is
not parsed again as markdown: a line that starts with `#` in a code block or a PDF stays text. Each section is
cut like a markdown section (`chunking.chunk_text`: paragraph, line, sentence, word boundaries, with overlap),
and a piece shorter than `min_chars` joins the next one when both fit, citing the first one's anchor, as
markdown sections do.

A section whose anchor is not among the anchors its source has (`Document.anchors`: the page's ids, its
pages) cites none: the admission gate rejects its chunks as `missing-exact-citation-anchor`, and
`missing_anchors` names it for the ingest report. Markdown anchors need no such list: they are the ids a
renderer gives the headings (GitHub and Hugo slugs, `{#id}`), computed by the same rules, or a character
range of the file itself.

    >>> doc = Document("p.html", "p.html", "P", "## Setup\\n\\nRun it.", fmt="html",
    ...                sections=(Section(0, "setup", "Setup"),), anchors=frozenset({"setup"}))
    >>> [(p.anchor, p.text) for p in chunk_sections(doc, max_chars=800, overlap_chars=0, min_chars=0)]
    [('setup', '## Setup\\n\\nRun it.')]
"""

from __future__ import annotations

import dataclasses

from evidex.ingest.chunking import Piece, chunk_text
from evidex.ingest.markdown import CleanText
from evidex.types import Document, Section


def missing_anchors(doc: Document) -> list[str]:
    """The anchors `doc`'s sections would cite that its source does not have, each once, in order."""
    return list(dict.fromkeys(s.anchor for s in doc.sections if s.anchor not in doc.anchors))


def chunk_sections(doc: Document, *, max_chars: int, overlap_chars: int, min_chars: int) -> list[Piece]:
    """`doc.text` cut into pieces section by section; a piece's span is its place in `doc.text`, and its anchor
    the section's ("" where the source lacks it: it cites nothing)."""
    bounds = [s.start for s in doc.sections[1:]] + [len(doc.text)]
    pieces: list[tuple[Piece, Section]] = []
    for section, end in zip(doc.sections, bounds, strict=True):
        text = doc.text[section.start:end]
        anchor = section.anchor if section.anchor in doc.anchors else ""
        for piece in chunk_text(CleanText(text, (0,), (0,)), max_chars=max_chars, overlap_chars=overlap_chars,
                                min_chars=min_chars, headings=False):
            pieces.append((dataclasses.replace(piece, start=section.start + piece.start,
                                               end=section.start + piece.end, anchor=anchor,
                                               heading=section.heading), section))
    return _merge_small(pieces, doc.text, max_chars, min_chars)


def _merge_small(pieces: list[tuple[Piece, Section]], text: str, max_chars: int, min_chars: int) -> list[Piece]:
    """A piece shorter than `min_chars` takes in the next section's first piece when both fit in `max_chars`
    (a heading with one line under it is no chunk on its own)."""
    out: list[tuple[Piece, Section]] = []
    for piece, section in pieces:
        if out:
            last, last_section = out[-1]
            adjacent = section is not last_section and not text[last.end:piece.start].strip()
            if adjacent and last.end - last.start < min_chars and piece.end - last.start <= max_chars:
                merged = dataclasses.replace(last, text=text[last.start:piece.end], end=piece.end)
                out[-1] = (merged, section)
                continue
        out.append((piece, section))
    return [piece for piece, _ in out]
