"""ONNX Runtime embedder over an export made by :func:`evidex.embedding.onnx_export.export_onnx_int8`.

Needs only onnxruntime, tokenizers and numpy: no torch at run time.

Every text is one inference of batch size 1. The int8 model quantizes activations per tensor at run
time, so a batched text's vector would depend on the other texts (and padding) in its batch; one text per
run keeps vectors reproducible, needs no padding, and measured faster on CPU than padded batches.
embed_documents runs `threads` such inferences in parallel on a session pinned to one intra-op thread
(onnxruntime releases the GIL), longest texts first. embed_query runs on its own session with
`query_threads` intra-op threads (default 2) when no other inference of the embedder is running, else on the
one-thread session, so concurrent queries take a core each. The query session's workers sleep rather than
spin between operators: on this project's 2-core machine a k8s question's inference took 16 → 13 ms idle and
17 → 15 ms with the other core busy (scripts/bench_query_threads.py); spinning workers were faster idle
(10 ms) but slower than one thread once the other core was busy (23 ms). Each output of the integer products
is summed by one thread, so the vectors are the same for every thread count (a test holds them to it bit
for bit).

The integer products are exact on every CPU. On x86 without VNNI (AVX2, most AVX-512 parts) onnxruntime's
u8×s8 kernels add pairs of products in saturating 16-bit arithmetic, and 255 × 127 × 2 overflows it, so
the same model had made other vectors there (cosine to the reference 0.9855 at worst, against 0.9915
exact) and other rankings. The session option `session.x64quantprecision` moves the weights to uint8
(the same products) for kernels that sum in 32 bits. Exact products do not make every result the same across
CPUs: an Intel Xeon with AVX-512 VNNI and an AMD EPYC without it rank a few near-ties differently (the float
operations around the products, or numpy's after them; not pinned down), docs/lab/evaluation.md, "Across CPUs".
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.embedding.export_dir import EXPORT_FORMAT_VERSION, MODEL_FILE, TOKENIZER_FILE, read_manifest
from evidex.embedding.onnx_export import model_id_of
from evidex.embedding.ort_sessions import EXACT_INT8_PRODUCTS as EXACT_INT8_PRODUCTS  # re-exported
from evidex.embedding.ort_sessions import session
from evidex.embedding.protocol import Vectors
from evidex.errors import BackendUnavailable, EmbeddingError


class OnnxEmbedder:
    """Mean-pooled, L2-normalised sentence embeddings from an int8 ONNX transformer.

    threads: parallel inferences in embed_documents (default: all cores). batch_size: texts
    tokenized and scheduled together (bounds memory on huge inputs); each still runs alone.
    query_threads: intra-op threads of one embed_query inference (at most the cores there are). The
    documents' single-threaded session is loaded on first use, so a process that answers one query at a
    time holds the model once.
    """

    def __init__(self, onnx_dir: Path, threads: int | None = None, batch_size: int = 32,
                 query_threads: int = 2) -> None:
        try:
            import onnxruntime  # type: ignore[import-untyped,unused-ignore]
            import tokenizers
        except ImportError as exc:
            raise BackendUnavailable(
                f"the ONNX embedder needs onnxruntime and tokenizers ({exc.name} is missing): "
                "pip install -e ."
            ) from exc
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1 or None, got {threads}")
        if query_threads < 1:
            raise ValueError(f"query_threads must be >= 1, got {query_threads}")
        self._dir = Path(onnx_dir)
        manifest = _load_manifest(self._dir)
        self._threads = threads or os.cpu_count() or 1
        self._batch_size = batch_size
        max_len = int(manifest.get("max_seq_length", 256))
        self._tokenizer = _load_tokenizer(tokenizers, self._dir / TOKENIZER_FILE, max_len)
        self._ort = onnxruntime
        query_threads = min(query_threads, os.cpu_count() or 1)
        self._query_session = _session(onnxruntime, self._dir / MODEL_FILE, query_threads)
        self._document_session = self._query_session if query_threads == 1 else None
        self._lock = threading.Lock()
        self._in_progress = 0
        self._input_names = [i.name for i in self._query_session.get_inputs()]
        self._dim = _output_dim(self._query_session, manifest)
        sha = str(manifest.get("source_weights_sha256", ""))
        # The export itself, not only its source: two exports of one model (another recipe, other library
        # versions) make different vectors, and the embedding cache must not mix them.
        # "exact": vectors from exact integer products (see the module's docstring); the cache of an older
        # evidex may hold saturated ones under the name without it.
        self._fingerprint = (f"onnx-int8:{sha[:12]}:v{manifest['format_version']}:{manifest['model_sha256'][:12]}"
                             ":exact")
        self._model_id = model_id_of(sha)

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    def embed_query(self, text: str) -> Vectors:
        """(dim,) unit vector: one inference, on `query_threads` threads when nothing else of this embedder
        is running, else on one (two queries at once then take a core each, not both cores each)."""
        ids = self._tokenizer.encode(text).ids
        with self._running() as alone:
            return self._embed_ids(self._query_session if alone else self._documents_session(), ids)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """(len(texts), dim) unit vectors, in input order; row i equals embed_query(texts[i])."""
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of strings, not a single string")
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return out
        with self._running():
            self._embed_into(out, texts, self._documents_session())
        return out

    def _embed_into(self, out: Vectors, texts: Sequence[str], session: Any) -> None:
        workers = min(self._threads, len(texts))
        if workers <= 1:
            for index, ids in self._tokenized(texts):
                out[index] = self._embed_ids(session, ids)
            return
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evidex-onnx") as pool:
            pending: list[tuple[int, Future[Vectors]]] = []
            try:
                for index, ids in self._tokenized(texts):  # tokenizing overlaps with inference
                    pending.append((index, pool.submit(self._embed_ids, session, ids)))
                for index, future in pending:
                    out[index] = future.result()
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise

    @contextmanager
    def _running(self) -> Iterator[bool]:
        """Counts this embedder's inferences in progress; yields whether this one started alone."""
        with self._lock:
            alone = self._in_progress == 0
            self._in_progress += 1
        try:
            yield alone
        finally:
            with self._lock:
                self._in_progress -= 1

    def _documents_session(self) -> Any:
        with self._lock:
            if self._document_session is None:
                self._document_session = _session(self._ort, self._dir / MODEL_FILE, 1)
            return self._document_session

    def _tokenized(self, texts: Sequence[str]) -> Iterator[tuple[int, list[int]]]:
        """(index, token ids), batch_size texts at a time, longest first within each batch."""
        for start in range(0, len(texts), self._batch_size):
            encoded = self._tokenizer.encode_batch(list(texts[start : start + self._batch_size]))
            ids = [e.ids for e in encoded]
            for i in sorted(range(len(ids)), key=lambda k: -len(ids[k])):
                yield start + i, ids[i]

    def _embed_ids(self, session: Any, ids: list[int]) -> Vectors:
        input_ids = np.asarray([ids], dtype=np.int64)
        mask = np.ones_like(input_ids)
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(mask)}
        try:
            (hidden,) = session.run(["last_hidden_state"], {n: feeds[n] for n in self._input_names})
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidArgument types
            raise EmbeddingError(f"ONNX inference failed: {exc}") from exc
        row: Vectors = _mean_pool_normalise(np.asarray(hidden, dtype=np.float32), mask)[0]
        return row


def _session(ort: Any, model_path: Path, threads: int) -> Any:
    """A session on `threads` intra-op threads that loads the optimized graph saved beside the model once
    (`evidex.embedding.ort_sessions`): the same vectors, a faster start."""
    return session(ort, model_path, threads)


def _mean_pool_normalise(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> Vectors:
    weights = mask.astype(np.float32)[:, :, None]
    summed = (hidden * weights).sum(axis=1)
    pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    unit: Vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


def _load_manifest(onnx_dir: Path) -> dict[str, Any]:
    manifest = read_manifest(onnx_dir)
    if manifest.get("format_version") != EXPORT_FORMAT_VERSION:
        raise EmbeddingError(
            f"{onnx_dir}: export format {manifest.get('format_version')!r} is not the supported "
            f"{EXPORT_FORMAT_VERSION}; delete the directory to rebuild it"
        )
    for name in (MODEL_FILE, TOKENIZER_FILE):
        if not (onnx_dir / name).is_file():
            raise EmbeddingError(f"{onnx_dir} is an incomplete export: {name} is missing")
    if not isinstance(manifest.get("model_sha256"), str):
        raise EmbeddingError(f"{onnx_dir}: the manifest does not name its model (model_sha256); delete the "
                             "directory to rebuild it")
    return manifest


def _load_tokenizer(tokenizers: Any, path: Path, max_len: int) -> Any:
    """The tokenizer, truncating to max_len and never padding (each text runs alone)."""
    try:
        tok = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:
        raise EmbeddingError(f"cannot load tokenizer {path}: {exc}") from exc
    tok.enable_truncation(max_length=max_len)
    tok.no_padding()
    return tok


def _output_dim(session: Any, manifest: dict[str, Any]) -> int:
    shape = session.get_outputs()[0].shape
    if shape and isinstance(shape[-1], int):
        return int(shape[-1])
    if "dim" in manifest:
        return int(manifest["dim"])
    raise EmbeddingError("cannot tell the embedding dimension from the model or its manifest")
