"""Loaders: directories of markdown / text / HTML / PDF, and JSONL corpora (BEIR `_id` accepted).

A loader never raises for one bad document: it yields a `LoadFailure` naming the file (and line) and
the reason, and goes on. The ingest run turns failures into dead letters.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidex.errors import BackendUnavailable, IngestError
from evidex.ingest.html import html_document
from evidex.ingest.limits import MAX_NESTING, DocumentLimits, DocumentTimeout
from evidex.ingest.markdown import find_headings, split_front_matter
from evidex.ingest.pdf import pdf_document
from evidex.ingest.provenance import misspelled_keys, provenance_fields
from evidex.types import Document, Provenance

DEFAULT_LIMITS = DocumentLimits()
MARKDOWN_SUFFIXES = {".md", ".markdown"}
TEXT_SUFFIXES = {".txt", ".text", ".rst"}
HTML_SUFFIXES = {".html", ".htm"}
PDF_SUFFIXES = {".pdf"}
JSONL_SUFFIXES = {".jsonl"}


@dataclass(frozen=True)
class SkippedPath:
    """A path under a folder that was not read, and why: a suffix no loader reads, something that is no regular
    file (a FIFO, a socket), or a symbolic link that dangles, loops, leads to a folder or leads outside the folder
    ingested. Counted with its reason in the ingest report; never a dead letter (nothing failed)."""

    source: str  # its path under the folder
    reason: str


@dataclass(frozen=True)
class LoadFailure:
    source: str
    reason: str
    location: str
    path: str  # what to load again on retry
    doc_id: str | None = None  # the document it would have been, when known (a file's id is its path)


def iter_documents(path: Path, root: Path | None = None, select: Callable[[str], bool] | None = None,
                   limits: DocumentLimits = DEFAULT_LIMITS) -> Iterator[Document | LoadFailure | SkippedPath]:
    """Documents under `path`: a directory (walked in sorted order) or a single file. A directory's documents
    are named by their path under `root` (default: `path`). Paths are made absolute, so a dead letter can be
    retried from any working directory. `select`: which of a directory's files (by path under `root`) to read
    (`SourceSelection.admits`: include / exclude globs); a file given by name is always read. `limits`: each
    document's size and time bound (one over them is a `LoadFailure` saying which). The paths of a folder not
    read come last, as `SkippedPath`s."""
    path = path.absolute()
    if path.is_dir():
        root = (root or path).absolute()
        files, unlisted, skipped = _walk(path, outside_links=limits.follow_symlinks_outside)
        for folder, reason in unlisted:  # its documents are not gone, only unseen: a sync must retire nothing
            # Named by its path under the root ("sub/"); the root itself by its full path (two roots given
            # must not share one letter).
            name = folder.as_posix() if folder == root else folder.relative_to(root).as_posix()
            yield LoadFailure(f"{name}/", f"cannot list the directory: {reason}", str(folder), str(folder))
        # JSONL files after the pages: a record whose doc_id is a page's path meets that page already read, and is
        # the one refused (`run.py`), whatever the names sort as.
        for file in sorted(files, key=lambda f: f.suffix.lower() in JSONL_SUFFIXES):
            if select is not None and not select(file.relative_to(root).as_posix()):
                continue
            suffix = file.suffix.lower()
            if suffix in MARKDOWN_SUFFIXES | TEXT_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES:
                yield load_file(file, file.relative_to(root).as_posix(), limits)
            elif suffix in JSONL_SUFFIXES:
                yield from iter_jsonl(file, file.relative_to(root).as_posix(), limits)
            else:
                skipped.append((file, f"no loader reads {suffix or 'files without a suffix'}"))
        for file, reason in sorted(skipped):
            yield SkippedPath(file.relative_to(root).as_posix(), reason)
    elif path.is_file():
        if path.suffix.lower() in JSONL_SUFFIXES:  # its letters by full path: two files given may share a name
            yield from iter_jsonl(path, str(path), limits)
        else:
            yield load_file(path, path.name, limits)
    else:
        yield LoadFailure(str(path), "no such file or directory", str(path), str(path))


def _walk(root: Path, *, outside_links: bool = False) -> tuple[list[Path], list[tuple[Path, str]],
                                                                 list[tuple[Path, str]]]:
    """The files under `root` in sorted order, the directories that could not be listed with the reason
    (Path.rglob skips those silently), and the paths not read with the reason (`SkippedPath`). Symbolic links
    to folders are not followed, nor links to files outside `root` unless `outside_links`."""
    files: list[Path] = []
    unlisted: list[tuple[Path, str]] = []
    skipped: list[tuple[Path, str]] = []

    def failed(exc: OSError) -> None:
        unlisted.append((Path(exc.filename), exc.strerror or str(exc)))

    real_root = root.resolve()
    for folder, dirs, names in os.walk(root, onerror=failed):
        skipped += [(Path(folder) / d, "a symbolic link to a folder (not followed)") for d in dirs
                    if (Path(folder) / d).is_symlink()]
        for name in names:
            reason = _unreadable(Path(folder) / name, real_root, outside_links)
            if reason:
                skipped.append((Path(folder) / name, reason))
            else:
                files.append(Path(folder) / name)
    return sorted(files), sorted(unlisted), skipped


def _unreadable(path: Path, real_root: Path, outside_links: bool) -> str | None:
    """Why `path` (under a folder being ingested) is not read as a file, or None."""
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except FileNotFoundError:
            return "a symbolic link to nothing (dangling)"
        except (RuntimeError, OSError):
            return "a symbolic link loop"
        if not outside_links and not target.is_relative_to(real_root):
            return "a symbolic link leading outside the folder (not followed: [ingest] follow_symlinks_outside)"
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"cannot stat: {exc.strerror}"
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device or special file"
        return f"{kind}, not a regular file"
    return None


def load_file(file: Path, source: str, limits: DocumentLimits = DEFAULT_LIMITS) -> Document | LoadFailure:
    """One file as a document, or the reason it is none: over the size bound (not read at all), slower to read
    than the time bound, nested too deeply, unreadable or malformed."""
    try:
        problem = limits.size_problem(file.stat().st_size)
    except OSError as exc:
        return LoadFailure(source, f"cannot read: {exc.strerror}", str(file), str(file), doc_id=source)
    if problem is not None:
        return LoadFailure(source, problem, str(file), str(file), doc_id=source)
    try:
        with limits.deadline("reading the document"):
            return _read_file(file, source)
    except DocumentTimeout as exc:
        return LoadFailure(source, exc.reason, str(file), str(file), doc_id=source)
    except RecursionError:
        return LoadFailure(source, "nested too deeply to read", str(file), str(file), doc_id=source)
    except Exception as exc:  # a reader's own bug (a parser that asserts on odd markup) fails this file alone
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        return LoadFailure(source, f"the {file.suffix or 'file'} reader failed: {type(exc).__name__}"
                           + (f": {detail}" if detail else ""), str(file), str(file), doc_id=source)


def _read_file(file: Path, source: str) -> Document | LoadFailure:
    try:
        raw = file.read_bytes()
        if file.suffix.lower() in PDF_SUFFIXES:
            return pdf_document(raw, source, str(file), _stem_title(source))
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
            return html_document(text, source, str(file), _stem_title(source))
        return Document(doc_id=source, source=source, title=_stem_title(source), text=text, fmt="text",
                        origin=str(file))
    except IngestError as exc:
        return LoadFailure(source, exc.reason, exc.location or str(file), str(file), doc_id=source)
    except BackendUnavailable as exc:  # a PDF without the pdf extra: a letter to retry once it is installed
        return LoadFailure(source, str(exc), str(file), str(file), doc_id=source)
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


def iter_jsonl(file: Path, name: str | None = None,
               limits: DocumentLimits = DEFAULT_LIMITS) -> Iterator[Document | LoadFailure]:
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
            loaded = _load_line(raw, n, location, limits)  # bounded here, yielded outside the bound
            if isinstance(loaded, str):
                yield LoadFailure(f"{name}:{n}", loaded, location, location)
            elif loaded is not None:
                yield loaded


def is_jsonl_record(doc: Document) -> bool:
    """Whether `doc` came from a line of a JSONL corpus (its origin is `FILE.jsonl:LINE`), not from a page file."""
    file, _, line = doc.origin.rpartition(":")
    return line.isdigit() and file.lower().endswith(tuple(JSONL_SUFFIXES))


def _load_line(raw: bytes, n: int, location: str, limits: DocumentLimits) -> Document | str | None:
    """One JSONL line as a document, the reason it is none, or None for a blank line."""
    problem = limits.size_problem(len(raw))
    if problem is not None:
        return problem
    try:
        with limits.deadline("reading the line"):
            line = _decode_line(raw, n, location)
            return _jsonl_document(line, location) if line.strip() else None
    except IngestError as exc:
        return exc.reason
    except DocumentTimeout as exc:
        return exc.reason


def _decode_line(raw: bytes, n: int, location: str) -> str:
    try:
        return raw.decode("utf-8-sig" if n == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(f"not UTF-8 text (byte {exc.start})", location=location) from None


def read_jsonl_line(file: Path, line_number: int, name: str | None = None,
                    limits: DocumentLimits = DEFAULT_LIMITS) -> Document | LoadFailure | None:
    """Load one line of a JSONL corpus again (a dead-letter retry). None: the line is blank or gone from its
    file, so nothing is left to load (like a deleted file)."""
    location = f"{file}:{line_number}"
    source = f"{name or file.name}:{line_number}"
    try:
        with file.open("rb") as handle:
            for n, raw in enumerate(handle, start=1):
                if n == line_number:
                    loaded = _load_line(raw, n, location, limits)
                    return LoadFailure(source, loaded, location, location) if isinstance(loaded, str) else loaded
    except OSError as exc:
        return LoadFailure(source, f"cannot read: {exc.strerror}", location, location)
    return None


def _jsonl_document(line: str, location: str) -> Document:
    try:
        item: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise IngestError(f"invalid JSON: {exc.msg} (column {exc.colno})", location=location) from None
    except RecursionError:
        raise IngestError(f"JSON nested deeper than {MAX_NESTING} levels", location=location) from None
    if _json_depth(item) > MAX_NESTING:  # metadata that deep is no document's: nothing below may recurse on it
        raise IngestError(f"JSON nested deeper than {MAX_NESTING} levels", location=location)
    if not isinstance(item, dict):
        raise IngestError("a JSONL document must be an object", location=location)
    doc_id = item.get("doc_id", item.get("_id"))
    if isinstance(doc_id, bool):  # JSON true is not the id "True"
        raise IngestError(f"'doc_id' must be a string or an integer, not {str(doc_id).lower()}", location=location)
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


def _json_depth(value: Any) -> int:
    """How deeply `value` nests lists and objects (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            if depth <= MAX_NESTING:
                stack.extend((child, depth + 1) for child in children)
    return deepest
