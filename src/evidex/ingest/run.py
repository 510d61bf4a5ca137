"""One ingest run = one batch: load, merge provenance, assign families, chunk, embed (cached), commit.

Nothing reaches the store until the whole batch is ready; the store then applies it in one
transaction. A document that fails to load becomes a dead letter and the rest of the batch still lands.
An unchanged document (same text, provenance, chunking settings and ingest code) is skipped: after an upgrade
that chunks differently, the next ingest re-chunks every document (re-embedding only text it never saw).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from evidex.config import ChunkingConfig, FamilyRule
from evidex.embedding.cache import EmbeddingCache, embed_cached
from evidex.embedding.protocol import Embedder
from evidex.errors import IngestError, StoreError
from evidex.ingest.chunking import chunk_text
from evidex.ingest.limits import NO_LIMITS, DocumentLimits, DocumentTimeout
from evidex.ingest.loaders import LoadFailure, SkippedPath, is_jsonl_record
from evidex.ingest.markdown import clean
from evidex.ingest.overlay import Overlay, ProvenanceDefaults, with_overlay
from evidex.ingest.provenance import doubtful_values, merge
from evidex.ingest.sections import chunk_sections
from evidex.stores.protocol import BatchWrite, DocumentWrite, Store, describe_model_mismatch
from evidex.timestamps import format_time
from evidex.types import Chunk, DeadLetter, Document, IngestReport, IngestWarning

Progress = Callable[[str, int, int], None]  # (phase, done, total)

DUPLICATE = "duplicate doc_id"  # the reason a second document with an id already in the batch is set aside
# A document's hash is marked with the loader that read it, so a later batch knows a page read from a file
# (a JSONL record with its doc_id is refused, not let replace it); an unmarked hash is from before the mark.
FILE_MARK, JSONL_MARK = "file:", "jsonl:"


@dataclass(frozen=True)
class FamilyRules:
    rules: tuple[tuple[re.Pattern[str], str], ...]

    @classmethod
    def from_config(cls, rules: Sequence[FamilyRule]) -> FamilyRules:
        return cls(tuple((re.compile(r.pattern), r.name) for r in rules))

    def family_of(self, source: str) -> str | None:
        for pattern, name in self.rules:
            if pattern.search(source):
                return name
        return None


def new_batch_id(now: datetime) -> str:
    return f"b{now.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"


def record_id(doc_id: str, chunk_index: int, text: str) -> str:
    """Stable: the same document, position and text always give the same id."""
    return hashlib.sha256(f"{doc_id}\x00{chunk_index}\x00{text}".encode()).hexdigest()[:20]


def embedding_text(chunk: Chunk) -> str:
    """What the embedder sees: the title gives a chunk its context (headings are in the text)."""
    return f"{chunk.title}\n{chunk.text}" if chunk.title and not chunk.text.startswith(chunk.title) else chunk.text


@functools.cache
def ingest_code_fingerprint() -> str:
    """A hash of the source of `evidex.ingest`: what turns files into chunks and what the embedder sees."""
    h = hashlib.sha256()
    for p in sorted(Path(__file__).parent.glob("*.py")):
        h.update(p.name.encode() + b"\x00" + p.read_bytes())
    return h.hexdigest()[:16]


def doc_hash(doc: Document, chunking: ChunkingConfig) -> str:
    p = doc.provenance
    meta = json.dumps({"title": doc.title, "source": doc.source, "fmt": doc.fmt, "chunking": vars(chunking),
                       "ingest_code": ingest_code_fingerprint(),
                       "provenance": {k: (format_time(v) if isinstance(v, datetime) else v)
                                      for k, v in vars(p).items()}}, sort_keys=True, default=list)
    structure = "".join(f"\x00{s.start}\x00{s.anchor}\x00{s.heading}" for s in doc.sections)  # HTML ids, PDF pages
    mark = JSONL_MARK if is_jsonl_record(doc) else FILE_MARK
    return mark + hashlib.sha256((meta + "\x00" + doc.text + structure).encode()).hexdigest()


def chunk_document(doc: Document, chunking: ChunkingConfig, indexed_at: datetime) -> tuple[Chunk, ...]:
    if doc.sections:  # HTML and PDF: chunked by the structure their loader read
        pieces = chunk_sections(doc, max_chars=chunking.max_chars, overlap_chars=chunking.overlap_chars,
                                min_chars=chunking.min_chars)
    else:
        text = clean(doc.text, doc.body_start) if doc.fmt == "markdown" else clean(doc.text)
        pieces = chunk_text(text, max_chars=chunking.max_chars, overlap_chars=chunking.overlap_chars,
                            min_chars=chunking.min_chars, headings=doc.fmt == "markdown")
    return tuple(
        Chunk(record_id=record_id(doc.doc_id, i, piece.text), doc_id=doc.doc_id, chunk_index=i,
              source=doc.source, title=doc.title, text=piece.text, citation_anchor=piece.anchor or None,
              span_start=piece.start, span_end=piece.end,
              content_hash=hashlib.sha256(piece.text.encode()).hexdigest(), provenance=doc.provenance,
              heading=piece.heading, indexed_at=indexed_at)
        for i, piece in enumerate(pieces))


@dataclass
class _Gathered:
    """What one pass over a batch's items found: the documents to write, and the failures."""

    batch_id: str
    now: datetime
    existing: Mapping[str, str]  # doc id -> hash of every live document
    seen: set[str] = dataclasses.field(default_factory=set)
    letters: list[DeadLetter] = dataclasses.field(default_factory=list)
    changed: list[tuple[Document, str, tuple[Chunk, ...]]] = dataclasses.field(default_factory=list)
    emptied: list[DocumentWrite] = dataclasses.field(default_factory=list)
    unchanged: int = 0
    unchanged_unadmittable: list[str] = dataclasses.field(default_factory=list)
    empty: int = 0
    loaded_sources: set[str] = dataclasses.field(default_factory=set)
    failed_ids: set[str] = dataclasses.field(default_factory=set)
    unnamed: list[str] = dataclasses.field(default_factory=list)  # failures whose document is unknown
    named: set[str] = dataclasses.field(default_factory=set)  # every item's source, loaded or failed
    skipped: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # paths not read, with the reason
    pages: dict[str, str] = dataclasses.field(default_factory=dict)  # doc id -> file, of pages read from files


@dataclass(frozen=True)
class _Settings:
    """How a batch's documents are read into chunks."""

    chunking: ChunkingConfig
    families: FamilyRules
    overlay: Overlay | None
    defaults: ProvenanceDefaults | None
    limits: DocumentLimits


def ingest(store: Store, embedder: Callable[[], Embedder], items: Iterable[Document | LoadFailure | SkippedPath], *,
           chunking: ChunkingConfig, families: FamilyRules, overlay: Overlay | None,
           cache: EmbeddingCache | None, batch_size: int = 32, label: str = "",
           known_dead_letters: Iterable[DeadLetter] = (), resolved_dead_letters: Sequence[str] = (),
           progress: Progress | None = None, record_repeats: bool = True, sync: bool = False,
           check_overlay: bool = True, defaults: ProvenanceDefaults | None = None,
           limits: DocumentLimits = NO_LIMITS, citation_schemes: str | None = None) -> IngestReport:
    """Ingest `items` as one batch. `embedder` is called only if something needs embedding.
    `sync=True`: `items` are the whole corpus, so a live document not among them (its file deleted) is retired
    in the same batch (a rollback restores it). A document that failed to load is not gone: it stays, and a
    failure that names no document (a bad JSONL line) retires nothing at all.
    `record_repeats=False`: failures already on record with the same reason make no batch by themselves
    (re-running an ingest over a folder with one broken file must not leave a batch that `rollback` would
    undo instead of the last real change); they are still reported, and counted when a batch is made.
    `check_overlay`: report the overlay's sources that no item has (a path typo drops their provenance); off when
    `items` are only a part of what the overlay describes (a dead-letter retry).
    `defaults`: access labels and a citation URI for documents that have none (`evidex.ingest.overlay`).
    `limits`: a document whose chunking takes longer than `limits.timeout_s` becomes a dead letter.
    `citation_schemes`: `[gate] citation_schemes`; a citation of another scheme is warned of (None: not checked)."""
    schemes = None if citation_schemes is None else frozenset(x.strip().lower() for x in citation_schemes.split(","))
    known_dead_letters = list(known_dead_letters)
    started = time.perf_counter()
    now = datetime.now(UTC).replace(microsecond=0)
    got = _Gathered(new_batch_id(now), now, store.ledger.document_hashes())
    settings = _Settings(chunking, families, overlay, defaults, limits)
    for n, item in enumerate(items, start=1):
        if progress is not None and n % 200 == 0:
            progress("load", n, 0)
        _gather(got, item, settings)
    gone, sync_skipped = _retire(got) if sync else ((), "")
    total = sum(len(doc_chunks) for _, _, doc_chunks in got.changed)
    writes, model, computed = _embed(store, embedder, got, cache, batch_size, progress)
    failed = {letter.source for letter in got.letters}
    unread = tuple(letter.path for letter in got.letters if letter.path)  # a file or directory that failed whole
    paths = {d.source: d.path for d in known_dead_letters}
    resolved = tuple(dict.fromkeys([*(d.source for d in known_dead_letters
                                      if d.source in got.loaded_sources or (d.path and d.path in got.loaded_sources)),
                                    *(s for s in resolved_dead_letters
                                      if s not in failed and not _within(paths.get(s, ""), unread))]))
    unlisted = tuple(s for s in got.named if s.endswith("/"))  # directories that could not be listed: files unseen
    unmatched = overlay.unmatched(got.named, unlisted) if overlay is not None and check_overlay else ()
    on_record = {(d.source, d.reason) for d in known_dead_letters}
    news = got.letters if record_repeats else [d for d in got.letters if (d.source, d.reason) not in on_record]
    batch_id = got.batch_id
    if writes or news or resolved:
        store.commit_batch(BatchWrite(batch_id, label, tuple(writes), got.unchanged, tuple(got.letters), resolved,
                                      model))
    else:
        batch_id = ""  # nothing changed: no batch is recorded
    return IngestReport(
        batch_id=batch_id, documents=len(got.seen), added_chunks=total,
        replaced_documents=sum(1 for d, _, _ in got.changed if d.doc_id in got.existing) + len(got.emptied)
        - len(gone), unchanged_documents=got.unchanged, empty_documents=got.empty, dead_letters=tuple(got.letters),
        embedded=computed, cached=total - computed, seconds=time.perf_counter() - started,
        without_labels_or_citation=tuple(sorted({*got.unchanged_unadmittable, *(
            d.source for d, _, _ in got.changed if not d.provenance.access_labels or not d.provenance.citation_uri)})),
        retired_documents=gone, sync_skipped=sync_skipped, resolved_dead_letters=resolved if batch_id else (),
        warnings=tuple(IngestWarning(d.source, reason) for d, _, _ in got.changed
                       for reason in (*d.warnings, *doubtful_values(d.provenance, schemes))),
        unmatched_overlay_sources=unmatched, skipped_paths=tuple(got.skipped))


def _gather(got: _Gathered, item: Document | LoadFailure | SkippedPath, settings: _Settings) -> None:
    """Take one item into the batch: a failure as a dead letter, a repeated id as a duplicate's letter, an
    unchanged document as counted, a changed one chunked (too slow or too deep to chunk: a dead letter), a path
    not read as skipped."""
    if isinstance(item, SkippedPath):
        got.skipped.append((item.source, item.reason))
        return
    got.named.add(item.source)
    if isinstance(item, LoadFailure):
        if item.doc_id is None:
            got.unnamed.append(item.source)
        else:
            got.failed_ids.add(item.doc_id)
        got.letters.append(DeadLetter(item.source, item.reason, got.batch_id, got.now, item.location, path=item.path))
        return
    claimed = _claimed_page(got, item)
    if claimed is not None or item.doc_id in got.seen:
        where = item.origin or item.source
        got.letters.append(DeadLetter(f"{item.source}@{where}", claimed or f"{DUPLICATE} {item.doc_id!r} in this batch",
                                      got.batch_id, got.now, where, path=where))
        return
    got.seen.add(item.doc_id)
    if not is_jsonl_record(item):
        got.pages[item.doc_id] = item.origin or item.source
    doc = _with_metadata(item, settings.overlay, settings.families, settings.defaults)
    got.loaded_sources.update((doc.source, doc.origin))
    digest = doc_hash(doc, settings.chunking)
    if got.existing.get(doc.doc_id) == digest:
        got.unchanged += 1
        if not doc.provenance.access_labels or not doc.provenance.citation_uri:  # said on every ingest
            got.unchanged_unadmittable.append(doc.source)
        return
    try:
        with settings.limits.deadline("chunking the document"):
            doc_chunks = chunk_document(doc, settings.chunking, got.now)
    except (DocumentTimeout, RecursionError) as exc:  # the document stays as it was, like one that failed to load
        got.failed_ids.add(doc.doc_id)
        reason = exc.reason if isinstance(exc, DocumentTimeout) else "nested too deeply to chunk"
        where = doc.origin or doc.source
        got.letters.append(DeadLetter(doc.source, reason, got.batch_id, got.now, where, path=where))
        return
    if not doc_chunks:  # front matter only (a section index page): nothing to search
        got.empty += 1
        if doc.doc_id in got.existing:  # it had text: its old chunks must stop answering (a rollback restores them)
            got.emptied.append(DocumentWrite(doc.doc_id, doc.source, digest, (), np.zeros((0, 0), np.float32)))
        return
    got.changed.append((doc, digest, doc_chunks))


def _claimed_page(got: _Gathered, item: Document) -> str | None:
    """The reason a JSONL record is refused when its doc_id is a page read from a file, in this batch or in the
    index (it would silently replace that page, with its own labels and citation), else None. The reason names
    both, and starts as a duplicate's does, so a retry keeps it aside while the page is live."""
    if not is_jsonl_record(item):
        return None
    page = got.pages.get(item.doc_id)
    if page is None and got.existing.get(item.doc_id, "").startswith(FILE_MARK):
        page = f"{item.doc_id} (indexed)"
    if page is None:
        return None
    return (f"{DUPLICATE} {item.doc_id!r}: the JSONL record at {item.origin} has the id of the page read from "
            f"{page} (another loader); it does not replace that page (give the record another doc_id)")


def _retire(got: _Gathered) -> tuple[tuple[str, ...], str]:
    """A sync's (documents retired, why none was): every live document the batch did not name, unless a failure
    names no document (it may have been any of them)."""
    if got.unnamed:
        more = ", ..." if len(got.unnamed) > 1 else ""
        return (), (f"{len(got.unnamed)} failure(s) name no document ({got.unnamed[0]}{more}): a document that "
                    "failed to load is not gone, so none was retired")
    gone = tuple(sorted(d for d in got.existing if d not in got.seen and d not in got.failed_ids))
    _refuse_a_moved_root(gone, got.seen, got.existing)
    got.emptied += [DocumentWrite(d, "", "", (), np.zeros((0, 0), np.float32)) for d in gone]
    return gone, ""


def _embed(store: Store, embedder: Callable[[], Embedder], got: _Gathered, cache: EmbeddingCache | None,
           batch_size: int, progress: Progress | None) -> tuple[list[DocumentWrite], str, int]:
    """(the batch's writes, the model that embedded them, how many vectors were computed, not cached)."""
    chunks = [c for _, _, doc_chunks in got.changed for c in doc_chunks]
    writes: list[DocumentWrite] = list(got.emptied)
    if not chunks:
        return writes, "", 0
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress("embed", done, len(chunks))

    model_used = embedder()
    indexed_with = store.ledger.embedding_model()
    if indexed_with is not None and indexed_with != model_used.model_id:  # before minutes of embedding
        raise StoreError(describe_model_mismatch(indexed_with, model_used.model_id))
    vectors, computed = embed_cached(model_used, [embedding_text(c) for c in chunks], cache,
                                     batch_size=batch_size, on_progress=step)
    offset = 0
    for doc, digest, doc_chunks in got.changed:
        writes.append(DocumentWrite(doc.doc_id, doc.source, digest, doc_chunks,
                                    vectors[offset:offset + len(doc_chunks)]))
        offset += len(doc_chunks)
    return writes, model_used.model_id, computed


def _within(path: str, unread: Sequence[str]) -> bool:
    """Whether `path` (a file, a directory, or a JSONL file's "file:line") is one of `unread` or lies in one:
    a letter there is not settled by a batch that could not read it."""
    return bool(path) and any(path == u or path.startswith((f"{u}/", f"{u}:")) for u in unread)


def _refuse_a_moved_root(gone: Sequence[str], loaded: set[str], existing: Mapping[str, str]) -> None:
    """A sync given a subfolder or a single file of the corpus names its documents by shorter paths
    ("canary-rollouts.md" for "deploy/canary-rollouts.md") and would retire the rest of the index: refuse it."""
    if not gone:
        return
    longer: dict[str, str] = {}
    for doc_id in existing:
        parts = doc_id.split("/")
        for i in range(1, len(parts)):
            longer.setdefault("/".join(parts[i:]), doc_id)
    moved = [(new, longer[new]) for new in sorted(loaded) if new not in existing and new in longer]
    # A subfolder given alone loads nothing under its indexed names; a corpus that only gained a top-level
    # page ("_index.md" beside "data/_index.md") or moved a file up loads mostly what it held.
    if len(moved) > len(loaded & existing.keys()):
        new, old = moved[0]
        raise IngestError(f"this sync would retire {len(gone)} documents, and {len(moved)} it loads are indexed "
                          f"under longer names ({new} as {old}): give the folder you ingested before (documents "
                          "are named by their path under it), or ingest without --sync")


def _with_metadata(doc: Document, overlay: Overlay | None, families: FamilyRules,
                   defaults: ProvenanceDefaults | None = None) -> Document:
    provenance = with_overlay(doc.provenance, doc.source, overlay, defaults)
    if provenance.evidence_family is None:
        family = families.family_of(doc.source)
        if family is not None:
            provenance = merge(provenance, {"evidence_family": family})
    if provenance is doc.provenance:
        return doc
    return dataclasses.replace(doc, provenance=provenance)
