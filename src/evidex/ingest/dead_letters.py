"""Dead letters read back: what a retry loads again for each letter, and which letters an ingest settles.

A dead letter names a file, a JSONL line (`FILE:LINE`) or a directory that could not be loaded; `Engine`'s
retry loads it again from there, and an ingest of the folder it lies under settles it (see `settled_letters`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evidex.ingest.loaders import LoadFailure, SkippedPath, iter_documents, iter_jsonl, load_file, read_jsonl_line
from evidex.ingest.run import DUPLICATE
from evidex.types import DeadLetter, Document


def reload_letter(letter: DeadLetter) -> list[Document | LoadFailure]:
    """What a dead letter names, loaded again: one JSONL line, a whole JSONL file that could not be read, a
    directory that could not be listed, or one file (a duplicate under the source it had, not the letter's
    "source@path" name)."""
    path = letter.path or letter.location
    file, line = letter_file(letter)
    if line is not None and file.endswith(".jsonl"):
        item = read_jsonl_line(Path(file), line, letter.source.rpartition(":")[0])
        return [] if item is None else [item]  # a blank or deleted line: nothing is left to retry
    if path.endswith(".jsonl"):  # the file could not be read at all: every line of it, now
        return list(iter_jsonl(Path(path), letter.source))
    if letter.source.endswith("/"):  # a directory that could not be listed ("sub/", or the full path of a root)
        under = letter.source.rstrip("/")
        return [item for item in iter_documents(Path(path), root=Path(path if Path(under).is_absolute()
                                                                       else path.removesuffix(under)))
                if not isinstance(item, SkippedPath)]  # reported by the ingest that walked it
    source = letter.source
    if letter.reason.startswith(DUPLICATE):
        source = source.removesuffix(f"@{letter.location}")
    return [load_file(Path(path), source)]


def letter_file(letter: DeadLetter) -> tuple[str, int | None]:
    """(the file or directory a dead letter names, the JSONL line number when it names one line)."""
    path = letter.path or letter.location
    file, _, line = path.rpartition(":")
    return (file, int(line)) if file and line.isdigit() else (path, None)


def letter_target(letter: DeadLetter) -> Path:
    """The file (or directory) a dead letter names: a JSONL line's file without its line number."""
    return Path(letter_file(letter)[0])


def settled_letters(letters: Sequence[DeadLetter], roots: Sequence[str | Path], *, sync: bool) -> list[str]:
    """The dead letters an ingest of `roots` settles unless it fails them again (or fails the file or directory
    they name): a directory under them that could not be listed (listed now, its documents load or fail on
    their own), a line of a JSONL file under them (the file is read in full: the line loads, fails again, or is
    blank or gone), and for a sync, a file deleted from under them (nothing is left to retry)."""
    under = [Path(r).absolute() for r in roots]
    out = []
    for letter in letters:
        file, line = letter_file(letter)
        target = Path(file)
        if not target.is_absolute() or not any(r == target or r in target.parents for r in under):
            continue
        is_jsonl_line = line is not None and file.endswith(".jsonl") and target.is_file()
        if letter.source.endswith("/") or is_jsonl_line or (sync and not target.exists()):
            out.append(letter.source)
    return out


def still_duplicate(item: Document | LoadFailure, letter: DeadLetter, live: set[str]) -> Document | LoadFailure:
    """A document set aside as a duplicate stays aside while a document with its id is live: loading it would
    replace the one that was kept."""
    if isinstance(item, Document) and letter.reason.startswith(DUPLICATE) and item.doc_id in live:
        return LoadFailure(letter.source, f"{DUPLICATE} {item.doc_id!r}: a live document already has this id "
                           "(give one of them another doc_id)", letter.location, letter.path or letter.location)
    return item
