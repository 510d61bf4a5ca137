"""`Store` on Milvus (a standalone server, a cluster, or Milvus Lite for a local `.db` file).

Two collections per index, so a remote cluster holds everything:

* `<name>`: one row per stored chunk, live or retired. The primary key is `<len>:<batch_id>:<record_id>`
  because a record id comes back in a later batch while its replaced row is kept for rollback. A row is
  live when `retired_by == ""`; it holds the batch that replaced it once retired, and
  `"pending:<batch>"` while the batch that wrote it has not finished. A BM25 function turns
  `bm25_text` (title + "\\n" + text) into `text_sparse`, a second one `title` into `title_sparse`.
* `<name>_meta`: small rows keyed by `key`: `state` (schema version, generation, counters, last committed
  batch), `batch:<id>` (one per batch, with its status) and `event:<seq>` (the dead-letter event log).

Milvus has no transactions, so a batch is written in an order that a crash can only interrupt harmlessly:
the batch is recorded as `pending`, its rows are written as `pending:<batch>` (invisible), the rows it
replaces are retired, its rows go live, and only then is it recorded as `committed`. A rollback is
recorded as `rolling-back` before it changes anything. On open (and before every write) `repair` undoes
what a `pending` batch wrote and completes a `rolling-back` one (which the next `rollback()` then reports
instead of undoing another batch); every step is an idempotent upsert or delete, so repairing twice is
harmless. It also checks that the stored rows number what the committed batches wrote (a damaged Lite file
loses rows silently). Between two steps a concurrent reader can briefly see a replaced document with no
live chunks; it never sees a half-written batch's new rows or a duplicate record id.
One writer at a time (a lock in this process; run one ingest per index).

Filters become Milvus boolean expressions (`_expression`); every string is quoted by `_literal`. A
source regex cannot be evaluated by Milvus: the live sources are read once per snapshot, matched in
Python, and the matching set is pushed down as `source in [...]` (or `not in`, whichever list is shorter),
so filters still apply before the limit.

This module is longer than the usual 300 lines (about 850): the schema, the crash-safe write protocol,
its repair and the expression builder are one unit that can be read top to bottom; a split into a
`stores/milvus/` package (schema, expression, store) is the next step if it grows.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from evidex.errors import BackendUnavailable, ConfigError, StoreError
from evidex.ingest.provenance import format_time
from evidex.retrieval.lexical import STOPWORDS
from evidex.retrieval.links import LinkIndex
from evidex.stores.dense import DenseIndex
from evidex.stores.protocol import BatchWrite, model_after
from evidex.stores.rows import chunk_from_row, label_counts
from evidex.stores.transfer import DeadLetterEvent, IndexLog, StoredRow
from evidex.types import BatchInfo, Chunk, DeadLetter, ScoredId, SearchFilters

if TYPE_CHECKING:
    from evidex.config import Config

SCHEMA_VERSION = 1
INSTALL = "pip install -e '.[milvus]'"
PUBLISHED_ALWAYS = -(2**62)  # published_at of a chunk with none: valid since forever
EXPIRES_NEVER = 2**62  # expires_at of a chunk with none
MAX_TOPK = 16384  # Milvus's limit on one search's top-k
_PAGE = 500  # ids per `in [...]` query, rows per upsert
_SEQ_PAGE = 5000  # sequence numbers per page of a scan
_TERM = re.compile(r"\w+", re.UNICODE)  # how the Milvus standard tokenizer splits words
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
_CHUNK_FIELDS = [*(f for f in _STRINGS if f not in {"bm25_text", "retired_by"}), *_NULLABLE, *_INTS,
                 "access_labels"]
_ROW_FIELDS = ["pk", *_CHUNK_FIELDS, "retired_by", "bm25_text", "vector"]
_META_FIELDS = ["key", "kind", "seq", "batch_id", "status", "body"]
# Rows whose text can hold a link (`evidex.retrieval.links`): a Markdown link has "](", an HTML one "href=" in
# any case, and Milvus's LIKE has no case-insensitive form, so its "=" stands for it.
_MAY_LINK = 'text like "%](%" or text like "%=%"'
_LINK_FIELDS = ["record_id", "source", "text", "doc_id", "evidence_family", "access_labels", "published_at",
                "expires_at"]


def _literal(value: str) -> str:
    """`value` as a Milvus string literal: double-quoted, with backslash, quote and line breaks escaped
    (both Milvus's grammar and Milvus Lite's reject a raw line break inside a literal)."""
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
               .replace("\t", "\\t"))
    return f'"{escaped}"'


def _literals(values: Iterable[str]) -> str:
    return "[" + ", ".join(_literal(v) for v in values) + "]"


def _epoch(value: datetime | None, default: int) -> int:
    return default if value is None else math.floor(value.timestamp())


def _from_epoch(value: int, unset: int | None = None) -> datetime | None:
    return None if value == unset else datetime.fromtimestamp(value, UTC)


def _iso(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def query_terms(query: str) -> list[str]:
    """The distinct words of `query` as Milvus's analyzer splits them, without stopwords (like the SQLite
    store's `fts_query`: every word is a plain term, no operator survives)."""
    words = (w for w in _TERM.findall(query.lower()) if w.strip("_") and w not in STOPWORDS)
    return list(dict.fromkeys(words))


def collection_name(name: str) -> str:
    """A valid Milvus collection name (letters, digits, underscores) derived from an index name."""
    safe = re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_") or "index"
    return f"evidex_{safe}"[:200]


def _pk(batch_id: str, record_id: str) -> str:
    return f"{len(batch_id)}:{batch_id}:{record_id}"


def _row(chunk: Chunk, doc_hash: str, batch_id: str, vector: npt.NDArray[np.float32], retired_by: str,
         row_seq: int) -> dict[str, Any]:
    p = chunk.provenance
    return {
        "pk": _pk(batch_id, chunk.record_id), "row_seq": row_seq, "record_id": chunk.record_id,
        "doc_id": chunk.doc_id, "doc_hash": doc_hash, "chunk_index": chunk.chunk_index, "source": chunk.source,
        "title": chunk.title, "heading": chunk.heading, "text": chunk.text,
        "bm25_text": f"{chunk.title}\n{chunk.text}", "citation_anchor": chunk.citation_anchor,
        "span_start": chunk.span_start, "span_end": chunk.span_end, "content_hash": chunk.content_hash,
        "source_version": p.source_version, "published_at": _epoch(p.published_at, PUBLISHED_ALWAYS),
        "expires_at": _epoch(p.expires_at, EXPIRES_NEVER), "access_labels": list(p.access_labels),
        "citation_uri": p.citation_uri, "authority_tier": p.authority_tier, "evidence_family": p.evidence_family,
        "owner": p.owner, "superseded_by": p.superseded_by, "batch_id": batch_id,
        "indexed_at": _epoch(chunk.indexed_at or _now(), 0), "retired_by": retired_by,
        "vector": [float(x) for x in np.asarray(vector, dtype=np.float32)],
    }


def _chunk(row: dict[str, Any]) -> Chunk:
    return chunk_from_row(row, published_at=_from_epoch(row["published_at"], PUBLISHED_ALWAYS),
                          expires_at=_from_epoch(row["expires_at"], EXPIRES_NEVER),
                          indexed_at=_from_epoch(row["indexed_at"]), access_labels=row["access_labels"])


def _filter_fields(rows: Sequence[dict[str, Any]]) -> DenseIndex:
    """The fields `SearchFilters` test of `rows` (with `_LINK_FIELDS`), held as a `DenseIndex` without vectors:
    its `passes` is the filter test of the SQLite store's dense search and link index."""
    return DenseIndex([r["record_id"] for r in rows], np.zeros((len(rows), 0), dtype=np.float32),
                      doc_ids=[r["doc_id"] for r in rows], sources=[r["source"] for r in rows],
                      families=[r["evidence_family"] for r in rows], labels=[r["access_labels"] for r in rows],
                      published=np.array([r["published_at"] for r in rows], dtype=np.int64),
                      expires=np.array([r["expires_at"] for r in rows], dtype=np.int64))


def _check_lengths(row: dict[str, Any]) -> None:
    for name, limit in (*_STRINGS.items(), *_NULLABLE.items()):
        value = row[name]
        if value is not None and len(value.encode()) > limit:
            raise StoreError(f"record {row['record_id']!r}: {name} is longer than the {limit} bytes Milvus "
                             "allows in that field")
    if len(row["access_labels"]) > 1024 or any(len(x.encode()) > 512 for x in row["access_labels"]):
        raise StoreError(f"record {row['record_id']!r}: access_labels exceed 1024 labels of 512 bytes")


def _is_local(uri: str) -> bool:
    return "://" not in uri and not uri.startswith("unix:")


def _location(config: Config) -> tuple[str, str]:
    """The uri and collection `config.index` names: `uri` (empty = a Milvus Lite file `milvus.db` in the index
    directory; a relative path resolves against the config file's directory) and `collection` (empty = derived
    from the index path)."""
    uri = config.index.uri
    if not uri:
        uri = str(config.index_dir / "milvus.db")  # resolved already: resolving it again had doubled the root
    elif _is_local(uri) and not Path(uri).expanduser().is_absolute():
        uri = str(Path(config.root) / uri)
    name = getattr(config.index, "collection", "") or collection_name(Path(config.index.path).name)
    return (str(Path(uri).expanduser()) if _is_local(uri) else uri), name


class _LiteStartError(logging.Filter):
    """Keeps the error milvus-lite logs, with a traceback, when its server cannot start (pymilvus then raises
    only "Open local milvus failed"), so the store can say in one line what went wrong."""

    def __init__(self) -> None:
        super().__init__()
        self.error: BaseException | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            self.error = record.exc_info[1]
            return False
        return True


_LITE_STORES: Counter[str] = Counter()  # open stores per Milvus Lite file in this process
_LITE_STORES_LOCK = threading.Lock()


def _release_lite_server(uri: str) -> None:
    """Stop this process's Milvus Lite server for `uri`; the next client on it starts a new one."""
    try:
        from milvus_lite.server_manager import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
            server_manager_instance,
        )
    except ImportError:
        return
    server_manager_instance.release_server(uri)


def _connect(uri: str, token: str | None) -> Any:
    """A client on `uri`. A Milvus Lite file that another process holds (`evidex serve`, another ingest) is a
    `StoreError` saying so; it had been a traceback and a hint about the package and the loopback interface."""
    try:
        from pymilvus import MilvusClient  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError as exc:
        raise BackendUnavailable(f"the milvus backend needs pymilvus: {INSTALL} ({exc})") from None
    caught = _LiteStartError()
    lite_log = logging.getLogger("milvus_lite.server_manager")
    lite_log.addFilter(caught)
    try:
        return MilvusClient(uri=uri, token=token or "")
    except Exception as exc:
        if type(caught.error).__name__ == "DataDirLockedError":  # milvus-lite's; a server needs no milvus-lite
            raise StoreError(f"the index at {uri} is in use by another process (a running `evidex serve` or "
                             "`evidex mcp`, or another ingest): Milvus Lite lets one process open it at a time. "
                             "Stop that process and try again, or keep the index on a Milvus server") from None
        if caught.error is not None:
            raise StoreError(f"cannot open the Milvus Lite index at {uri}: {caught.error}") from None
        hint = " (Milvus Lite needs the milvus-lite package and a loopback interface)" if _is_local(uri) else ""
        raise BackendUnavailable(f"cannot open Milvus at {uri}{hint}: {exc}") from None
    finally:
        lite_log.removeFilter(caught)


def missing_index(config: Config, *, token: str | None = None) -> str | None:
    """What is missing when `config` names no existing index (the Milvus Lite file, or the collection), or None.
    Read commands refuse a missing index: a mistyped --index, or a moved or copied index folder (whose derived
    collection name changes with it), had silently answered from a new, empty collection."""
    uri, name = _location(config)
    if _is_local(uri) and not uri.endswith(".db"):
        return None  # opening the store refuses the name with a ConfigError
    if _is_local(uri) and not Path(uri).exists():
        return f"no Milvus Lite file {uri}"
    client = _connect(uri, token)
    from pymilvus import MilvusException  # type: ignore[import-untyped,import-not-found,unused-ignore]

    try:
        if client.has_collection(name) and client.has_collection(f"{name}_meta"):
            return None
        names = set(client.list_collections())
    except MilvusException as exc:  # e.g. a damaged Milvus Lite file
        raise StoreError(f"milvus open on collection {name!r} failed: {exc}") from None
    finally:
        client.close()
    indexes = sorted(n for n in names if f"{n}_meta" in names)
    shown = ", ".join(indexes[:5]) + (" ..." if len(indexes) > 5 else "")
    found = f"it holds {shown}: set index.collection to use one" if indexes else "it holds none"
    return f"no collection {name!r} at {uri} ({found})"


class MilvusStore:
    """`Store` on one Milvus collection (plus its `_meta` companion). Thread-safe; one writer per index."""

    def __init__(self, uri: str, *, collection: str = "evidex", token: str | None = None, dim: int = 384,
                 title_weight: float = 1.0, ef_search: int = 128) -> None:
        try:
            from pymilvus import MilvusException  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError as exc:
            raise BackendUnavailable(f"the milvus backend needs pymilvus: {INSTALL} ({exc})") from None
        self.is_lite = _is_local(uri)
        if self.is_lite:
            if not uri.endswith(".db"):
                raise ConfigError(f"Milvus Lite needs a file name ending in .db, got {uri!r}")
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
        self.uri, self.collection, self.meta = uri, collection, f"{collection}_meta"
        self.dim, self.title_weight, self.ef_search = dim, title_weight, ef_search
        self._error: type[Exception] = MilvusException
        self._lock = threading.RLock()
        self._sources: tuple[int, list[str]] = (-1, [])
        # (generation, its live records' link contexts, those records' filter fields)
        self._links: tuple[int, LinkIndex, DenseIndex] = (-1, LinkIndex(()), _filter_fields([]))
        self.finished_rollbacks: list[str] = []  # rollbacks a crash had interrupted that `repair` completed
        self._owed_rollback: str | None = None  # the last of them, until a rollback or a commit follows
        self._closed = False
        self._lite_key = os.path.abspath(uri) if self.is_lite else None  # as milvus-lite names its servers
        if self._lite_key is not None:  # counted before it connects: a close elsewhere must not stop its server
            with _LITE_STORES_LOCK:
                _LITE_STORES[self._lite_key] += 1
        try:
            self._client = _connect(uri, token)
            self._call("open", self._open)
            self.repair()
        except BaseException:
            self._closed = True
            if hasattr(self, "_client"):
                self._client.close()
            self._forget_lite()
            raise

    @classmethod
    def from_config(cls, config: Config, *, token: str | None = None, dim: int = 384) -> MilvusStore:
        """The store `config.index` names (see `_location`). The token is passed in: only `evidex.config`
        reads the environment."""
        uri, name = _location(config)
        return cls(uri, collection=name, token=token, dim=dim, title_weight=config.retrieval.title_weight)

    # ---- plumbing ---------------------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self._error as exc:
            raise StoreError(f"milvus {what} on collection {self.collection!r} failed: {exc}") from None

    def _mutate(self, op: str, collection: str, **kwargs: Any) -> None:
        """Every write goes through here (upsert rows / delete by filter), one idempotent step at a time."""
        if op == "upsert":
            rows = kwargs["data"]
            for i in range(0, len(rows), _PAGE):
                self._call(op, self._client.upsert, collection, data=rows[i:i + _PAGE])
        else:
            self._call(op, self._client.delete, collection, filter=kwargs["filter"])

    def _query(self, collection: str, expr: str, fields: Sequence[str]) -> list[dict[str, Any]]:
        return list(self._call("query", self._client.query, collection, filter=expr, output_fields=list(fields)))

    def _scan(self, collection: str, expr: str, fields: Sequence[str]) -> Iterator[dict[str, Any]]:
        """All rows matching `expr`, in pages of `_SEQ_PAGE` consecutive sequence numbers (a plain query is
        capped at 16384 rows; pymilvus's query iterator needs a server-side timestamp Lite lacks). The
        state's `seq` is raised before any row with a higher number is written."""
        seq_field = "seq" if collection == self.meta else "row_seq"
        top = int(self._state()["seq"])
        for start in range(0, top + 1, _SEQ_PAGE):
            page = self._query(collection, f"({expr}) and {seq_field} >= {start} and "
                                           f"{seq_field} < {start + _SEQ_PAGE}", [*fields, seq_field])
            yield from sorted(page, key=lambda r: int(r[seq_field]))

    def _query_in(self, field: str, values: Sequence[str], extra: str, fields: Sequence[str], *,
                  paged: bool = False) -> list[dict[str, Any]]:
        """Rows with `field` in `values` (and `extra`), asking for `_PAGE` values at a time."""
        out: list[dict[str, Any]] = []
        for i in range(0, len(values), _PAGE):
            expr = f"{extra} and {field} in {_literals(values[i:i + _PAGE])}"
            out.extend(self._scan(self.collection, expr, fields) if paged
                       else self._query(self.collection, expr, fields))
        return out

    # ---- schema -----------------------------------------------------------------------------------------
    def _open(self) -> None:
        from pymilvus import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
            DataType,
            Function,
            FunctionType,
        )

        client = self._client
        if not client.has_collection(self.collection):
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
            schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self.dim)
            for source, target in (("bm25_text", "text_sparse"), ("title", "title_sparse")):
                schema.add_field(target, DataType.SPARSE_FLOAT_VECTOR)
                schema.add_function(Function(name=f"{target}_bm25", function_type=FunctionType.BM25,
                                             input_field_names=[source], output_field_names=[target]))
            index = client.prepare_index_params()
            if self.is_lite:  # exact, like the SQLite store; Lite indexes no ARRAY and gains little from HNSW
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
            self._create(self.collection, schema, index)
        else:
            fields = {f["name"]: f for f in client.describe_collection(self.collection)["fields"]}
            dim = int(fields.get("vector", {}).get("params", {}).get("dim", -1))
            if dim != self.dim:
                raise StoreError(f"collection {self.collection!r} holds {dim}-dimensional vectors, "
                                 f"not {self.dim}")
        if not client.has_collection(self.meta):
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
            self._create(self.meta, schema, index)
        for name in (self.collection, self.meta):
            if str(client.get_load_state(name)["state"]).rsplit(".", 1)[-1].lower() != "loaded":
                client.load_collection(name)
        state = self._state()
        if state["schema"] > SCHEMA_VERSION:
            raise StoreError(f"collection {self.collection!r} was written by a newer evidex "
                             f"(schema {state['schema']})")

    def _create(self, name: str, schema: Any, index: Any) -> None:
        # Milvus Lite answers an index build at once, but pymilvus would poll it in 0.5 s sleeps.
        self._client.create_collection(name, schema=schema, consistency_level="Strong")
        self._client.create_index(name, index, sync=not self.is_lite)
        self._client.load_collection(name)

    # ---- meta rows --------------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        rows = self._query(self.meta, 'key == "state"', ["body"])
        if rows:
            state: dict[str, Any] = json.loads(rows[0]["body"])
            return state
        return {"schema": SCHEMA_VERSION, "generation": 0, "seq": 0, "last": None, "importing": False}

    def _put_state(self, state: dict[str, Any]) -> None:
        self._put_meta([{"key": "state", "kind": "state", "seq": 0, "batch_id": "", "status": "",
                         "body": json.dumps(state)}])

    def _put_meta(self, rows: list[dict[str, Any]]) -> None:
        self._mutate("upsert", self.meta, data=[{**r, "unused": [0.0, 0.0]} for r in rows])

    def _batch_row(self, info: BatchInfo, seq: int, model: str | None = None) -> dict[str, Any]:
        """`model`: the index's embedder once the batch commits (repair restores it from the commit point)."""
        body = {"label": info.label, "started_at": format_time(info.started_at),
                "finished_at": format_time(info.finished_at), "added": info.added, "replaced": info.replaced,
                "retired": info.retired, "unchanged": info.unchanged, "dead_letters": info.dead_letters,
                "embedding_model": model}
        return {"key": f"batch:{info.batch_id}", "kind": "batch", "seq": seq, "batch_id": info.batch_id,
                "status": info.status, "body": json.dumps(body)}

    def _event_row(self, event: DeadLetterEvent, seq: int) -> dict[str, Any]:
        body = {"source": event.source, "kind": event.kind, "reason": event.reason[:16000],
                "location": event.location, "path": event.path, "at": format_time(event.at)}
        return {"key": f"event:{seq:020d}", "kind": "event", "seq": seq, "batch_id": event.batch_id,
                "status": event.kind, "body": json.dumps(body)}

    def _batch_rows(self, expr: str = 'kind == "batch"') -> list[dict[str, Any]]:
        return list(self._scan(self.meta, expr, _META_FIELDS))

    @staticmethod
    def _info(row: dict[str, Any]) -> BatchInfo:
        body = json.loads(row["body"])
        return BatchInfo(batch_id=row["batch_id"], started_at=_iso(body["started_at"]) or _now(),
                         finished_at=_iso(body["finished_at"]), status=row["status"], added=body["added"],
                         replaced=body["replaced"], unchanged=body["unchanged"],
                         dead_letters=body["dead_letters"], label=body["label"], retired=body.get("retired", 0))

    def _set_retired(self, rows: list[dict[str, Any]], retired_by: str) -> None:
        if rows:
            self._mutate("upsert", self.collection, data=[{**r, "retired_by": retired_by} for r in rows])

    def _rows(self, expr: str) -> list[dict[str, Any]]:
        return list(self._scan(self.collection, expr, _ROW_FIELDS))

    # ---- writes ---------------------------------------------------------------------------------------
    def _writable_state(self) -> dict[str, Any]:
        self.repair()
        state = self._state()
        if state.get("importing"):
            raise StoreError(f"an import into {self.collection!r} was interrupted; run the import again")
        return state

    def commit_batch(self, batch: BatchWrite) -> BatchInfo:
        started = _now()
        with self._lock:
            state = self._writable_state()
            self._owed_rollback = None  # this batch is the last one now
            self._check_batch(batch)
            model = model_after(state.get("embedding_model") or None, batch, self._is_empty)  # named at the commit
            added = sum(len(d.chunks) for d in batch.documents)
            doc_ids = [d.doc_id for d in batch.documents]
            old = self._query_in("doc_id", doc_ids, 'retired_by == ""', _ROW_FIELDS, paged=True)
            had_rows = {r["doc_id"] for r in old}
            retired = sum(1 for d in batch.documents if d.doc_id in had_rows and not d.chunks)
            replaced = len(had_rows) - retired
            seq = int(state["seq"])
            pending = BatchInfo(batch.batch_id, started, None, "pending", added, replaced, batch.unchanged,
                                len(batch.dead_letters), batch.label, retired)
            seq += 1
            batch_seq = seq
            new: list[dict[str, Any]] = []
            for doc in batch.documents:
                for chunk, vector in zip(doc.chunks, doc.vectors, strict=True):
                    seq += 1
                    new.append(_row(chunk, doc.doc_hash, batch.batch_id, vector, f"pending:{batch.batch_id}", seq))
            for row in new:
                _check_lengths(row)
            events = [DeadLetterEvent(d.source, "failed", batch.batch_id, d.failed_at, d.reason, d.location,
                                      d.path or d.location) for d in batch.dead_letters]
            events += [DeadLetterEvent(s, "resolved", batch.batch_id, started) for s in batch.resolved_dead_letters]
            event_rows = []
            for event in events:
                seq += 1
                event_rows.append(self._event_row(event, seq))
            try:
                # 0. reserve sequence numbers (scans stop at seq), and move the generation: a search that overlaps
                # steps 3-5 sees rows of a half-applied batch, so its snapshot id must differ before and after.
                self._put_state({**state, "seq": seq, "generation": int(state["generation"]) + 1})
                self._put_meta([self._batch_row(pending, batch_seq)])  # 1. intent: repair undoes from here on
                if event_rows:
                    self._put_meta(event_rows)  # 2. counted only once the batch is committed
                if new:
                    self._mutate("upsert", self.collection, data=new)  # 3. written, not yet visible
                self._set_retired(old, batch.batch_id)  # 4. the replaced chunks leave the live set
                self._set_retired(new, "")  # 5. the new ones enter it
                info = BatchInfo(batch.batch_id, started, _now(), "committed", added, replaced, batch.unchanged,
                                 len(batch.dead_letters), batch.label, retired)
                self._put_meta([self._batch_row(info, batch_seq, model)])  # 6. the commit point
                self._put_state({**state, "seq": seq, "generation": int(state["generation"]) + 2,
                                 "last": batch.batch_id, "embedding_model": model})
            except Exception as exc:
                try:
                    self.repair()
                except Exception as again:
                    raise StoreError(f"batch {batch.batch_id} was not committed ({exc}) and could not be undone "
                                     f"yet ({again}); the next open repairs it") from None
                raise StoreError(f"batch {batch.batch_id} was not committed: {exc}") from None
        return info

    def _is_empty(self) -> bool:
        return not self._query(self.collection, 'pk != ""', ["count(*)"])[0]["count(*)"]

    def _check_batch(self, batch: BatchWrite) -> None:
        """What SQLite's constraints refuse: a used batch id, a record id twice, or a record id that is live
        in a document this batch does not replace."""
        if batch.batch_id.startswith("pending:") or not batch.batch_id:
            raise StoreError(f"batch id {batch.batch_id!r} is reserved")
        if self._query(self.meta, f"key == {_literal('batch:' + batch.batch_id)}", ["status"]):
            raise StoreError(f"batch {batch.batch_id} conflicts with the index: batch id already used")
        owner: dict[str, str] = {}
        for doc in batch.documents:
            if len(doc.chunks) != len(doc.vectors) or (len(doc.vectors) and doc.vectors.shape[1] != self.dim):
                raise StoreError(f"batch {batch.batch_id}: document {doc.doc_id!r} needs one {self.dim}-"
                                 "dimensional vector per chunk")
            for chunk in doc.chunks:
                if chunk.record_id in owner:
                    raise StoreError(f"batch {batch.batch_id} conflicts with the index: record id "
                                     f"{chunk.record_id!r} appears twice")
                owner[chunk.record_id] = doc.doc_id
        replacing = {d.doc_id for d in batch.documents}
        for row in self._query_in("record_id", list(owner), 'retired_by == ""', ["record_id", "doc_id"]):
            if row["doc_id"] not in replacing:
                raise StoreError(f"batch {batch.batch_id} conflicts with the index: record id "
                                 f"{row['record_id']!r} is live in document {row['doc_id']!r}")

    def rollback(self, batch_id: str | None = None) -> BatchInfo:
        """Also: when `repair` completed an interrupted rollback (on open, or just now), undo nothing more
        and return that batch unless `batch_id` names one. Re-running a rollback that was killed had undone
        the batch before it as well, and so on until the index was empty."""
        with self._lock:
            self._writable_state()
            owed, self._owed_rollback = self._owed_rollback, None
            if batch_id is None and owed is not None:
                return self._batch(owed)
            if batch_id is None:
                committed = self._batch_rows('kind == "batch" and status == "committed"')
                if not committed:
                    raise StoreError("nothing to roll back: no committed batch")
                batch_id = str(committed[-1]["batch_id"])
            rows = self._query(self.meta, f"key == {_literal('batch:' + batch_id)}", _META_FIELDS)
            if not rows:
                raise StoreError(f"unknown batch {batch_id!r}")
            if rows[0]["status"] != "committed":
                raise StoreError(f"batch {batch_id!r} is already {rows[0]['status']}")
            later = {r["retired_by"] for r in self._scan(
                self.collection, f'batch_id == {_literal(batch_id)} and retired_by != ""', ["retired_by"])}
            # A batch that emptied a document holds no rows of it: a later version shows as live rows.
            retired_docs = {r["doc_id"] for r in self._scan(
                self.collection, f"retired_by == {_literal(batch_id)}", ["doc_id"])}
            if retired_docs:
                later |= {r["batch_id"] for r in self._query_in(
                    "doc_id", sorted(retired_docs), 'retired_by == ""', ["batch_id"], paged=True)
                    if r["batch_id"] != batch_id}
            if later:
                raise StoreError(f"batch {batch_id!r} cannot be rolled back alone: later batch(es) "
                                 f"{', '.join(sorted(later))} replaced its documents; roll those back first")
            self._put_meta([{**rows[0], "status": "rolling-back"}])  # from here on repair completes it
            state = self._state()  # the generation moves before the rows do, as for a commit
            self._put_state({**state, "generation": int(state["generation"]) + 1})
            self._finish_rollback(batch_id)
        return self._batch(batch_id)

    def _finish_rollback(self, batch_id: str) -> None:
        self._mutate("delete", self.collection, filter=f"batch_id == {_literal(batch_id)}")
        self._set_retired(self._rows(f"retired_by == {_literal(batch_id)}"), "")
        self._mutate("delete", self.meta, filter=f'kind == "event" and batch_id == {_literal(batch_id)}')
        row = self._query(self.meta, f"key == {_literal('batch:' + batch_id)}", _META_FIELDS)[0]
        self._put_meta([{**row, "status": "rolled-back"}])
        state = self._state()
        committed = self._batch_rows('kind == "batch" and status == "committed"')
        self._put_state({**state, "generation": int(state["generation"]) + 1,
                         "last": committed[-1]["batch_id"] if committed else None,
                         "embedding_model": None if self._is_empty() else state.get("embedding_model")})

    def repair(self) -> list[str]:
        """Finish what a crash interrupted: undo `pending` batches, complete `rolling-back` ones (recorded in
        `finished_rollbacks`, so that `rollback()` answers with them). Returns the batch ids it touched."""
        with self._lock:
            touched = []
            for row in self._batch_rows('kind == "batch" and status in ["pending", "rolling-back"]'):
                batch_id = str(row["batch_id"])
                touched.append(batch_id)
                if row["status"] == "rolling-back":
                    self._finish_rollback(batch_id)
                    self.finished_rollbacks.append(batch_id)
                    self._owed_rollback = batch_id
                    continue
                self._mutate("delete", self.collection, filter=f"batch_id == {_literal(batch_id)}")
                self._set_retired(self._rows(f"retired_by == {_literal(batch_id)}"), "")
                self._mutate("delete", self.meta, filter=f'kind == "event" and batch_id == {_literal(batch_id)}')
                self._mutate("delete", self.meta, filter=f"key == {_literal('batch:' + batch_id)}")
                state = self._state()
                self._put_state({**state, "generation": int(state["generation"]) + 1})
            # A crash between a batch's commit point and the state update leaves `last` behind.
            state = self._state()
            batches = self._batch_rows()
            committed = [r for r in batches if r["status"] == "committed"]
            last = committed[-1]["batch_id"] if committed else None
            if state["last"] != last:
                body = json.loads(committed[-1]["body"]) if committed else {}
                # A batch row written before models were recorded names none: then the state's stands.
                model = body["embedding_model"] if "embedding_model" in body else state.get("embedding_model")
                self._put_state({**state, "generation": int(state["generation"]) + 1, "last": last,
                                 "embedding_model": None if self._is_empty() else model})
            self._check_stored(batches, state)
            return touched

    def _check_stored(self, batches: list[dict[str, Any]], state: dict[str, Any]) -> None:
        """Every row a committed batch wrote is kept (retired rows too) and a rollback deletes its batch's
        rows, so the rows outside batches being written number the committed batches' `added`. A damaged
        Milvus Lite file (a segment deleted, a manifest fallen back to an older one) loads with fewer rows or
        fewer batch records, and had answered as an empty or partial index."""
        if state.get("importing"):
            return  # an import writes its rows before its batches; the import is resumed, then checked
        busy = [str(r["batch_id"]) for r in batches if r["status"] in ("pending", "rolling-back")]
        expected = sum(int(json.loads(r["body"])["added"]) for r in batches if r["status"] == "committed")
        expr = f"batch_id not in {_literals(busy)}" if busy else 'pk != ""'
        stored = int(self._query(self.collection, expr, ["count(*)"])[0]["count(*)"])
        # Recounted only on a mismatch: another process's write between the reads changes its batch records.
        if stored != expected and batches == self._batch_rows() and not self._state().get("importing"):
            raise StoreError(f"collection {self.collection!r} holds {stored} chunk rows, but its committed "
                             f"batches wrote {expected}: the index storage is damaged (a lost data segment or "
                             "manifest?). Restore it from a backup or an `evidex export`, or ingest into a new "
                             "index")

    # ---- reads ------------------------------------------------------------------------------------------
    def embedding_model(self) -> str | None:
        model = self._state().get("embedding_model")
        return str(model) if model else None

    def document_hashes(self) -> dict[str, str]:
        return {r["doc_id"]: r["doc_hash"] for r in self._scan(self.collection, 'retired_by == ""',
                                                                ["doc_id", "doc_hash"])}

    def get(self, record_ids: Sequence[str]) -> list[Chunk]:
        ids = list(dict.fromkeys(record_ids))
        found = {r["record_id"]: _chunk(r) for r in self._query_in("record_id", ids, 'retired_by == ""',
                                                                   _CHUNK_FIELDS)}
        return [found[i] for i in ids if i in found]

    def all_chunks(self) -> list[Chunk]:
        return [_chunk(r) for r in self._scan(self.collection, 'retired_by == ""', _CHUNK_FIELDS)]

    def search_dense(self, vector: npt.NDArray[np.float32], limit: int,
                     filters: SearchFilters | None = None) -> list[ScoredId]:
        expr = self._expression(filters)
        if expr is None or limit <= 0:
            return []
        data = [float(x) for x in np.asarray(vector, dtype=np.float32)]
        params: dict[str, Any] = {"metric_type": "COSINE"}
        if not self.is_lite:
            params["params"] = {"ef": max(self.ef_search, min(limit, MAX_TOPK))}
        return [ScoredId(record_id, score) for record_id, score in self._search(data, "vector", limit, expr, params)]

    def search_sparse(self, query: str, limit: int, filters: SearchFilters | None = None, *,
                      title_only: bool = False, scope: tuple[str, ...] | None = None) -> list[ScoredId]:
        """BM25 by Milvus's own function, whose word statistics cover the whole collection: `scope` cannot be
        honoured (see docs/milvus.md: restricted text shifts readable scores)."""
        terms = query_terms(query)
        expr = self._expression(filters) if terms else None
        if expr is None or limit <= 0:
            return []
        text, params = " ".join(terms), {"metric_type": "BM25"}
        if title_only or self.title_weight == 1.0:
            hits = self._search(text, "title_sparse" if title_only else "text_sparse", limit, expr, params)
            return [ScoredId(record_id, abs(score)) for record_id, score in hits]
        # title_weight != 1: bm25(title + text) + (title_weight - 1) * bm25(title), reranked over a wider
        # pool of the combined field's hits (every title hit is one of them).
        pool = min(MAX_TOPK, max(4 * limit, 100))
        both = self._search(text, "text_sparse", pool, expr, params)
        title = dict(self._search(text, "title_sparse", pool, expr, params))
        scored = [(abs(s) + (self.title_weight - 1.0) * abs(title.get(r, 0.0)), -n, r)
                  for n, (r, s) in enumerate(both)]
        return [ScoredId(r, s) for s, _, r in sorted(scored, reverse=True)[:limit]]

    def word_counts(self, text: str, readers: tuple[str, ...] | None = None) -> tuple[int, dict[str, int]]:
        """Not known: Milvus keeps its BM25 word statistics on the server (a plan then keeps every aspect)."""
        return 0, {}

    def inlink_contexts(self, sources: Sequence[str], filters: SearchFilters | None = None) -> dict[str, list[str]]:
        """Read from a link index of the live records, built on first use at each generation (as the live
        sources are) from the rows whose text can hold a link. It keeps those records' filter fields, so which
        of them pass `filters` is decided here, by the test SQLite's link index uses (`DenseIndex.passes`):
        asking Milvus per request had cost a k8s search about 170 ms on Milvus Lite."""
        links, rows = self._link_index()
        readable, _ = rows.passes(filters)
        return links.contexts(sources, readable)

    def _link_index(self) -> tuple[LinkIndex, DenseIndex]:
        generation = int(self._state()["generation"])
        with self._lock:
            if self._links[0] != generation:
                rows = list(self._scan(self.collection, f'retired_by == "" and ({_MAY_LINK})', _LINK_FIELDS))
                self._links = (generation, LinkIndex((r["record_id"], r["source"], r["text"]) for r in rows),
                               _filter_fields(rows))
            return self._links[1], self._links[2]

    def read_ahead(self, words: Sequence[str]) -> None:
        """Nothing to read: Milvus scores BM25 on the server, per search."""

    def _search(self, data: Any, field: str, limit: int, expr: str,
                params: dict[str, Any]) -> list[tuple[str, float]]:
        """(record_id, raw distance) best first, equal scores in the order the rows were written (as SQLite
        ranks them): Milvus returns ties in the order of its segments, which a seal or a compaction changes.
        Milvus Lite reports BM25 as a negative distance, a server as a positive score: callers take abs() of
        BM25 values, which are never negative."""
        result = self._call("search", self._client.search, self.collection, data=[data], anns_field=field,
                            limit=min(limit, MAX_TOPK), filter=expr, search_params=params,
                            output_fields=["record_id", "row_seq"])

        def goodness(distance: float) -> float:
            return distance if field == "vector" else abs(distance)

        hits = sorted(result[0], key=lambda hit: (-goodness(float(hit["distance"])), hit["entity"]["row_seq"]))
        return [(hit["entity"]["record_id"], float(hit["distance"])) for hit in hits]

    def _expression(self, filters: SearchFilters | None) -> str | None:
        """The Milvus filter for live chunks passing `filters`; None when nothing can pass."""
        clauses = ['retired_by == ""']
        if filters is None:
            return clauses[0]
        for field, values in (("access_labels", filters.access_labels), ("evidence_family", filters.families),
                              ("doc_id", filters.doc_ids)):
            if values is None:
                continue
            if not values:
                return None
            if field == "access_labels":
                clauses.append(f"ARRAY_CONTAINS_ANY(access_labels, {_literals(values)})")
            else:
                clauses.append(f"{field} in {_literals(values)}")
        if filters.valid_at is not None:
            t = _epoch(filters.valid_at, 0)
            clauses.append(f"published_at <= {t} and expires_at > {t}")
        if filters.source_pattern is not None:
            regex = re.compile(filters.source_pattern)
            sources = self._live_sources()
            matching = [s for s in sources if regex.search(s)]
            others = [s for s in sources if not regex.search(s)]
            if not matching:
                return None
            if others:
                clauses.append(f"source in {_literals(matching)}" if len(matching) <= len(others)
                               else f"source not in {_literals(others)}")
        return " and ".join(f"({c})" for c in clauses)

    def _live_sources(self) -> list[str]:
        """Distinct live sources, read once per snapshot."""
        generation = int(self._state()["generation"])
        with self._lock:
            if self._sources[0] != generation:
                rows = self._scan(self.collection, 'retired_by == ""', ["source"])
                self._sources = (generation, sorted({r["source"] for r in rows}))
            return self._sources[1]

    def batches(self) -> list[BatchInfo]:
        return [self._info(r) for r in self._batch_rows() if r["status"] in {"committed", "rolled-back"}]

    def _batch(self, batch_id: str) -> BatchInfo:
        rows = self._query(self.meta, f"key == {_literal('batch:' + batch_id)}", _META_FIELDS)
        if not rows:
            raise StoreError(f"unknown batch {batch_id!r}")
        return self._info(rows[0])

    def _events(self) -> list[DeadLetterEvent]:
        """The dead-letter event log of committed and rolled-back batches, in order."""
        done = {b.batch_id for b in self.batches()}
        events = []
        for r in self._scan(self.meta, 'kind == "event"', _META_FIELDS):
            if r["batch_id"] in done:
                b = json.loads(r["body"])
                events.append(DeadLetterEvent(b["source"], b["kind"], r["batch_id"], _iso(b["at"]) or _now(),
                                              b["reason"], b["location"], b["path"]))
        return events

    def dead_letters(self) -> list[DeadLetter]:
        """Like the SQLite view: a source's latest event is a failure; attempts count failures since it
        last resolved."""
        latest: dict[str, tuple[DeadLetterEvent, int]] = {}
        for e in self._events():
            if e.kind == "resolved":
                latest[e.source] = (e, 0)
            else:
                latest[e.source] = (e, (latest[e.source][1] if e.source in latest else 0) + 1)
        return [DeadLetter(source=e.source, reason=e.reason, batch_id=e.batch_id, failed_at=e.at,
                           location=e.location, attempts=n, path=e.path)
                for source, (e, n) in sorted(latest.items()) if e.kind == "failed"]

    def snapshot_id(self) -> str:
        state = self._state()
        return f"g{state['generation']}-{state['last'] or 'empty'}"

    def chunk_count(self) -> int:
        return int(self._query(self.collection, 'retired_by == ""', ["count(*)"])[0]["count(*)"])

    def stats(self) -> dict[str, Any]:
        docs: set[str] = set()
        families: dict[str, int] = {}
        labels: Counter[tuple[str, ...]] = Counter()  # chunks per label set, as SQLite groups them
        chunks = 0
        for r in self._scan(self.collection, 'retired_by == ""', ["doc_id", "evidence_family", "access_labels"]):
            chunks += 1
            docs.add(r["doc_id"])
            family = r["evidence_family"] or "-"
            families[family] = families.get(family, 0) + 1
            labels[tuple(r["access_labels"])] += 1
        retired = self._query(self.collection, 'retired_by != "" and not (retired_by like "pending:%")',
                              ["count(*)"])[0]["count(*)"]
        statuses = [b.status for b in self.batches()]
        return {
            "backend": "milvus", "uri": self.uri, "collection": self.collection, "lite": self.is_lite,
            "snapshot_id": self.snapshot_id(), "documents": len(docs), "chunks": chunks,
            "retired_chunks": int(retired),
            "batches": sum(1 for b in statuses if b == "committed"),
            "rolled_back_batches": sum(1 for b in statuses if b == "rolled-back"),
            "dead_letters": len(self.dead_letters()), "families": dict(sorted(families.items())),
            "access_labels": label_counts(labels.items(), list),
        }

    def drop(self) -> None:
        """Delete this index's two collections, everything in them included."""
        with self._lock:
            for name in (self.collection, self.meta):
                self._call("drop", self._client.drop_collection, name)

    def close(self) -> None:
        """Also stops the Milvus Lite server when this was the process's last store on its file: Lite searches
        the rows its running server wrote without their index (on the k8s pages dense ~140 ms and BM25 ~700 ms
        a search, against 13 and 21 ms once a new server has opened them, with the same results), so an engine
        opened again after an ingest searches at full speed (`scripts/bench_milvus_fresh.py`)."""
        if self._closed:
            return
        self._closed = True
        self._client.close()
        self._forget_lite()

    def _forget_lite(self) -> None:
        if self._lite_key is None:
            return
        with _LITE_STORES_LOCK:
            _LITE_STORES[self._lite_key] -= 1
            if _LITE_STORES[self._lite_key] <= 0:
                del _LITE_STORES[self._lite_key]
                _release_lite_server(self._lite_key)

    # ---- export / import (evidex.stores.transfer.Exportable) --------------------------------------------
    def export_rows(self) -> Iterator[StoredRow]:
        for r in self._scan(self.collection, 'pk != ""', _ROW_FIELDS):
            if not r["retired_by"].startswith("pending:"):
                yield StoredRow(_chunk(r), r["doc_hash"], np.asarray(r["vector"], dtype=np.float32),
                                r["retired_by"] or None)

    def export_log(self) -> IndexLog:
        writing = bool(self._batch_rows('kind == "batch" and status in ["pending", "rolling-back"]'))
        state = self._state()
        return IndexLog(tuple(self.batches()), tuple(self._events()), int(state["generation"]), writing,
                        state.get("embedding_model") or None)

    def import_rows(self, rows: Iterable[StoredRow], log: IndexLog) -> None:
        with self._lock:
            self.repair()
            state = self._state()
            if not state.get("importing") and (self._batch_rows() or not self._is_empty()):
                raise StoreError(f"cannot import into collection {self.collection!r}: it is not empty")
            self._put_state({**state, "importing": True})
            seq = 0
            page: list[dict[str, Any]] = []
            for stored in rows:
                seq += 1
                row = _row(stored.chunk, stored.doc_hash, stored.chunk.batch_id, stored.vector,
                           stored.retired_by or "", seq)
                _check_lengths(row)
                page.append(row)
                if len(page) == _PAGE:
                    self._put_state({**state, "importing": True, "seq": seq})
                    self._mutate("upsert", self.collection, data=page)
                    page = []
            events = []
            for event in log.events:
                seq += 1
                events.append(self._event_row(event, seq))
            batches = []
            for info in log.batches:
                seq += 1
                batches.append(self._batch_row(info, seq, log.embedding_model))
            self._put_state({**state, "importing": True, "seq": seq})
            if page:
                self._mutate("upsert", self.collection, data=page)
            if events:
                self._put_meta(events)
            if batches:
                self._put_meta(batches)
            committed = [b.batch_id for b in log.batches if b.status == "committed"]
            self._put_state({"schema": SCHEMA_VERSION, "seq": seq, "importing": False,
                             "generation": max(int(state["generation"]), log.generation) + 1,
                             "last": committed[-1] if committed else None, "embedding_model": log.embedding_model})
