"""Loaders: directories of markdown / text / HTML, and JSONL corpora (BEIR `_id` accepted).

A loader never raises for one bad document: it yields a `LoadFailure` naming the file (and line) and
the reason, and goes on. The ingest run turns failures into dead letters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from evidex.errors import IngestError
from evidex.ingest.markdown import find_headings, split_front_matter
from evidex.ingest.provenance import provenance_fields
from evidex.types import Document, Provenance

MARKDOWN_SUFFIXES = {".md", ".markdown"}
TEXT_SUFFIXES = {".txt", ".text", ".rst"}
HTML_SUFFIXES = {".html", ".htm"}
JSONL_SUFFIXES = {".jsonl"}


@dataclass(frozen=True)
class LoadFailure:
    source: str
    reason: str
    location: str
    path: str  # what to load again on retry


def iter_documents(path: Path) -> Iterator[Document | LoadFailure]:
    """Documents under `path`: a directory (walked in sorted order) or a single file."""
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            suffix = file.suffix.lower()
            if suffix in MARKDOWN_SUFFIXES | TEXT_SUFFIXES | HTML_SUFFIXES:
                yield load_file(file, file.relative_to(path).as_posix())
            elif suffix in JSONL_SUFFIXES:
                yield from iter_jsonl(file)
    elif path.is_file():
        if path.suffix.lower() in JSONL_SUFFIXES:
            yield from iter_jsonl(path)
        else:
            yield load_file(path, path.name)
    else:
        yield LoadFailure(str(path), "no such file or directory", str(path), str(path))


def load_file(file: Path, source: str) -> Document | LoadFailure:
    try:
        raw = file.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IngestError(f"not UTF-8 text (byte {exc.start})", location=str(file)) from None
        if "\x00" in text:
            raise IngestError("binary content (NUL bytes)", location=str(file))
        suffix = file.suffix.lower()
        if suffix in MARKDOWN_SUFFIXES:
            return _markdown_document(text, source, str(file))
        if suffix in HTML_SUFFIXES:
            title, body = html_to_markdown(text)
            return Document(doc_id=source, source=source, title=title or _stem_title(source), text=body,
                            fmt="markdown", origin=str(file))
        return Document(doc_id=source, source=source, title=_stem_title(source), text=text, fmt="text",
                        origin=str(file))
    except IngestError as exc:
        return LoadFailure(source, exc.reason, exc.location or str(file), str(file))
    except OSError as exc:
        return LoadFailure(source, f"cannot read: {exc.strerror}", str(file), str(file))


def _markdown_document(text: str, source: str, location: str) -> Document:
    fields, body_start = split_front_matter(text, location)
    provenance = Provenance(**provenance_fields(fields, f"{location}:1"))
    title = fields.get("title")
    if not isinstance(title, str) or not title.strip():
        h1 = [h for h in find_headings(text[body_start:]) if h.level == 1]
        title = h1[0].title if h1 else _stem_title(source)
    return Document(doc_id=source, source=source, title=title.strip(), text=text, provenance=provenance,
                    fmt="markdown", body_start=body_start, origin=location)


def _stem_title(source: str) -> str:
    stem = Path(source).stem
    return stem.replace("-", " ").replace("_", " ").strip().capitalize() if stem else source


def iter_jsonl(file: Path) -> Iterator[Document | LoadFailure]:
    """One document per line: {"doc_id" | "_id", "title"?, "text", "source"?, provenance fields...}."""
    try:
        handle = file.open(encoding="utf-8")
    except OSError as exc:
        yield LoadFailure(str(file), f"cannot read: {exc.strerror}", str(file), str(file))
        return
    with handle:
        for n, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            location = f"{file}:{n}"
            try:
                yield _jsonl_document(line, location)
            except IngestError as exc:
                yield LoadFailure(f"{file.name}:{n}", exc.reason, location, location)


def read_jsonl_line(file: Path, line_number: int) -> Document | LoadFailure:
    """Load one line of a JSONL corpus again (a dead-letter retry)."""
    location = f"{file}:{line_number}"
    try:
        with file.open(encoding="utf-8") as handle:
            for n, line in enumerate(handle, start=1):
                if n == line_number:
                    return _jsonl_document(line, location)
    except IngestError as exc:
        return LoadFailure(f"{file.name}:{line_number}", exc.reason, location, location)
    except OSError as exc:
        return LoadFailure(f"{file.name}:{line_number}", f"cannot read: {exc.strerror}", location, location)
    return LoadFailure(f"{file.name}:{line_number}", "the line is gone from its file", location, location)


def _jsonl_document(line: str, location: str) -> Document:
    try:
        item: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise IngestError(f"invalid JSON: {exc.msg} (column {exc.colno})", location=location) from None
    if not isinstance(item, dict):
        raise IngestError("a JSONL document must be an object", location=location)
    doc_id = item.get("doc_id", item.get("_id"))
    if not isinstance(doc_id, (str, int)) or str(doc_id) == "":
        raise IngestError("missing 'doc_id' (or BEIR '_id')", location=location)
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        raise IngestError("missing or empty 'text'", location=location)
    title = item.get("title") or ""
    if not isinstance(title, str):
        raise IngestError("'title' must be a string", location=location)
    source = item.get("source") or str(doc_id)
    if not isinstance(source, str):
        raise IngestError("'source' must be a string", location=location)
    provenance = Provenance(**provenance_fields(item, location))
    return Document(doc_id=str(doc_id), source=source, title=title.strip(), text=text,
                    provenance=provenance, fmt="text", origin=location)


class _HtmlToMarkdown(HTMLParser):
    _SKIP = frozenset({"script", "style", "nav", "footer", "head"})
    _BLOCK = frozenset({"p", "div", "li", "tr", "br", "pre", "section", "article", "table", "ul", "ol", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skip += 1
        if tag == "title":
            self._in_title = True
        elif len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in self._BLOCK:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        if tag == "title":
            self._in_title = False
        elif (len(tag) == 2 and tag[0] == "h") or tag in self._BLOCK:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.out.append(data)


def html_to_markdown(html: str) -> tuple[str, str]:
    """(title, markdown-ish body) from HTML: headings kept as `#` lines, scripts and styles dropped."""
    parser = _HtmlToMarkdown()
    parser.feed(html)
    parser.close()
    lines = [line.strip() for line in "".join(parser.out).splitlines()]
    body = "\n".join(lines)
    while "\n\n\n" in body:
        body = body.replace("\n\n\n", "\n\n")
    return parser.title.strip(), body.strip()
