"""One-time export of a sentence-transformers model to a dynamic-int8 ONNX model.

Needs torch, transformers and onnx (``pip install -e '.[torch]'``); the result runs with
onnxruntime and tokenizers alone (see :mod:`evidex.embedding.onnx`).

Layout of an export directory::

    model-int8.onnx   inputs input_ids/attention_mask[/token_type_ids], output last_hidden_state
    tokenizer.json    the source model's fast tokenizer
    manifest.json     source dir, source weights sha256, format version, dim, max_seq_length
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidex.embedding.export_dir import (
    DEFAULT_MAX_SEQ_LENGTH,
    EXPORT_FORMAT,
    EXPORT_FORMAT_VERSION,
    MANIFEST_FILE,
    MODEL_FILE,
    TOKENIZER_FILE,
    _check_replaceable,
    _exclusive_lock,
    _has_files,
    _sensitive_matmuls,
    _versions,
    atomic_directory,
    is_valid_export,
    quiet_quantization_hint,
    read_manifest,
)
from evidex.embedding.onnx_graph import build_from_packaged_graph, has_packaged_graph
from evidex.embedding.weights import file_sha256, read_json
from evidex.embedding.weights import model_id_of as model_id_of  # re-exported: a model's identity
from evidex.embedding.weights import pooling_of as pooling_of
from evidex.embedding.weights import weights_files as weights_files
from evidex.embedding.weights import weights_sha256 as weights_sha256
from evidex.errors import BackendUnavailable, EmbeddingError

OPSET_VERSION = 17
_TORCH_HINT = "pip install -e '.[torch]'"


def adopt_format_1(onnx_dir: Path, source_sha256: str) -> bool:
    """Name a complete format-1 export of these weights by its own bytes (format 2), in place. For a machine
    without torch, which cannot rebuild it: its vectors then key their own embedding cache entries, apart from
    any other recipe's. False when `onnx_dir` holds no such export. Under the export's lock, so a concurrent
    adoption or rebuild is seen, not overwritten."""
    with _exclusive_lock(onnx_dir.parent / f".{onnx_dir.name}.lock"):
        if is_valid_export(onnx_dir, source_sha256):  # another process got there first
            return True
        try:
            manifest = read_manifest(onnx_dir)
        except EmbeddingError:
            return False
        if manifest.get("format_version") != 1 or manifest.get("source_weights_sha256") != source_sha256 \
                or not _has_files(onnx_dir):
            return False
        manifest.update(format_version=EXPORT_FORMAT_VERSION, model_sha256=file_sha256(onnx_dir / MODEL_FILE),
                        adopted_from_format=1)
        fd, tmp = tempfile.mkstemp(dir=onnx_dir, prefix=MANIFEST_FILE, suffix=".tmp")
        os.fchmod(fd, 0o644)  # as readable as the export it names (mkstemp creates 0600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(manifest, indent=2) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, onnx_dir / MANIFEST_FILE)
        return True


def export_onnx_int8(model_dir: Path, out_dir: Path) -> Path:
    """Export model_dir to out_dir (atomically, under a file lock); no-op when already there."""
    model_dir = Path(model_dir).resolve()
    out_dir = Path(out_dir)
    if not model_dir.is_dir():
        raise EmbeddingError(f"model directory not found: {model_dir}")
    source_sha = weights_sha256(model_dir)
    if is_valid_export(out_dir, source_sha):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(out_dir.parent / f".{out_dir.name}.lock"):
        if is_valid_export(out_dir, source_sha):  # another process finished it while we waited
            return out_dir
        if out_dir.exists():
            _check_replaceable(out_dir)
        with atomic_directory(out_dir) as tmp:
            # The default model is built from its packaged graph: the same bytes as _build's, without torch.
            (build_from_packaged_graph if has_packaged_graph(source_sha) else _build)(model_dir, source_sha, tmp)
    return out_dir


def _check_pooling(model_dir: Path) -> None:
    if pooling_of(model_dir) != "mean":
        raise EmbeddingError(
            f"{model_dir} does not use mean pooling; the ONNX backend supports mean pooling only "
            "(use backend='torch' for this model)"
        )


def _build(model_dir: Path, source_sha: str, tmp: Path) -> None:
    """Write model-int8.onnx, tokenizer.json and manifest.json into tmp (torch exports, onnxruntime quantises)."""
    tools = _export_tools()
    _check_pooling(model_dir)
    max_seq = int(
        read_json(model_dir / "sentence_bert_config.json").get("max_seq_length") or DEFAULT_MAX_SEQ_LENGTH
    )
    tokenizer, model = _load_transformer(model_dir, tools)
    _write_tokenizer(model_dir, tokenizer, tmp)
    input_names, keep_fp32 = _export_int8(model_dir, model, tokenizer, tmp, tools)
    manifest = {
        "format": EXPORT_FORMAT,
        "format_version": EXPORT_FORMAT_VERSION,
        "source_model_dir": str(model_dir),
        "source_weights_sha256": source_sha,
        "dim": int(model.config.hidden_size),
        "max_seq_length": max_seq,
        "pooling": "mean",
        "inputs": input_names,
        "model_sha256": file_sha256(tmp / MODEL_FILE),  # what the fingerprint names: this export (as sha256sum)
        "quantization": {
            "method": "dynamic",
            "weight_type": "QInt8",
            "per_channel": True,
            "fp32_nodes": keep_fp32,
        },
        "exported_with": _versions(),
    }
    (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    os.chmod(tmp, 0o755)  # mkdtemp creates 0700


@dataclass(frozen=True)
class _ExportTools:
    """The export's heavy imports, made once: torch, transformers' auto classes, onnxruntime's quantiser."""

    torch: Any
    auto_model: Any
    auto_tokenizer: Any
    quantize_dynamic: Any
    qint8: Any


def _export_tools() -> _ExportTools:
    try:
        import torch
        from onnxruntime.quantization import (  # type: ignore[import-untyped,unused-ignore]
            QuantType,
            quantize_dynamic,
        )
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise BackendUnavailable(
            f"exporting the ONNX model needs torch and transformers ({exc.name} is missing): {_TORCH_HINT}"
        ) from exc
    return _ExportTools(torch, AutoModel, AutoTokenizer, quantize_dynamic, QuantType.QInt8)


def _load_transformer(model_dir: Path, tools: _ExportTools) -> tuple[Any, Any]:
    """The tokenizer and the transformer (eager attention, in eval mode) of `model_dir`, offline."""
    try:
        with quiet_transformers():
            tokenizer = tools.auto_tokenizer.from_pretrained(str(model_dir), local_files_only=True)
            model = tools.auto_model.from_pretrained(str(model_dir), local_files_only=True,
                                                     attn_implementation="eager")
    except Exception as exc:  # transformers raises many types for a bad directory
        raise EmbeddingError(f"cannot load the transformer from {model_dir}: {exc}") from exc
    model.eval()
    return tokenizer, model


def _write_tokenizer(model_dir: Path, tokenizer: Any, tmp: Path) -> None:
    """The source's tokenizer.json as it is, else the fast tokenizer saved; a slow-only tokenizer cannot run on
    `tokenizers` alone, so it is an error."""
    if (model_dir / TOKENIZER_FILE).is_file():
        shutil.copyfile(model_dir / TOKENIZER_FILE, tmp / TOKENIZER_FILE)
    elif getattr(tokenizer, "backend_tokenizer", None) is not None:
        tokenizer.backend_tokenizer.save(str(tmp / TOKENIZER_FILE))
    else:
        raise EmbeddingError(f"{model_dir} has no fast tokenizer (tokenizer.json); cannot export")


def _export_int8(model_dir: Path, model: Any, tokenizer: Any, tmp: Path,
                 tools: _ExportTools) -> tuple[list[str], list[str]]:
    """Trace the model to an fp32 ONNX graph (dynamic batch and sequence), then quantise it to MODEL_FILE with
    dynamic per-channel int8 weights, the sensitive MatMuls kept fp32. Returns the graph's input names and
    those MatMuls; the fp32 graph is deleted."""
    torch = tools.torch
    sample = tokenizer(["an example sentence for tracing", "short"], padding=True, return_tensors="pt")
    input_names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    fp32_path = tmp / "model-fp32.onnx"
    dynamic = {n: {0: "batch", 1: "sequence"} for n in [*input_names, "last_hidden_state"]}
    wrapper = _last_hidden_state_module(model, input_names, torch)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings about python control flow are expected
            torch.onnx.export(
                wrapper,
                tuple(sample[n] for n in input_names),
                str(fp32_path),
                input_names=input_names,
                output_names=["last_hidden_state"],
                dynamic_axes=dynamic,
                opset_version=OPSET_VERSION,
                do_constant_folding=True,
                dynamo=False,
            )
        keep_fp32 = _sensitive_matmuls(fp32_path, int(getattr(model.config, "num_hidden_layers", 0)))
        with quiet_quantization_hint():
            tools.quantize_dynamic(
                model_input=fp32_path,
                model_output=tmp / MODEL_FILE,
                per_channel=True,
                reduce_range=False,
                weight_type=tools.qint8,
                nodes_to_exclude=keep_fp32,
            )
    except Exception as exc:
        raise EmbeddingError(f"ONNX export of {model_dir} failed: {exc}") from exc
    finally:
        fp32_path.unlink(missing_ok=True)
    return input_names, keep_fp32


_QUIET = threading.RLock()


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No "Loading weights: 100%|████| 103/103" bar on the terminal of `make`, `setup` or an ingest (the weights
    are local and load in well under a second); an application's own setting is restored afterwards. The
    setting is global: threads loading models take turns."""
    from transformers.utils import logging as transformers_logging

    with _QUIET:
        was_enabled = transformers_logging.is_progress_bar_enabled()
        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        try:
            yield
        finally:
            if was_enabled:
                transformers_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


def _last_hidden_state_module(model: Any, input_names: list[str], torch: Any) -> Any:
    """A torch module mapping positional inputs to last_hidden_state (what the exporter traces)."""

    class LastHiddenState(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(input_names, args, strict=True))).last_hidden_state

    return LastHiddenState()
