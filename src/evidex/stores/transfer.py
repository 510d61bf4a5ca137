"""Moving a whole index between backends without re-embedding: `export_index` and `import_index`.

An export is a directory of plain files, readable without evidex:

    manifest.json              {"format": "evidex-index", "version": 1, "dim": 384, "rows": ..., ...}
    chunks.jsonl               one stored chunk a line, live AND retired, in commit order
    vectors.npy                float32 (rows, dim); row i is the vector of line i of chunks.jsonl
    batches.jsonl              every batch (committed and rolled back), in commit order
    dead_letter_events.jsonl   the dead-letter event log (failed / resolved), in order

Retired chunks travel too, so a rollback after the import restores exactly what it would have restored
before. A backend takes part by meeting `Exportable`; `MilvusStore` does. `SqliteStore` is served here by
`SqliteTransfer`, which reads and writes its file with plain SQL (see its docstring).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from evidex.errors import StoreError
from evidex.stores.sqlite import SqliteStore
from evidex.stores.sqlite_schema import row_to_batch, row_to_chunk
from evidex.timestamps import format_time, read_time
from evidex.types import BatchInfo, Chunk, Provenance

FORMAT = "evidex-index"
FORMAT_VERSION = 1
_FILES = ("manifest.json", "chunks.jsonl", "vectors.npy", "batches.jsonl", "dead_letter_events.jsonl")


@dataclass(frozen=True)
class StoredRow:
    """One stored chunk, live or retired, with its vector. `chunk.batch_id` is the batch that added it."""

    chunk: Chunk
    doc_hash: str
    vector: npt.NDArray[np.float32]
    retired_by: str | None  # the batch that replaced it; None while live


@dataclass(frozen=True)
class DeadLetterEvent:
    source: str
    kind: str  # failed | resolved
    batch_id: str
    at: datetime
    reason: str = ""
    location: str = ""
    path: str = ""


@dataclass(frozen=True)
class IndexLog:
    """Everything of an index besides its rows: batches and dead-letter events in order, the generation."""

    batches: tuple[BatchInfo, ...]
    events: tuple[DeadLetterEvent, ...]
    generation: int
    writing: bool = False  # a batch is being written or rolled back (a store whose writes are not one transaction)
    embedding_model: str | None = None  # the model of its vectors (Store.embedding_model)


@runtime_checkable
class Exportable(Protocol):
    def export_rows(self) -> Iterator[StoredRow]:
        """Every stored row, live and retired, in commit order."""
        ...

    def export_log(self) -> IndexLog:
        ...

    def import_rows(self, rows: Iterable[StoredRow], log: IndexLog) -> None:
        """Fill an empty store with `rows` and `log`. Refuses a store that already has batches."""
        ...


def exportable(store: object) -> Exportable:
    """The export/import side of `store`."""
    if isinstance(store, Exportable):
        return store
    if isinstance(store, SqliteStore):
        return SqliteTransfer(store)
    raise StoreError(f"{type(store).__name__} cannot export or import an index")


_EXPORT_ATTEMPTS = 3


# ---- the directory format ------------------------------------------------------------------------------
def export_index(store: object, path: Path) -> dict[str, Any]:
    """Write `store` to the directory `path` (which must not exist yet). Returns the manifest."""
    source = exportable(store)
    if path.exists():
        raise StoreError(f"export target {path} already exists")
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    # Rows and log are read separately: a batch committed in between would give an export whose log names a
    # batch its rows lack. Read until the index generation is the same before and after the rows, with no
    # batch in the middle of being written (Milvus writes a batch in steps).
    for _ in range(_EXPORT_ATTEMPTS):
        before = source.export_log()
        vectors: list[npt.NDArray[np.float32]] = []
        with (partial / "chunks.jsonl").open("w", encoding="utf-8") as out:
            for row in source.export_rows():
                out.write(json.dumps(_row_to_json(row), ensure_ascii=False) + "\n")
                vectors.append(np.asarray(row.vector, dtype=np.float32))
        log = source.export_log()
        if log.generation == before.generation and not (before.writing or log.writing):
            break
    else:
        shutil.rmtree(partial, ignore_errors=True)
        raise StoreError(f"the index changed (or a batch was being written) during each of {_EXPORT_ATTEMPTS} "
                         "export attempts; export again when no ingest or rollback is running (a batch left "
                         "half-written by a crash is finished by the store's repair)")
    dim = int(vectors[0].shape[0]) if vectors else 0
    np.save(partial / "vectors.npy", np.vstack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32))
    _write_jsonl(partial / "batches.jsonl", (_batch_to_json(b) for b in log.batches))
    _write_jsonl(partial / "dead_letter_events.jsonl", (_event_to_json(e) for e in log.events))
    manifest = {"format": FORMAT, "version": FORMAT_VERSION, "dim": dim, "rows": len(vectors),
                "batches": len(log.batches), "dead_letter_events": len(log.events),
                "generation": log.generation, "embedding_model": log.embedding_model,
                "exported_from": type(store).__name__,
                "exported_at": format_time(datetime.now(UTC))}
    (partial / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    partial.rename(path)
    return manifest


def import_index(path: Path, store: object) -> dict[str, Any]:
    """Recreate the export at `path` in `store` (an empty one). Returns the manifest."""
    target = exportable(store)
    missing = [name for name in _FILES if not (path / name).is_file()]
    if missing:
        raise StoreError(f"{path} is not an evidex export: missing {', '.join(missing)}")
    manifest: dict[str, Any] = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    if manifest.get("format") != FORMAT or not isinstance(manifest.get("version"), int):
        raise StoreError(f"{path}/manifest.json: not an {FORMAT} manifest")
    if manifest["version"] > FORMAT_VERSION:
        raise StoreError(f"{path} was written in format version {manifest['version']}; this evidex reads "
                         f"up to {FORMAT_VERSION}")
    vectors = np.load(path / "vectors.npy", mmap_mode="r")
    if vectors.shape[0] != manifest["rows"]:
        raise StoreError(f"{path}/vectors.npy has {vectors.shape[0]} rows, the manifest says {manifest['rows']}")
    log = IndexLog(batches=tuple(_batch_from_json(d) for d in _read_jsonl(path / "batches.jsonl")),
                   events=tuple(_event_from_json(d) for d in _read_jsonl(path / "dead_letter_events.jsonl")),
                   generation=int(manifest.get("generation", 0)), embedding_model=manifest.get("embedding_model"))

    def rows() -> Iterator[StoredRow]:
        n = 0
        for n, data in enumerate(_read_jsonl(path / "chunks.jsonl"), start=1):
            if n > vectors.shape[0]:
                break
            yield _row_from_json(data, np.array(vectors[n - 1], dtype=np.float32))
        if n != vectors.shape[0]:
            raise StoreError(f"{path}/chunks.jsonl has {n} lines, vectors.npy has {vectors.shape[0]} rows")

    target.import_rows(rows(), log)
    return manifest


def _write_jsonl(path: Path, items: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for item in items:
            out.write(json.dumps(item, ensure_ascii=False) + "\n")


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for n, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise StoreError(f"{path}:{n}: invalid JSON: {exc}") from None


def _row_to_json(row: StoredRow) -> dict[str, Any]:
    c, p = row.chunk, row.chunk.provenance
    return {
        "record_id": c.record_id, "doc_id": c.doc_id, "chunk_index": c.chunk_index, "source": c.source,
        "title": c.title, "heading": c.heading, "text": c.text, "citation_anchor": c.citation_anchor,
        "span_start": c.span_start, "span_end": c.span_end, "content_hash": c.content_hash,
        "doc_hash": row.doc_hash, "batch_id": c.batch_id, "indexed_at": format_time(c.indexed_at),
        "retired_by": row.retired_by,
        "provenance": {
            "source_version": p.source_version, "published_at": format_time(p.published_at),
            "expires_at": format_time(p.expires_at), "access_labels": list(p.access_labels),
            "citation_uri": p.citation_uri, "authority_tier": p.authority_tier,
            "evidence_family": p.evidence_family, "owner": p.owner, "superseded_by": p.superseded_by},
    }


def _row_from_json(d: dict[str, Any], vector: npt.NDArray[np.float32]) -> StoredRow:
    p = d["provenance"]
    provenance = Provenance(
        source_version=p["source_version"], published_at=read_time(p["published_at"]),
        expires_at=read_time(p["expires_at"]), access_labels=tuple(p["access_labels"]),
        citation_uri=p["citation_uri"], authority_tier=p["authority_tier"],
        evidence_family=p["evidence_family"], owner=p["owner"], superseded_by=p["superseded_by"])
    chunk = Chunk(
        record_id=d["record_id"], doc_id=d["doc_id"], chunk_index=d["chunk_index"], source=d["source"],
        title=d["title"], text=d["text"], citation_anchor=d["citation_anchor"], span_start=d["span_start"],
        span_end=d["span_end"], content_hash=d["content_hash"], provenance=provenance, heading=d["heading"],
        batch_id=d["batch_id"], indexed_at=read_time(d["indexed_at"]))
    return StoredRow(chunk, d["doc_hash"], vector, d["retired_by"])


def _batch_to_json(b: BatchInfo) -> dict[str, Any]:
    return {"batch_id": b.batch_id, "label": b.label, "status": b.status, "started_at": format_time(b.started_at),
            "finished_at": format_time(b.finished_at), "added": b.added, "replaced": b.replaced,
            "retired": b.retired, "unchanged": b.unchanged, "dead_letters": b.dead_letters}


def _batch_from_json(d: dict[str, Any]) -> BatchInfo:
    return BatchInfo(batch_id=d["batch_id"], started_at=read_time(d["started_at"]) or datetime.now(UTC),
                     finished_at=read_time(d["finished_at"]), status=d["status"], added=d["added"],
                     replaced=d["replaced"], unchanged=d["unchanged"], dead_letters=d["dead_letters"],
                     label=d["label"], retired=d.get("retired", 0))  # exports before 'retired' counted none


def _event_to_json(e: DeadLetterEvent) -> dict[str, Any]:
    return {"source": e.source, "kind": e.kind, "batch_id": e.batch_id, "at": format_time(e.at),
            "reason": e.reason, "location": e.location, "path": e.path}


def _event_from_json(d: dict[str, Any]) -> DeadLetterEvent:
    return DeadLetterEvent(source=d["source"], kind=d["kind"], batch_id=d["batch_id"],
                           at=read_time(d["at"]) or datetime.now(UTC), reason=d["reason"], location=d["location"],
                           path=d["path"])


# ---- the SQLite side ------------------------------------------------------------------------------------
class SqliteTransfer:
    """`Exportable` for a `SqliteStore`, by plain SQL on its file (a second connection; WAL lets it read
    while the store serves). It knows the SQLite schema (`records`, `batches`, `dead_letter_events`,
    `meta`), so it belongs in `SqliteStore` itself: these three methods can move there unchanged."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.store.path, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA busy_timeout=30000")
        return db

    def export_rows(self) -> Iterator[StoredRow]:
        db = self._connect()
        try:
            for r in db.execute("SELECT * FROM records ORDER BY rowid"):
                row = StoredRow(row_to_chunk(r), r["doc_hash"], np.frombuffer(r["vector"], dtype=np.float32),
                                r["retired_by"])
                yield row
        finally:
            db.close()

    def export_log(self) -> IndexLog:
        db = self._connect()
        try:
            batches = tuple(row_to_batch(r) for r in db.execute("SELECT * FROM batches ORDER BY seq"))
            events = tuple(
                DeadLetterEvent(source=r["source"], kind=r["kind"], batch_id=r["batch_id"],
                                at=read_time(r["at"]) or datetime.now(UTC), reason=r["reason"],
                                location=r["location"], path=r["path"])
                for r in db.execute("SELECT * FROM dead_letter_events ORDER BY seq"))
            generation = int(db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0])
            model = db.execute("SELECT value FROM meta WHERE key='embedding_model'").fetchone()
        finally:
            db.close()
        return IndexLog(batches, events, generation, embedding_model=None if model is None else model[0])

    def import_rows(self, rows: Iterable[StoredRow], log: IndexLog) -> None:
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                if db.execute("SELECT COUNT(*) FROM batches").fetchone()[0] or \
                        db.execute("SELECT COUNT(*) FROM records").fetchone()[0]:
                    raise StoreError(f"cannot import into {self.store.path}: the index is not empty")
                for row in rows:
                    _sqlite_insert(db, row)
                for b in log.batches:
                    db.execute(
                        "INSERT INTO batches (batch_id, label, started_at, finished_at, status, added, replaced, "
                        "retired, unchanged, dead_letters) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (b.batch_id, b.label, format_time(b.started_at), format_time(b.finished_at), b.status,
                         b.added, b.replaced, b.retired, b.unchanged, b.dead_letters))
                for e in log.events:
                    db.execute(
                        "INSERT INTO dead_letter_events (source, kind, reason, location, path, batch_id, at) "
                        "VALUES (?,?,?,?,?,?,?)",
                        (e.source, e.kind, e.reason, e.location, e.path, e.batch_id, format_time(e.at)))
                db.execute("UPDATE meta SET value = CAST(MAX(CAST(value AS INTEGER), ?) + 1 AS TEXT) "
                           "WHERE key='generation'", (log.generation,))
                if log.embedding_model:
                    db.execute("INSERT OR REPLACE INTO meta VALUES ('embedding_model', ?)", (log.embedding_model,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        finally:
            db.close()


def _sqlite_insert(db: sqlite3.Connection, row: StoredRow) -> None:
    c, p = row.chunk, row.chunk.provenance
    cur = db.execute(
        "INSERT INTO records (record_id, doc_id, doc_hash, chunk_index, source, title, heading, text, "
        "citation_anchor, span_start, span_end, content_hash, source_version, published_at, expires_at, "
        "access_labels, citation_uri, authority_tier, evidence_family, owner, superseded_by, batch_id, "
        "indexed_at, retired_by, vector) VALUES (" + ",".join("?" * 25) + ")",
        (c.record_id, c.doc_id, row.doc_hash, c.chunk_index, c.source, c.title, c.heading, c.text,
         c.citation_anchor, c.span_start, c.span_end, c.content_hash, p.source_version,
         format_time(p.published_at), format_time(p.expires_at), json.dumps(list(p.access_labels)),
         p.citation_uri, p.authority_tier, p.evidence_family, p.owner, p.superseded_by, c.batch_id,
         format_time(c.indexed_at) or format_time(datetime.now(UTC)), row.retired_by,
         np.asarray(row.vector, dtype=np.float32).tobytes()))
    if row.retired_by is None:
        db.execute("INSERT INTO records_fts (rowid, title, text) VALUES (?,?,?)", (cur.lastrowid, c.title, c.text))
