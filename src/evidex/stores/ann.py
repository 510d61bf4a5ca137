"""Approximate dense search for large indexes: a faiss inverted-file index with 8-bit codes (IVF, SQ8), whose
candidates `evidex.stores.dense.DenseIndex` scores again exactly against the float vectors.

Exact search costs a product with every live vector per query (1M x 384 float32: 1.5 GB and hundreds of
milliseconds on two busy cores); the inverted file compares the query with a few thousand centroids and scans the
`nprobe` nearest lists' 8-bit codes (a quarter of the floats' memory). Its top candidates, a few times the limit,
are re-scored with the float vectors, so the scores a search returns are the exact cosines and the order is the
exact order among them: only a neighbour the scan missed can differ from exact search.

Filters keep their meaning: the rows a filter lets through are a bitmap the scan skips the others by (faiss's
`IDSelectorBitmap`), and a filter passing a small share of rows is searched exactly over those rows
(`DenseIndex`), where the lists would hold too few of them.

The index is saved beside the SQLite file (`ann/`), named by the snapshot it was built at, and loaded by the next
process that opens that snapshot; the trained centroids are kept apart and reused when a commit or a rollback
makes a new snapshot, whose index is then filled again without training. faiss comes with the `ann` extra
(`pip install 'evidex[ann]'`); without it, search stays exact.

    ann = AnnIndex.open(folder, "g12-n1000000", vectors, AnnSettings(min_chunks=100_000))
    rows = ann.candidates(query, 400, keep=None)   # positions in `vectors`, best first (approximately)
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ANN_DIR = "ann"
_TRAIN_PER_LIST = 40  # faiss asks for at least 39 training points per centroid
_TRAIN_ITERATIONS = 10  # k-means rounds: the centroids only route a query to its lists; the scores are exact
_SEARCH_THREADS = 1  # one query's scan is short: a second thread costs more to wake than it saves


@dataclass(frozen=True)
class AnnSettings:
    """When and how the approximate index serves dense search (`[index] ann_*` in the config)."""

    min_chunks: int = 100_000  # live chunks from which dense search is approximate; 0 = always (tests)
    exact_below_share: float = 0.05  # a filter passing less than this share of rows is searched exactly
    nprobe: int = 48  # inverted lists scanned per query
    rescore: int = 4  # candidates re-scored exactly per result asked (at least `min_rescore`)
    min_rescore: int = 100

    def applies(self, rows: int) -> bool:
        return rows > 0 and rows >= self.min_chunks


def available() -> bool:
    """Whether faiss is installed (the `ann` extra)."""
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _lists(rows: int) -> int:
    """Inverted lists for `rows` vectors: about 2 sqrt(rows) (2,000 at a million: training and assigning rows cost
    in proportion, a scan of 48 lists reads ~24k codes), fewer when there are too few rows to train them."""
    return max(1, min(int(2 * np.sqrt(rows)), rows // _TRAIN_PER_LIST))


class AnnIndex:
    """An IVF-SQ8 index over the rows of one snapshot's vectors (row i = position i of `DenseIndex`)."""

    def __init__(self, index: Any, settings: AnnSettings) -> None:
        self._index = index
        self.settings = settings
        self._lock = threading.Lock()  # faiss search parameters objects are per call; the index is read-only

    @property
    def rows(self) -> int:
        return int(self._index.ntotal)

    @classmethod
    def open(cls, folder: Path, key: str, vectors: npt.NDArray[np.float32], settings: AnnSettings) -> AnnIndex:
        """The index of snapshot `key` saved under `folder`, or one built now (and saved) from `vectors`."""
        import faiss

        faiss.omp_set_num_threads(max(1, min(2, os.cpu_count() or 1)))
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / f"ivf-{key}.faiss"
        if path.exists():
            index = faiss.read_index(str(path))
            if index.ntotal == len(vectors) and index.d == vectors.shape[1]:
                return cls(index, settings)
        index = cls._trained(folder, vectors)
        for start in range(0, len(vectors), 100_000):
            index.add(np.ascontiguousarray(vectors[start:start + 100_000], dtype=np.float32))
        _save(faiss, index, path)
        for old in folder.glob("ivf-*.faiss"):
            if old != path:
                old.unlink(missing_ok=True)
        return cls(index, settings)

    @staticmethod
    def _trained(folder: Path, vectors: npt.NDArray[np.float32]) -> Any:
        """An empty index with trained centroids and 8-bit ranges: the saved ones when they suit `vectors` (the
        previous snapshot's, within a factor of four in size), else trained now on a sample and saved."""
        import faiss

        rows, dim = vectors.shape
        path = folder / "trained.faiss"
        meta_path = folder / "trained.json"
        if path.exists() and meta_path.exists():
            meta = json.loads(meta_path.read_text())
            if meta.get("dim") == dim and meta["rows"] / 4 <= rows <= meta["rows"] * 4:
                return faiss.read_index(str(path))
        lists = _lists(rows)
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(quantizer, dim, lists, faiss.ScalarQuantizer.QT_8bit,
                                              faiss.METRIC_INNER_PRODUCT)
        index.cp.niter = _TRAIN_ITERATIONS
        sample = np.random.default_rng(0).choice(rows, min(rows, _TRAIN_PER_LIST * lists), replace=False)
        index.train(np.ascontiguousarray(vectors[np.sort(sample)], dtype=np.float32))
        _save(faiss, index, path)
        meta_path.write_text(json.dumps({"rows": rows, "dim": dim, "lists": lists}))
        return index

    def candidates(self, query: npt.NDArray[np.float32], limit: int,
                   keep: npt.NDArray[np.bool_] | None) -> npt.NDArray[np.int64]:
        """Up to `self.settings.rescore * limit` rows near `query` (among those `keep` lets through), for exact
        re-scoring; approximately best first."""
        import faiss

        want = min(self.rows, max(limit * self.settings.rescore, self.settings.min_rescore))
        params = faiss.SearchParametersIVF()
        nprobe = self.settings.nprobe
        selector = None
        if keep is not None:
            # The lists near the query hold share x their rows that pass: read 1 / share times as many lists,
            # so a filtered search meets as many passing candidates as an unfiltered one.
            nprobe = int(np.ceil(nprobe / max(float(keep.mean()), 1e-3)))
            bits = np.packbits(keep, bitorder="little")
            selector = faiss.IDSelectorBitmap(len(keep), faiss.swig_ptr(bits))
            params.sel = selector
        params.nprobe = min(nprobe, int(self._index.nlist))
        faiss.omp_set_num_threads(_SEARCH_THREADS)
        _, found = self._index.search(query.reshape(1, -1).astype(np.float32), want, params=params)
        del selector
        rows: npt.NDArray[np.int64] = found[0][found[0] >= 0]
        return rows


def _save(faiss: Any, index: Any, path: Path) -> None:
    """Write `index` to `path` atomically (a reader never sees half a file), private as the index."""
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(handle)
    try:
        faiss.write_index(index, tmp)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
