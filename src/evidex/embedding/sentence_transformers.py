"""Reference embedder: sentence-transformers on torch (CPU, or a CUDA GPU for fast ingest), loaded from a local
directory only."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evidex.embedding.onnx_export import (
    model_id_of,
    pooling_of,
    quiet_transformers,
    weights_files,
    weights_sha256,
)
from evidex.embedding.protocol import Vectors
from evidex.errors import BackendUnavailable, EmbeddingError

_CONFIG_FILES = ("config.json", "modules.json", "sentence_bert_config.json", "1_Pooling/config.json")
_TORCH_LOCK = threading.Lock()  # torch's thread count is process-wide


class SentenceTransformerEmbedder:
    """Sentence-transformers model; on the CPU, queries on one torch thread and documents on `threads`.

    `device` "cuda" / "cuda:N" runs it on a GPU. The vectors are the same model's up to float rounding
    (measured by scripts/bench_gpu.py), so the fingerprint does not name the device: an index embedded on a GPU
    is searched with the same model on a CPU."""

    def __init__(self, model_dir: Path, threads: int | None = None, batch_size: int = 32,
                 device: str = "cpu") -> None:
        try:
            with _offline():  # huggingface_hub reads HF_HUB_OFFLINE when first imported
                import torch
                from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise BackendUnavailable(
                f"the torch backend needs torch and sentence-transformers ({exc.name} is missing): "
                "pip install -e '.[torch]'"
            ) from exc
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1 or None, got {threads}")
        self._dir = Path(model_dir).resolve()
        if not self._dir.is_dir():
            raise EmbeddingError(f"model directory not found: {self._dir}")
        require_device(torch, device, "embedding.device")
        self._torch: Any = torch
        self._threads = threads or os.cpu_count() or 1
        self._batch_size = batch_size
        self._fingerprint = f"st:{self._dir.name}:{_config_hash(self._dir)}"
        self._model_id = model_id_of(weights_sha256(self._dir), pooling_of(self._dir))
        try:
            with _offline(), quiet_transformers():
                self._model: Any = SentenceTransformer(str(self._dir), device=device, local_files_only=True)
        except Exception as exc:  # sentence-transformers/transformers raise many types
            raise EmbeddingError(f"cannot load sentence-transformers model from {self._dir}: {exc}") from exc
        self._model.eval()
        dim = self._model.get_embedding_dimension()
        if not dim:
            raise EmbeddingError(f"{self._dir}: the model does not declare its embedding dimension")
        self._dim = int(dim)

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
        """(dim,) unit vector, encoded on a single torch thread."""
        row: Vectors = self._encode([text], threads=1)[0]
        return row

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """(len(texts), dim) unit vectors, encoded on `threads` torch threads."""
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of strings, not a single string")
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return self._encode(list(texts), threads=self._threads)

    def _encode(self, texts: list[str], threads: int) -> Vectors:
        torch = self._torch
        with _TORCH_LOCK:
            previous = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                with torch.inference_mode():
                    vectors = self._model.encode(
                        texts,
                        batch_size=self._batch_size,
                        show_progress_bar=False,
                        convert_to_numpy=True,
                        normalize_embeddings=True,
                    )
            except Exception as exc:
                raise EmbeddingError(f"sentence-transformers encoding failed: {exc}") from exc
            finally:
                torch.set_num_threads(previous)
        out = np.asarray(vectors, dtype=np.float32).reshape(len(texts), self._dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: Vectors = (out / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit


def require_device(torch: Any, device: str, key: str) -> None:
    """BackendUnavailable when the config key `key` asks for a GPU this torch cannot see."""
    if device != "cpu" and not torch.cuda.is_available():
        raise BackendUnavailable(f"config key '{key}' asks for {device!r}, but torch {torch.__version__} sees no "
                                 f"CUDA GPU here; use 'cpu'")


def _config_hash(model_dir: Path) -> str:
    """Short, stable hash of the weight files' names and sizes plus the model's config files."""
    digest = hashlib.sha256()
    for path in weights_files(model_dir):
        digest.update(f"{path.name}:{path.stat().st_size}\0".encode())
    for name in _CONFIG_FILES:
        path = model_dir / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """HF_HUB_OFFLINE=1 while loading, so nothing is fetched even if a name is not a local path."""
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: "1" for k in keys})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
