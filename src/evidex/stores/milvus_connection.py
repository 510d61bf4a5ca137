"""Where a Milvus index lives and how a client reaches it (`evidex.stores.milvus`): the uri and collection a
config names, a client that says in one line why it cannot open, and, for Milvus Lite, the lifetime of this
process's server on a `.db` file (stopped when the last store on the file closes: a new server searches the
rows the old one wrote with their index)."""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evidex.errors import BackendUnavailable, StoreError

if TYPE_CHECKING:
    from evidex.config import Config

INSTALL = "pip install -e '.[milvus]'"


def collection_name(name: str) -> str:
    """A valid Milvus collection name (letters, digits, underscores) derived from an index name."""
    safe = re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_") or "index"
    return f"evidex_{safe}"[:200]


def is_local(uri: str) -> bool:
    return "://" not in uri and not uri.startswith("unix:")


def location(config: Config) -> tuple[str, str]:
    """The uri and collection `config.index` names: `uri` (empty = a Milvus Lite file `milvus.db` in the index
    directory; a relative path resolves against the config file's directory) and `collection` (empty = derived
    from the index path)."""
    uri = config.index.uri
    if not uri:
        uri = str(config.index_dir / "milvus.db")  # resolved already: resolving it again had doubled the root
    elif is_local(uri) and not Path(uri).expanduser().is_absolute():
        uri = str(Path(config.root) / uri)
    name = getattr(config.index, "collection", "") or collection_name(Path(config.index.path).name)
    return (str(Path(uri).expanduser()) if is_local(uri) else uri), name


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


def hold_lite_server(uri: str) -> None:
    """Count a store on the Milvus Lite file `uri` (before it connects: a close elsewhere must not stop the server
    it is about to use)."""
    with _LITE_STORES_LOCK:
        _LITE_STORES[uri] += 1


def let_go_lite_server(uri: str) -> None:
    """A store on `uri` closed: the last one stops this process's server for it."""
    with _LITE_STORES_LOCK:
        _LITE_STORES[uri] -= 1
        if _LITE_STORES[uri] <= 0:
            del _LITE_STORES[uri]
            _release_lite_server(uri)


def connect(uri: str, token: str | None) -> Any:
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
        hint = " (Milvus Lite needs the milvus-lite package and a loopback interface)" if is_local(uri) else ""
        raise BackendUnavailable(f"cannot open Milvus at {uri}{hint}: {exc}") from None
    finally:
        lite_log.removeFilter(caught)


def missing_index(config: Config, *, token: str | None = None) -> str | None:
    """What is missing when `config` names no existing index (the Milvus Lite file, or the collection), or None.
    Read commands refuse a missing index: a mistyped --index, or a moved or copied index folder (whose derived
    collection name changes with it), had silently answered from a new, empty collection."""
    uri, name = location(config)
    if is_local(uri) and not uri.endswith(".db"):
        return None  # opening the store refuses the name with a ConfigError
    if is_local(uri) and not Path(uri).exists():
        return f"no Milvus Lite file {uri}"
    client = connect(uri, token)
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
