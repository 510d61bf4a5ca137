"""The export directory every embedding model is served from, whoever built it (the torch export, or the
default model's torch-free build in `onnx_graph`): its files and manifest, how it is written atomically under a
lock, and the int8 quantisation recipe both builders share.

Layout of an export directory::

    model-int8.onnx   inputs input_ids/attention_mask[/token_type_ids], output last_hidden_state
    tokenizer.json    the source model's fast tokenizer
    manifest.json     source dir, source weights sha256, format version, dim, max_seq_length
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evidex.errors import EmbeddingError

EXPORT_FORMAT = "evidex-onnx-int8"
# 2: the manifest records the exported model's own sha256, and every fingerprint holds it. Version 1 named only
# the source weights, so an export made before the recipe kept the sensitive MatMuls in fp32 went on serving
# (and keying the embedding cache) under the same fingerprint as the exports made after.
EXPORT_FORMAT_VERSION = 2
MODEL_FILE = "model-int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "manifest.json"
DEFAULT_MAX_SEQ_LENGTH = 256


def read_manifest(onnx_dir: Path) -> dict[str, Any]:
    """The manifest of an export directory; EmbeddingError when missing or unreadable."""
    path = onnx_dir / MANIFEST_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise EmbeddingError(f"{onnx_dir} is not an evidex ONNX export (no {MANIFEST_FILE})") from exc
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise EmbeddingError(f"{path}: expected a JSON object")
    return data


def is_valid_export(onnx_dir: Path, source_sha256: str) -> bool:
    """True when onnx_dir holds a complete export of the weights with this sha256."""
    try:
        manifest = read_manifest(onnx_dir)
    except EmbeddingError:
        return False
    return (
        manifest.get("format_version") == EXPORT_FORMAT_VERSION
        and manifest.get("source_weights_sha256") == source_sha256
        and isinstance(manifest.get("model_sha256"), str)
        and _has_files(onnx_dir)
    )


def _has_files(onnx_dir: Path) -> bool:
    return (onnx_dir / MODEL_FILE).is_file() and (onnx_dir / TOKENIZER_FILE).is_file()


@contextlib.contextmanager
def atomic_directory(out_dir: Path) -> Iterator[Path]:
    """A temporary sibling of `out_dir` to build in; when the block succeeds it replaces `out_dir` in one
    rename, and when it fails `out_dir` is left as it was. The caller decides whether `out_dir` may go."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        yield tmp
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check_replaceable(out_dir: Path) -> None:
    """An outdated evidex export or an empty directory may be replaced; anything else may not."""
    if out_dir.is_dir() and not any(out_dir.iterdir()):
        return
    try:
        ours = read_manifest(out_dir).get("format") == EXPORT_FORMAT
    except EmbeddingError:
        ours = False
    if not ours:
        raise EmbeddingError(f"{out_dir} exists and is not an evidex ONNX export; choose another directory")


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    with path.open("a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _sensitive_matmuls(fp32_path: Path, num_layers: int) -> list[str]:
    """MatMuls left in fp32: the feed-forward output projections of the first half of the layers.

    Per-tensor activation quantization there costs the most accuracy (large activation outliers);
    keeping them fp32 lifts the worst-case cosine to the torch model on very short texts from about
    0.97 to 0.98 and the mean on paragraphs from 0.995 to 0.997, for about 15% more time per text.
    """
    import onnx

    pattern = re.compile(r"/layer\.(\d+)/output/dense/MatMul$")
    graph = onnx.load(str(fp32_path), load_external_data=False).graph
    first_half = (num_layers + 1) // 2
    return [
        node.name
        for node in graph.node
        if node.op_type == "MatMul" and (m := pattern.search(node.name)) and int(m.group(1)) < first_half
    ]


@contextlib.contextmanager
def quiet_quantization_hint() -> Iterator[None]:
    """quantize_dynamic logs a pre-processing hint on the root logger; it does not apply here."""

    def drop_hint(record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()

    root = logging.getLogger()
    root.addFilter(drop_hint)
    try:
        yield
    finally:
        root.removeFilter(drop_hint)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    for pkg in ("torch", "transformers", "onnx", "onnxruntime"):
        with contextlib.suppress(PackageNotFoundError):
            out[pkg] = version(pkg)
    return out
