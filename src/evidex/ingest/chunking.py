"""Heading-aware chunking. Every piece records its citation anchor and its span in the source.

Sections are cut at headings; a section longer than `max_chars` is split at paragraph, then line, then
word boundaries with `overlap_chars` of overlap; a piece shorter than `min_chars` joins the next piece
when both fit. A piece inside a section cites that section's anchor (the slug a rendered site gives its
heading); text with no heading above it cites its exact character range (RFC 5147 `char=START,END`).
A heading's custom id (`## Rollout {#rollout}`) becomes its anchor and leaves the text, as a rendered page
shows it: the marker is markup, not evidence.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from evidex.ingest.markdown import CleanText, Heading, find_headings


@dataclass(frozen=True)
class Piece:
    text: str
    start: int  # span in the source file
    end: int
    anchor: str
    heading: str


@dataclass(frozen=True)
class _Section:
    start: int
    end: int
    anchor: str | None
    heading: str


def chunk_text(clean: CleanText, *, max_chars: int, overlap_chars: int, min_chars: int,
               headings: bool = True) -> list[Piece]:
    text = clean.text
    found = find_headings(text) if headings else []
    sections = _sections(text, found) if headings else [_Section(0, len(text), None, "")]
    markers = [h.id_marker for h in found if h.id_marker is not None]
    spans: list[tuple[int, int, _Section]] = []
    for section in sections:
        for a, b in _windows(text, section.start, section.end, max_chars, overlap_chars):
            spans.append((a, b, section))
    merged = _merge_small(spans, text, max_chars, min_chars)
    pieces = []
    for a, b, section in merged:
        src_a, src_b = clean.source_offset(a), clean.source_offset(b - 1) + 1
        anchor = section.anchor or f"char={src_a},{src_b}"
        pieces.append(Piece(_cut(text, a, b, markers), src_a, src_b, anchor, section.heading))
    return pieces


def _cut(text: str, a: int, b: int, spans: list[tuple[int, int]]) -> str:
    """text[a:b] without the given spans (sorted, disjoint: their ends are in order too)."""
    out, pos = [], a
    for i in range(bisect.bisect_right(spans, a, key=lambda span: span[1]), len(spans)):
        s, e = spans[i]
        if s >= b:
            break
        out.append(text[pos:max(s, pos)])
        pos = min(e, b)
    out.append(text[pos:b])
    return "".join(out)


def _sections(text: str, found: list[Heading]) -> list[_Section]:
    bounds = [h.start for h in found] + [len(text)]
    sections = []
    if not found or text[: found[0].start].strip():
        sections.append(_Section(0, bounds[0], None, ""))
    for i, h in enumerate(found):
        sections.append(_Section(h.start, bounds[i + 1], h.anchor, h.title))
    return sections


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _windows(text: str, start: int, end: int, max_chars: int, overlap: int) -> list[tuple[int, int]]:
    a, end = _trim(text, start, end)
    if a >= end:
        return []
    out = []
    while True:
        if end - a <= max_chars:
            out.append((a, end))
            return out
        b = _break(text, a, a + max_chars)
        out.append(_trim(text, a, b))
        nxt = max(a + 1, b - overlap)
        space = text.find(" ", nxt, b)  # start the overlap on a word boundary
        a, _ = _trim(text, space if space != -1 else nxt, end)
        if a >= end:
            return out


def _break(text: str, a: int, limit: int) -> int:
    """The best cut in text[a:limit]: a paragraph, a line, a sentence, then a word boundary."""
    floor = a + (limit - a) // 2
    for sep in ("\n\n", "\n", ". ", " "):
        cut = text.rfind(sep, floor, limit)
        if cut != -1:
            return cut + len(sep)
    return limit


def _merge_small(spans: list[tuple[int, int, _Section]], text: str, max_chars: int,
                 min_chars: int) -> list[tuple[int, int, _Section]]:
    out: list[tuple[int, int, _Section]] = []
    for a, b, section in spans:
        if out:
            pa, pb, psection = out[-1]
            adjacent = not text[pb:a].strip()
            if adjacent and (pb - pa < min_chars) and b - pa <= max_chars:
                out[-1] = (pa, b, psection)
                continue
        out.append((a, b, section))
    return out
