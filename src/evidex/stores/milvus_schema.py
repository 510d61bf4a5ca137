"""How a Milvus index is laid out (`evidex.stores.milvus`), and a chunk as a row of it.

Two collections per index, so a remote cluster holds everything:

* `<name>`: one row per stored chunk, live or retired. The primary key is `<len>:<batch_id>:<record_id>`
  because a record id comes back in a later batch while its replaced row is kept for rollback. A row is
  live when `retired_by == ""`; it holds the batch that replaced it once retired, and
  `"pending:<batch>"` while the batch that wrote it has not finished. A BM25 function turns
  `bm25_text` (title + "\\n" + text) into `text_sparse`, a second one `title` into `title_sparse`.
* `<name>_meta`: small rows keyed by `key`: `state` (schema version, generation, counters, last committed
  batch), `batch:<id>` (one per batch, with its status) and `event:<seq>` (the dead-letter event log).

Times are whole seconds since the epoch; a chunk with no publication or expiry time holds `PUBLISHED_ALWAYS`
or `EXPIRES_NEVER`.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.errors import StoreError
from evidex.stores.rows import chunk_from_row
from evidex.stores.transfer import DeadLetterEvent
from evidex.timestamps import format_time, read_time
from evidex.types import BatchInfo, Chunk

SCHEMA_VERSION = 1
PUBLISHED_ALWAYS = -(2**62)  # published_at of a chunk with none: valid since forever
EXPIRES_NEVER = 2**62  # expires_at of a chunk with none
# Analyzer for title and bm25_text on a real server: close to the SQLite index's porter unicode61
# tokenizer. Milvus Lite applies only the standard tokenizer (lowercased words), without stemming.
ANALYZER = {"tokenizer": "standard", "filter": ["lowercase", "asciifolding",
                                                {"type": "stemmer", "language": "english"}]}
BM25_PARAMS = {"bm25_k1": 1.2, "bm25_b": 0.75}  # the values SQLite FTS5's bm25() uses
HNSW_PARAMS = {"M": 16, "efConstruction": 256}

# (name, max_length) of each VARCHAR column; `None` marks the nullable ones.
_STRINGS = {"record_id": 2048, "doc_id": 2048, "doc_hash": 256, "source": 4096, "title": 4096,
            "heading": 4096, "text": 65535, "bm25_text": 65535, "content_hash": 256, "batch_id": 512,
            "retired_by": 1024}
_NULLABLE = {"citation_anchor": 2048, "source_version": 1024, "citation_uri": 4096, "authority_tier": 256,
             "evidence_family": 512, "owner": 512, "superseded_by": 2048}
_INTS = ("row_seq", "chunk_index", "span_start", "span_end", "published_at", "expires_at", "indexed_at")
CHUNK_FIELDS = [*(f for f in _STRINGS if f not in {"bm25_text", "retired_by"}), *_NULLABLE, *_INTS,
                 "access_labels"]
ROW_FIELDS = ["pk", *CHUNK_FIELDS, "retired_by", "bm25_text", "vector"]
META_FIELDS = ["key", "kind", "seq", "batch_id", "status", "body"]


def to_epoch(value: datetime | None, default: int) -> int:
    return default if value is None else math.floor(value.timestamp())


def _from_epoch(value: int, unset: int | None = None) -> datetime | None:
    return None if value == unset else datetime.fromtimestamp(value, UTC)


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _pk(batch_id: str, record_id: str) -> str:
    return f"{len(batch_id)}:{batch_id}:{record_id}"


def to_row(chunk: Chunk, doc_hash: str, batch_id: str, vector: npt.NDArray[np.float32], retired_by: str,
         row_seq: int) -> dict[str, Any]:
    p = chunk.provenance
    return {
        "pk": _pk(batch_id, chunk.record_id), "row_seq": row_seq, "record_id": chunk.record_id,
        "doc_id": chunk.doc_id, "doc_hash": doc_hash, "chunk_index": chunk.chunk_index, "source": chunk.source,
        "title": chunk.title, "heading": chunk.heading, "text": chunk.text,
        "bm25_text": f"{chunk.title}\n{chunk.text}", "citation_anchor": chunk.citation_anchor,
        "span_start": chunk.span_start, "span_end": chunk.span_end, "content_hash": chunk.content_hash,
        "source_version": p.source_version, "published_at": to_epoch(p.published_at, PUBLISHED_ALWAYS),
        "expires_at": to_epoch(p.expires_at, EXPIRES_NEVER), "access_labels": list(p.access_labels),
        "citation_uri": p.citation_uri, "authority_tier": p.authority_tier, "evidence_family": p.evidence_family,
        "owner": p.owner, "superseded_by": p.superseded_by, "batch_id": batch_id,
        "indexed_at": to_epoch(chunk.indexed_at or now(), 0), "retired_by": retired_by,
        "vector": [float(x) for x in np.asarray(vector, dtype=np.float32)],
    }


def to_chunk(row: dict[str, Any]) -> Chunk:
    return chunk_from_row(row, published_at=_from_epoch(row["published_at"], PUBLISHED_ALWAYS),
                          expires_at=_from_epoch(row["expires_at"], EXPIRES_NEVER),
                          indexed_at=_from_epoch(row["indexed_at"]), access_labels=row["access_labels"])


def check_lengths(row: dict[str, Any]) -> None:
    for name, limit in (*_STRINGS.items(), *_NULLABLE.items()):
        value = row[name]
        if value is not None and len(value.encode()) > limit:
            raise StoreError(f"record {row['record_id']!r}: {name} is longer than the {limit} bytes Milvus "
                             "allows in that field")
    if len(row["access_labels"]) > 1024 or any(len(x.encode()) > 512 for x in row["access_labels"]):
        raise StoreError(f"record {row['record_id']!r}: access_labels exceed 1024 labels of 512 bytes")


def open_collections(client: Any, collection: str, meta: str, dim: int, is_lite: bool) -> None:
    """Create the chunk collection and its `_meta` companion where missing, with their indexes; refuse a
    chunk collection of another vector dimension; load both."""
    if not client.has_collection(collection):
        _create(client, is_lite, collection, _chunk_schema(client, dim), _chunk_indexes(client, is_lite))
    else:
        fields = {f["name"]: f for f in client.describe_collection(collection)["fields"]}
        stored = int(fields.get("vector", {}).get("params", {}).get("dim", -1))
        if stored != dim:
            raise StoreError(f"collection {collection!r} holds {stored}-dimensional vectors, "
                             f"not {dim}")
    if not client.has_collection(meta):
        from pymilvus import DataType  # type: ignore[import-untyped,import-not-found,unused-ignore]

        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("key", DataType.VARCHAR, is_primary=True, max_length=1024)
        schema.add_field("kind", DataType.VARCHAR, max_length=16)
        schema.add_field("seq", DataType.INT64)
        schema.add_field("batch_id", DataType.VARCHAR, max_length=512)
        schema.add_field("status", DataType.VARCHAR, max_length=32)
        schema.add_field("body", DataType.VARCHAR, max_length=65535)
        schema.add_field("unused", DataType.FLOAT_VECTOR, dim=2)  # Milvus requires a vector field
        index = client.prepare_index_params()
        index.add_index("unused", index_type="FLAT", metric_type="L2")
        _create(client, is_lite, meta, schema, index)
    for name in (collection, meta):
        if str(client.get_load_state(name)["state"]).rsplit(".", 1)[-1].lower() != "loaded":
            client.load_collection(name)


def _chunk_schema(client: Any, dim: int) -> Any:
    """The chunk collection's fields, and the BM25 functions that fill its two sparse vectors."""
    from pymilvus import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
        DataType,
        Function,
        FunctionType,
    )

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=4200)
    for name, length in _STRINGS.items():
        analyzed = name in {"title", "bm25_text"}
        extra: dict[str, Any] = {"enable_analyzer": True, "analyzer_params": ANALYZER} if analyzed else {}
        schema.add_field(name, DataType.VARCHAR, max_length=length, **extra)
    for name, length in _NULLABLE.items():
        schema.add_field(name, DataType.VARCHAR, max_length=length, nullable=True)
    for name in _INTS:
        schema.add_field(name, DataType.INT64)
    schema.add_field("access_labels", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=1024,
                     max_length=512)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    for source, target in (("bm25_text", "text_sparse"), ("title", "title_sparse")):
        schema.add_field(target, DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(Function(name=f"{target}_bm25", function_type=FunctionType.BM25,
                                     input_field_names=[source], output_field_names=[target]))
    return schema


def _chunk_indexes(client: Any, is_lite: bool) -> Any:
    """The chunk collection's indexes: exact vectors on Lite, HNSW and scalar indexes on a server."""
    index = client.prepare_index_params()
    if is_lite:  # exact, like the SQLite store; Lite indexes no ARRAY and gains little from HNSW
        index.add_index("vector", index_type="FLAT", metric_type="COSINE")
    else:
        index.add_index("vector", index_type="HNSW", metric_type="COSINE", params=HNSW_PARAMS)
        for name in ("retired_by", "record_id", "doc_id", "batch_id", "evidence_family", "source",
                     "access_labels"):
            index.add_index(name, index_type="INVERTED")
        for name in ("published_at", "expires_at", "row_seq"):
            index.add_index(name, index_type="STL_SORT")
    for name in ("text_sparse", "title_sparse"):
        index.add_index(name, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params=BM25_PARAMS)
    return index


def _create(client: Any, is_lite: bool, name: str, schema: Any, index: Any) -> None:
    # Milvus Lite answers an index build at once, but pymilvus would poll it in 0.5 s sleeps.
    client.create_collection(name, schema=schema, consistency_level="Strong")
    client.create_index(name, index, sync=not is_lite)
    client.load_collection(name)


def batch_row(info: BatchInfo, seq: int, model: str | None = None) -> dict[str, Any]:
    """`model`: the index's embedder once the batch commits (repair restores it from the commit point)."""
    body = {"label": info.label, "started_at": format_time(info.started_at),
            "finished_at": format_time(info.finished_at), "added": info.added, "replaced": info.replaced,
            "retired": info.retired, "unchanged": info.unchanged, "dead_letters": info.dead_letters,
            "embedding_model": model}
    return {"key": f"batch:{info.batch_id}", "kind": "batch", "seq": seq, "batch_id": info.batch_id,
            "status": info.status, "body": json.dumps(body)}


def event_row(event: DeadLetterEvent, seq: int) -> dict[str, Any]:
    body = {"source": event.source, "kind": event.kind, "reason": event.reason[:16000],
            "location": event.location, "path": event.path, "at": format_time(event.at)}
    return {"key": f"event:{seq:020d}", "kind": "event", "seq": seq, "batch_id": event.batch_id,
            "status": event.kind, "body": json.dumps(body)}


def batch_info(row: dict[str, Any]) -> BatchInfo:
    body = json.loads(row["body"])
    return BatchInfo(batch_id=row["batch_id"], started_at=read_time(body["started_at"]) or now(),
                     finished_at=read_time(body["finished_at"]), status=row["status"], added=body["added"],
                     replaced=body["replaced"], unchanged=body["unchanged"],
                     dead_letters=body["dead_letters"], label=body["label"], retired=body.get("retired", 0))
