"""Which model a local sentence-transformers directory holds: the sha256 of its weight files, its pooling, and
the `model_id` every build of it (ONNX int8, torch on a CPU or a GPU) shares."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from evidex.errors import EmbeddingError

_SHA_CACHE: dict[tuple[tuple[str, int, int], ...], str] = {}


def weights_files(model_dir: Path) -> list[Path]:
    """The weight files of a local model directory (safetensors preferred), sorted by name."""
    for pattern in ("*.safetensors", "pytorch_model*.bin"):
        found = sorted(p for p in model_dir.glob(pattern) if p.is_file())
        if found:
            return found
    raise EmbeddingError(
        f"no model weights (*.safetensors or pytorch_model*.bin) in {model_dir}; "
        "point model_dir at a local sentence-transformers model directory"
    )


def model_id_of(weights_sha: str, pooling: str = "mean") -> str:
    """An embedder's `model_id`: its source weights, which every build of the model shares, and how token vectors
    become one (sentence-transformers' pooling: the same weights pooled by their CLS token make other vectors).
    Mean pooling, the only one the ONNX backend builds, is left unnamed: ids recorded before pooling was part of
    them stay valid."""
    return f"weights:{weights_sha[:16]}" + ("" if pooling == "mean" else f"+pooling:{pooling}")


def pooling_of(model_dir: Path) -> str:
    """The pooling a sentence-transformers model directory declares (`1_Pooling/config.json`; mean when it
    declares none, as sentence-transformers assumes): its enabled modes, "+"-joined."""
    config = read_json(Path(model_dir) / "1_Pooling" / "config.json")
    modes = sorted(k.removeprefix("pooling_mode_").removesuffix("_tokens").removesuffix("_token")
                   for k, v in config.items() if k.startswith("pooling_mode_") and v is True)
    return "+".join(modes) or "mean"


def weights_sha256(model_dir: Path) -> str:
    """sha256 over the weight files' names and bytes: identifies the source model (memoised per process)."""
    files = weights_files(Path(model_dir).resolve())
    key = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    if key not in _SHA_CACHE:
        _SHA_CACHE[key] = _hash_files(files)
    return _SHA_CACHE[key]


def _hash_files(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        _feed(digest, path)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    _feed(digest, path)
    return digest.hexdigest()


def _feed(digest: Any, path: Path) -> None:
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)


def read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}
