"""The two collections of one Milvus index (`evidex.stores.milvus_schema`) and every read and write of them.

`MilvusCollections` is what the store's reads, its write protocol (`evidex.stores.milvus_writes`) and its ledger
(`evidex.stores.milvus_ledger`) share: one client, errors named by the collection, writes as idempotent steps
(`mutate`: an upsert in pages or a delete by filter), scans past Milvus's cap on one query, and the `state` row
of the `_meta` collection (schema, generation, sequence counter, last committed batch, embedder).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from evidex.errors import StoreError
from evidex.stores.milvus_expression import literal, literals
from evidex.stores.milvus_schema import META_FIELDS, ROW_FIELDS, SCHEMA_VERSION


class MilvusCollections:
    """The chunk collection `collection` and its companion `meta` on `client`; `error` is pymilvus's exception,
    which every call turns into a `StoreError` naming the collection."""

    page = 500  # ids per `in [...]` query, rows per upsert
    seq_page = 5000  # sequence numbers per page of a scan

    def __init__(self, client: Any, collection: str, meta: str, error: type[Exception]) -> None:
        self.client, self.collection, self.meta, self.error = client, collection, meta, error

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self.error as exc:
            raise StoreError(f"milvus {what} on collection {self.collection!r} failed: {exc}") from None

    def mutate(self, op: str, collection: str, **kwargs: Any) -> None:
        """Every write goes through here (upsert rows / delete by filter), one idempotent step at a time."""
        if op == "upsert":
            rows = kwargs["data"]
            for i in range(0, len(rows), self.page):
                self.call(op, self.client.upsert, collection, data=rows[i:i + self.page])
        else:
            self.call(op, self.client.delete, collection, filter=kwargs["filter"])

    def query(self, collection: str, expr: str, fields: Sequence[str]) -> list[dict[str, Any]]:
        return list(self.call("query", self.client.query, collection, filter=expr, output_fields=list(fields)))

    def scan(self, collection: str, expr: str, fields: Sequence[str]) -> Iterator[dict[str, Any]]:
        """All rows matching `expr`, in pages of `seq_page` consecutive sequence numbers (a plain query is
        capped at 16384 rows; pymilvus's query iterator needs a server-side timestamp Lite lacks). The
        state's `seq` is raised before any row with a higher number is written."""
        seq_field = "seq" if collection == self.meta else "row_seq"
        top = int(self.state()["seq"])
        for start in range(0, top + 1, self.seq_page):
            page = self.query(collection, f"({expr}) and {seq_field} >= {start} and "
                                          f"{seq_field} < {start + self.seq_page}", [*fields, seq_field])
            yield from sorted(page, key=lambda r: int(r[seq_field]))

    def query_in(self, field: str, values: Sequence[str], extra: str, fields: Sequence[str], *,
                 paged: bool = False) -> list[dict[str, Any]]:
        """Chunk rows with `field` in `values` (and `extra`), asking for `page` values at a time."""
        out: list[dict[str, Any]] = []
        for i in range(0, len(values), self.page):
            expr = f"{extra} and {field} in {literals(values[i:i + self.page])}"
            out.extend(self.scan(self.collection, expr, fields) if paged
                       else self.query(self.collection, expr, fields))
        return out

    def rows(self, expr: str) -> list[dict[str, Any]]:
        """Whole chunk rows matching `expr` (to write them again)."""
        return list(self.scan(self.collection, expr, ROW_FIELDS))

    def count(self, expr: str) -> int:
        return int(self.query(self.collection, expr, ["count(*)"])[0]["count(*)"])

    def is_empty(self) -> bool:
        """No chunk row at all, live or retired."""
        return not self.count('pk != ""')

    def set_retired(self, rows: list[dict[str, Any]], retired_by: str) -> None:
        if rows:
            self.mutate("upsert", self.collection, data=[{**r, "retired_by": retired_by} for r in rows])

    # ---- meta rows --------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        rows = self.query(self.meta, 'key == "state"', ["body"])
        if rows:
            state: dict[str, Any] = json.loads(rows[0]["body"])
            return state
        return {"schema": SCHEMA_VERSION, "generation": 0, "seq": 0, "last": None, "importing": False}

    def put_state(self, state: dict[str, Any]) -> None:
        self.put_meta([{"key": "state", "kind": "state", "seq": 0, "batch_id": "", "status": "",
                        "body": json.dumps(state)}])

    def put_meta(self, rows: list[dict[str, Any]]) -> None:
        self.mutate("upsert", self.meta, data=[{**r, "unused": [0.0, 0.0]} for r in rows])

    def batch_rows(self, expr: str = 'kind == "batch"') -> list[dict[str, Any]]:
        return list(self.scan(self.meta, expr, META_FIELDS))

    def batch_record(self, batch_id: str) -> dict[str, Any] | None:
        """The meta row of one batch, or None."""
        rows = self.query(self.meta, f"key == {literal('batch:' + batch_id)}", META_FIELDS)
        return rows[0] if rows else None
