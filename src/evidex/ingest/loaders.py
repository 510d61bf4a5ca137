"""Loaders: directories of markdown / text / HTML, and JSONL corpora (BEIR `_id` accepted).

A loader never raises for one bad document: it yields a `LoadFailure` naming the file (and line) and
the reason, and goes on. The ingest run turns failures into dead letters.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from evidex.errors import IngestError
from evidex.ingest.markdown import find_headings, split_front_matter
from evidex.ingest.provenance import misspelled_keys, provenance_fields
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
    doc_id: str | None = None  # the document it would have been, when known (a file's id is its path)


def iter_documents(path: Path, root: Path | None = None,
                   select: Callable[[str], bool] | None = None) -> Iterator[Document | LoadFailure]:
    """Documents under `path`: a directory (walked in sorted order) or a single file. A directory's documents
    are named by their path under `root` (default: `path`). Paths are made absolute, so a dead letter can be
    retried from any working directory. `select`: which of a directory's files (by path under `root`) to read
    (`SourceSelection.admits`: include / exclude globs); a file given by name is always read."""
    path = path.absolute()
    if path.is_dir():
        root = (root or path).absolute()
        files, unlisted = _walk(path)
        for folder, reason in unlisted:  # its documents are not gone, only unseen: a sync must retire nothing
            # Named by its path under the root ("sub/"); the root itself by its full path (two roots given
            # must not share one letter).
            name = folder.as_posix() if folder == root else folder.relative_to(root).as_posix()
            yield LoadFailure(f"{name}/", f"cannot list the directory: {reason}", str(folder), str(folder))
        for file in files:
            if select is not None and not select(file.relative_to(root).as_posix()):
                continue
            suffix = file.suffix.lower()
            if suffix in MARKDOWN_SUFFIXES | TEXT_SUFFIXES | HTML_SUFFIXES:
                yield load_file(file, file.relative_to(root).as_posix())
            elif suffix in JSONL_SUFFIXES:
                yield from iter_jsonl(file, file.relative_to(root).as_posix())
    elif path.is_file():
        if path.suffix.lower() in JSONL_SUFFIXES:  # its letters by full path: two files given may share a name
            yield from iter_jsonl(path, str(path))
        else:
            yield load_file(path, path.name)
    else:
        yield LoadFailure(str(path), "no such file or directory", str(path), str(path))


def _walk(root: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The files under `root` in sorted order (symlinked directories are not followed), and the directories
    that could not be listed with the reason (Path.rglob skips those silently)."""
    files: list[Path] = []
    unlisted: list[tuple[Path, str]] = []

    def failed(exc: OSError) -> None:
        unlisted.append((Path(exc.filename), exc.strerror or str(exc)))

    for folder, _, names in os.walk(root, onerror=failed):
        files.extend(Path(folder) / n for n in names if (Path(folder) / n).is_file())
    return sorted(files), sorted(unlisted)


def load_file(file: Path, source: str) -> Document | LoadFailure:
    try:
        raw = file.read_bytes()
        try:
            text = raw.decode("utf-8-sig")  # a byte-order mark would hide the front matter behind it
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
        return LoadFailure(source, exc.reason, exc.location or str(file), str(file), doc_id=source)
    except OSError as exc:
        return LoadFailure(source, f"cannot read: {exc.strerror}", str(file), str(file), doc_id=source)


def _markdown_document(text: str, source: str, location: str) -> Document:
    fields, body_start = split_front_matter(text, location)
    provenance = Provenance(**provenance_fields(fields, f"{location}:1"))
    title = fields.get("title")
    if not isinstance(title, str) or not title.strip():
        h1 = [h for h in find_headings(text[body_start:]) if h.level == 1]
        title = h1[0].title if h1 else _stem_title(source)
    return Document(doc_id=source, source=source, title=title.strip(), text=text, provenance=provenance,
                    fmt="markdown", body_start=body_start, origin=location, warnings=tuple(misspelled_keys(fields)))


def _stem_title(source: str) -> str:
    stem = Path(source).stem
    return stem.replace("-", " ").replace("_", " ").strip().capitalize() if stem else source


def iter_jsonl(file: Path, name: str | None = None) -> Iterator[Document | LoadFailure]:
    """One document per line: {"doc_id" | "_id", "title"?, "text", "source"?, provenance fields...}. A bad
    line (invalid JSON or UTF-8, not an object, no id) fails alone. `name`: the file as its dead letters
    call it (its path under the ingested directory; two directories' docs.jsonl must not share letters)."""
    name = name or file.name
    try:
        handle = file.open("rb")
    except OSError as exc:  # named like its lines' letters, so a retry names those the same way
        yield LoadFailure(name, f"cannot read: {exc.strerror}", str(file), str(file))
        return
    with handle:
        for n, raw in enumerate(handle, start=1):
            location = f"{file}:{n}"
            try:
                line = _decode_line(raw, n, location)
                if not line.strip():
                    continue
                yield _jsonl_document(line, location)
            except IngestError as exc:
                yield LoadFailure(f"{name}:{n}", exc.reason, location, location)


def _decode_line(raw: bytes, n: int, location: str) -> str:
    try:
        return raw.decode("utf-8-sig" if n == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(f"not UTF-8 text (byte {exc.start})", location=location) from None


def read_jsonl_line(file: Path, line_number: int, name: str | None = None) -> Document | LoadFailure | None:
    """Load one line of a JSONL corpus again (a dead-letter retry). None: the line is blank or gone from its
    file, so nothing is left to load (like a deleted file)."""
    location = f"{file}:{line_number}"
    source = f"{name or file.name}:{line_number}"
    try:
        with file.open("rb") as handle:
            for n, raw in enumerate(handle, start=1):
                if n == line_number:
                    line = _decode_line(raw, n, location)
                    return _jsonl_document(line, location) if line.strip() else None
    except IngestError as exc:
        return LoadFailure(source, exc.reason, location, location)
    except OSError as exc:
        return LoadFailure(source, f"cannot read: {exc.strerror}", location, location)
    return None


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
                    provenance=provenance, fmt="text", origin=location, warnings=tuple(misspelled_keys(item)))


class _HtmlToMarkdown(HTMLParser):
    _SKIP = frozenset({"script", "style", "nav", "footer", "head"})
    _BLOCK = frozenset({"p", "div", "li", "tr", "br", "pre", "section", "article", "table", "ul", "ol", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title = ""
        self._skipping: list[str] = []  # the skipped elements open now, innermost last
        self._in_title = False
        self._heading_id: str | None = None  # inside a heading: the id the page gives it (None: no heading open)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":  # nothing skipped (an unclosed <head> or <nav>) can hold the body
            self._skipping.clear()
        if tag in self._SKIP:
            self._skipping.append(tag)
        if tag == "title":
            self._in_title = True
        elif self._skipping:
            return
        elif len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
            self._heading_id = _html_id(attrs) or ""
        elif self._heading_id == "":  # <h2><a id="restore"></a>Restore</h2>: the inner anchor names it
            self._heading_id = _html_id(attrs) or ""
        elif tag in self._BLOCK:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._skipping:
            del self._skipping[len(self._skipping) - 1 - self._skipping[::-1].index(tag):]
        if tag == "title":
            self._in_title = False
        elif not self._skipping and ((len(tag) == 2 and tag[0] == "h") or tag in self._BLOCK):
            if len(tag) == 2 and tag[0] == "h" and self._heading_id:  # cite the page's own anchor, not a slug
                self.out.append(f" {{#{self._heading_id}}}")
            if len(tag) == 2 and tag[0] == "h":
                self._heading_id = None
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skipping:
            self.out.append(data)


_HTML_ID = re.compile(r"[\w:.-]+")  # what a markdown heading's {#id} can carry (letters of any script)


def _html_id(attrs: list[tuple[str, str | None]]) -> str | None:
    value = next((v for k, v in attrs if k in ("id", "name") and v), None)
    return value if value is not None and _HTML_ID.fullmatch(value) else None


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
