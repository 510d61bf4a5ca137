"""ONNX Runtime embedder over an export made by :func:`evidex.embedding.onnx_export.export_onnx_int8`.

Needs only onnxruntime, tokenizers and numpy: no torch at run time. Queries run on a session
pinned to one thread (a few ms, unaffected by other load); documents on a session using `threads`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.embedding.onnx_export import (  # imports no torch: torch is only loaded to export
    EXPORT_FORMAT_VERSION,
    MODEL_FILE,
    TOKENIZER_FILE,
    read_manifest,
)
from evidex.embedding.protocol import Vectors
from evidex.errors import BackendUnavailable, EmbeddingError


class OnnxEmbedder:
    """Mean-pooled, L2-normalised sentence embeddings from an int8 ONNX transformer."""

    def __init__(self, onnx_dir: Path, threads: int | None = None, batch_size: int = 32) -> None:
        try:
            import onnxruntime
            import tokenizers
        except ImportError as exc:
            raise BackendUnavailable(
                f"the ONNX embedder needs onnxruntime and tokenizers ({exc.name} is missing): "
                "pip install evidex"
            ) from exc
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1 or None, got {threads}")
        self._dir = Path(onnx_dir)
        self._manifest = _load_manifest(self._dir)
        self._ort: Any = onnxruntime
        self._threads = threads or os.cpu_count() or 1
        self._batch_size = batch_size
        self._max_len = int(self._manifest.get("max_seq_length", 256))
        self._tokenizer, self._pad_id = _load_tokenizer(tokenizers, self._dir / TOKENIZER_FILE, self._max_len)
        self._query_session = self._session(1)
        self._doc_session: Any = None
        self._doc_lock = threading.Lock()
        self._input_names = [i.name for i in self._query_session.get_inputs()]
        self._dim = _output_dim(self._query_session, self._manifest)
        sha = str(self._manifest.get("source_weights_sha256", ""))
        self._fingerprint = f"onnx-int8:{sha[:12]}:v{self._manifest['format_version']}"

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def dim(self) -> int:
        return self._dim

    def embed_query(self, text: str) -> Vectors:
        """(dim,) unit vector, computed on the single-thread session."""
        ids = [self._tokenizer.encode(text).ids]
        return self._run(self._query_session, ids)[0]

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """(len(texts), dim) unit vectors; batches texts of similar length to limit padding."""
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of strings, not a single string")
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return out
        encoded = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        session = self._documents_session()
        for start in range(0, len(order), self._batch_size):
            idx = order[start : start + self._batch_size]
            out[idx] = self._run(session, [encoded[i] for i in idx])
        return out

    def _documents_session(self) -> Any:
        with self._doc_lock:
            if self._doc_session is None:
                self._doc_session = self._session(self._threads)
            return self._doc_session

    def _session(self, threads: int) -> Any:
        ort = self._ort
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.log_severity_level = 3
        try:
            return ort.InferenceSession(
                str(self._dir / MODEL_FILE), sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise EmbeddingError(f"cannot load {self._dir / MODEL_FILE}: {exc}") from exc

    def _run(self, session: Any, ids: list[list[int]]) -> Vectors:
        """Pad to the longest sequence, run, mean-pool over the mask, L2-normalise."""
        width = max(len(x) for x in ids)
        input_ids = np.full((len(ids), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(mask)}
        try:
            (hidden,) = session.run(["last_hidden_state"], {n: feeds[n] for n in self._input_names})
        except Exception as exc:
            raise EmbeddingError(f"ONNX inference failed: {exc}") from exc
        return _mean_pool_normalise(np.asarray(hidden, dtype=np.float32), mask)


def _mean_pool_normalise(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> Vectors:
    weights = mask.astype(np.float32)[:, :, None]
    summed = (hidden * weights).sum(axis=1)
    pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


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
    return manifest


def _load_tokenizer(tokenizers: Any, path: Path, max_len: int) -> tuple[Any, int]:
    """The tokenizer, truncating to max_len and not padding (done per batch), and its pad id."""
    try:
        tok = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:
        raise EmbeddingError(f"cannot load tokenizer {path}: {exc}") from exc
    pad_id = _pad_id(tok)
    tok.enable_truncation(max_length=max_len)
    tok.no_padding()
    return tok, pad_id


def _pad_id(tokenizer: Any) -> int:
    padding = tokenizer.padding
    if padding and "pad_id" in padding:
        return int(padding["pad_id"])
    for token in ("[PAD]", "<pad>"):
        found = tokenizer.token_to_id(token)
        if found is not None:
            return int(found)
    return 0


def _output_dim(session: Any, manifest: dict[str, Any]) -> int:
    shape = session.get_outputs()[0].shape
    if shape and isinstance(shape[-1], int):
        return int(shape[-1])
    if "dim" in manifest:
        return int(manifest["dim"])
    raise EmbeddingError("cannot tell the embedding dimension from the model or its manifest")
