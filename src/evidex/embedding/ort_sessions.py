"""onnxruntime sessions that start fast: the optimized graph is saved beside the model once and loaded as is.

Building a session runs onnxruntime's graph optimizations (fusing the int8 MatMuls, attention and layer norms),
which took most of a CLI call's model load: 0.37-0.52 s of the query session on this project's machine, against
0.09-0.13 s for loading the graph they produce with optimizations off. The first session on a machine saves that
graph (`model-int8.optimized-<key>.onnx`, written to a temporary name and renamed, so a concurrent reader never
sees half a file); later sessions load it. The vectors are the same bit for bit (the same fused graph runs; a
test holds them to it).

An optimized graph may hold choices made for the CPU it was made on, so the file is keyed by the onnxruntime
version, the machine and the CPU's feature flags: another CPU, or another onnxruntime, optimizes anew. A saved
graph that cannot be loaded is ignored and the model is optimized as before. A folder that cannot be written
(a read-only cache) costs the optimization on each start, nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
import threading
from pathlib import Path
from typing import Any

from evidex.errors import EmbeddingError

EXACT_INT8_PRODUCTS = "session.x64quantprecision"  # u8×u8 kernels: no 16-bit saturation on x86 without VNNI
_PROVIDERS = ["CPUExecutionProvider"]


def session(ort: Any, model_path: Path, threads: int) -> Any:
    """An inference session of `model_path` on `threads` intra-op threads (the caller's and threads - 1 workers
    that sleep when idle: spinning ones steal a busy machine's cores). Concurrent run() calls are safe."""
    optimized = optimized_path(ort, model_path)
    if optimized.is_file():
        opts = _options(ort, threads)
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        with contextlib.suppress(Exception):  # damaged or foreign: optimize the model itself below
            return ort.InferenceSession(str(optimized), sess_options=opts, providers=_PROVIDERS)
    opts = _options(ort, threads)
    partial = optimized.with_name(f".{optimized.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    opts.optimized_model_filepath = str(partial)
    try:
        made = ort.InferenceSession(str(model_path), sess_options=opts, providers=_PROVIDERS)
    except Exception:  # onnxruntime raises its own Fail/InvalidGraph types; the folder may be read-only
        partial.unlink(missing_ok=True)
        return _plain(ort, model_path, threads)
    with contextlib.suppress(OSError):
        os.replace(partial, optimized)
    partial.unlink(missing_ok=True)
    return made


def _plain(ort: Any, model_path: Path, threads: int) -> Any:
    try:
        return ort.InferenceSession(str(model_path), sess_options=_options(ort, threads), providers=_PROVIDERS)
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
        raise EmbeddingError(f"cannot load {model_path}: {exc}") from exc


def _options(ort: Any, threads: int) -> Any:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    opts.add_session_config_entry(EXACT_INT8_PRODUCTS, "1")
    return opts


def optimized_path(ort: Any, model_path: Path) -> Path:
    """Where the optimized graph of `model_path` for this onnxruntime and CPU lives (beside the model)."""
    key = hashlib.sha256(f"{ort.__version__}\0{platform.machine()}\0{cpu_flags()}".encode()).hexdigest()[:12]
    return model_path.with_name(f"{model_path.stem}.optimized-{key}.onnx")


@functools.cache
def cpu_flags() -> str:
    """The CPU's feature flags (Linux: /proc/cpuinfo), else what the platform says of the processor."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                return " ".join(sorted(line.partition(":")[2].split()))
    return platform.processor()
