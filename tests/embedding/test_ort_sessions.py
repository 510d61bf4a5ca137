"""A session loaded from the saved optimized graph makes the vectors an optimized-on-start session makes, bit for
bit, and a damaged or unwritable cache costs only the time it saved."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnxruntime
import pytest

from evidex.embedding import OnnxEmbedder, default_model_dir, onnx_cache_dir
from evidex.embedding.export_dir import MODEL_FILE
from evidex.embedding.ort_sessions import _plain, optimized_path

TEXTS = ["", "rotate the transit key", "Kubernetes pods restart when their liveness probe fails " * 40,
         "Größe ändern", "ノード", "etcd snapshot save /backup/etcd.db"]


@pytest.fixture
def export_copy(tmp_path: Path, cache_dir: Path, embedder: object) -> Path:
    """A private copy of the default export (the session fixture `embedder` has built it), without saved graphs."""
    source = onnx_cache_dir(default_model_dir(), cache_dir)
    target = tmp_path / "export"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.optimized-*"))
    return target


def _plain_vectors(export: Path) -> np.ndarray:
    session = _plain(onnxruntime, export / MODEL_FILE, 1)
    embedder = OnnxEmbedder(export, threads=1, query_threads=1)
    embedder._query_session = embedder._document_session = session  # the session made the way it was before
    return embedder.embed_documents(TEXTS)


def test_the_saved_graph_makes_the_same_vectors(export_copy: Path) -> None:
    saved = optimized_path(onnxruntime, export_copy / MODEL_FILE)
    first = OnnxEmbedder(export_copy, threads=2)  # optimizes and saves
    assert saved.is_file()
    assert [p.name for p in export_copy.iterdir() if p.name.endswith(".tmp")] == []
    vectors = first.embed_documents(TEXTS)
    again = OnnxEmbedder(export_copy, threads=2).embed_documents(TEXTS)  # loads the saved graph
    assert np.array_equal(vectors, again)
    assert np.array_equal(vectors, _plain_vectors(export_copy))
    assert np.array_equal(OnnxEmbedder(export_copy).embed_query(TEXTS[1]), vectors[1])


def test_a_damaged_saved_graph_is_ignored(export_copy: Path) -> None:
    expected = _plain_vectors(export_copy)
    optimized_path(onnxruntime, export_copy / MODEL_FILE).write_bytes(b"half a file")
    assert np.array_equal(OnnxEmbedder(export_copy, threads=1).embed_documents(TEXTS), expected)


def test_a_graph_that_cannot_be_saved_costs_only_time(export_copy: Path) -> None:
    """Where the saved graph cannot be written (here a folder holds its name), the session is made as before."""
    expected = _plain_vectors(export_copy)
    saved = optimized_path(onnxruntime, export_copy / MODEL_FILE)
    saved.unlink(missing_ok=True)
    saved.mkdir()
    assert np.array_equal(OnnxEmbedder(export_copy, threads=1).embed_documents(TEXTS), expected)
    assert [p.name for p in export_copy.iterdir() if p.name.endswith(".tmp")] == []
