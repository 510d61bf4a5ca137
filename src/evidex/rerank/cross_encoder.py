"""Cross-encoders from a local directory (`evidence.cross_encoder_dir`), in two flavours:

- ONNX (`model.onnx` + `tokenizer.json`, e.g. an Optimum export or `export_onnx` below): onnxruntime and
  tokenizers only, no torch at run time;
- sentence-transformers (a `config.json` model directory): needs torch (`pip install -e '.[torch]'`).

No cross-encoder weights ship with evidex and none are downloaded: point the config at a directory you
have (e.g. ms-marco-MiniLM-L-6-v2). The fused reranker applies it to its top N candidates only.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from evidex.embedding.export_dir import atomic_directory, quiet_quantization_hint
from evidex.embedding.onnx import EXACT_INT8_PRODUCTS
from evidex.embedding.sentence_transformers import require_device
from evidex.errors import BackendUnavailable, ConfigError

ONNX_MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
_EXPORT_FILES = {ONNX_MODEL_FILE, TOKENIZER_FILE, "config.json"}
_CONFIG_KEY = "config key 'evidence.cross_encoder_dir'"
_DEFAULT_MAX_LENGTH = 512


class SentenceTransformerCrossEncoder:
    """`CrossEncoder` protocol on sentence-transformers (torch), loaded from a local directory only."""

    def __init__(self, model_dir: Path, *, max_length: int = 256, device: str = "cpu") -> None:
        if not (model_dir / "config.json").is_file():
            raise ConfigError(f"{_CONFIG_KEY}: {model_dir} has no config.json")
        try:
            import torch
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise BackendUnavailable(f"a cross-encoder needs torch: pip install -e '.[torch]' ({exc})") from None
        require_device(torch, device, "evidence.cross_encoder_device")
        self.name = f"cross-encoder:{model_dir.name}"
        self._model = CrossEncoder(str(model_dir), max_length=max_length, device=device, local_files_only=True)
        self._max_length = max_length
        self._lock = threading.Lock()

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        with self._lock:
            scores = self._model.predict([(query, t) for t in texts], batch_size=32, show_progress_bar=False)
        return [float(s) for s in scores]

    def tokens(self, query: str, texts: Sequence[str]) -> int:
        if not texts:
            return 0
        encoded = self._model.tokenizer([query] * len(texts), list(texts), truncation=True,
                                        max_length=self._max_length)
        return sum(len(ids) for ids in encoded["input_ids"])


class OnnxCrossEncoder:
    """`CrossEncoder` protocol on onnxruntime: a sequence-classification transformer exported to ONNX.

    Each (query, text) pair is one inference on a single-threaded session, so a pair's score never depends
    on the other pairs or on padding; `threads` pairs run in parallel (onnxruntime releases the GIL). The
    score is the relevance logit (with two labels, logit[1] - logit[0]); the reranker normalises it.
    """

    def __init__(self, model_dir: Path, *, threads: int | None = None) -> None:
        for name in (ONNX_MODEL_FILE, TOKENIZER_FILE):
            if not (model_dir / name).is_file():
                raise ConfigError(f"{_CONFIG_KEY}: {model_dir} has no {name}")
        try:
            import onnxruntime  # type: ignore[import-untyped,unused-ignore]
            import tokenizers
        except ImportError as exc:
            raise BackendUnavailable(f"an ONNX cross-encoder needs onnxruntime and tokenizers ({exc})") from None
        self.name = f"cross-encoder:{model_dir.name} (onnx)"
        self._threads = threads or os.cpu_count() or 1
        self._tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / TOKENIZER_FILE))
        self._tokenizer.enable_truncation(max_length=_max_length(model_dir))  # longest first: the text, not the query
        self._tokenizer.no_padding()
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        opts.add_session_config_entry(EXACT_INT8_PRODUCTS, "1")  # an int8 model scores alike on every CPU
        try:
            self._session = onnxruntime.InferenceSession(str(model_dir / ONNX_MODEL_FILE), sess_options=opts,
                                                         providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise ConfigError(f"{_CONFIG_KEY}: cannot load {model_dir / ONNX_MODEL_FILE}: {exc}") from None
        self._inputs = [i.name for i in self._session.get_inputs()]
        unknown = set(self._inputs) - {"input_ids", "attention_mask", "token_type_ids"}
        if unknown:
            raise ConfigError(f"{_CONFIG_KEY}: {model_dir / ONNX_MODEL_FILE} expects inputs {sorted(unknown)}; "
                              "a cross-encoder takes input_ids, attention_mask and token_type_ids")

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        encoded = [self._tokenizer.encode(query, text) for text in texts]
        if self._threads <= 1 or len(encoded) == 1:
            return [self._score_one(e) for e in encoded]
        with ThreadPoolExecutor(max_workers=min(self._threads, len(encoded)),
                                thread_name_prefix="evidex-cross-encoder") as pool:
            return list(pool.map(self._score_one, encoded))

    def tokens(self, query: str, texts: Sequence[str]) -> int:
        return sum(len(self._tokenizer.encode(query, text).ids) for text in texts)

    def _score_one(self, encoding: Any) -> float:
        ids = np.asarray([encoding.ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                 "token_type_ids": np.asarray([encoding.type_ids], dtype=np.int64)}
        (logits,) = self._session.run(None, {n: feeds[n] for n in self._inputs})[:1]
        row = np.asarray(logits, dtype=np.float64).reshape(-1)
        return float(row[0] if row.size == 1 else row[-1] - row[0])


def load_cross_encoder(model_dir: Path, device: str = "cpu") -> SentenceTransformerCrossEncoder | OnnxCrossEncoder:
    """The cross-encoder in `model_dir`: ONNX (on the CPU) when it holds a model.onnx, else sentence-transformers
    on `device`."""
    if not model_dir.is_dir():
        raise ConfigError(f"{_CONFIG_KEY}: {model_dir} is not a directory")
    if (model_dir / ONNX_MODEL_FILE).is_file():
        if device != "cpu":
            raise ConfigError(f"{_CONFIG_KEY}: {model_dir} is an ONNX model, which runs on the CPU; "
                              f"cross_encoder_device {device!r} needs a sentence-transformers directory")
        return OnnxCrossEncoder(model_dir)
    return SentenceTransformerCrossEncoder(model_dir, device=device)


def _max_length(model_dir: Path) -> int:
    """The model's longest input: its position embeddings, or the tokenizer's stated limit if smaller."""
    limits = [_DEFAULT_MAX_LENGTH]
    for name, key in (("config.json", "max_position_embeddings"), ("tokenizer_config.json", "model_max_length")):
        try:
            value = json.loads((model_dir / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, int) and 0 < value < 100_000:  # tokenizers store 1e30 for "no limit"
            limits.append(value)
    return min(limits)


def export_onnx(model_dir: Path, out_dir: Path, *, int8: bool = False) -> Path:
    """Export a local transformers / sentence-transformers cross-encoder to `out_dir` (model.onnx with its
    tokenizer.json and config.json), so it can rerank without torch. Needs torch and transformers once.
    `int8`: dynamically quantised weights (smaller and faster on CPU; check its ranking on your data)."""
    if out_dir.exists() and not {p.name for p in out_dir.iterdir()} <= _EXPORT_FILES:
        raise ConfigError(f"{out_dir} exists and is not a cross-encoder export; choose another directory")
    try:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
    except ImportError as exc:
        raise BackendUnavailable(f"exporting a cross-encoder needs torch: pip install -e '.[torch]' ({exc})"
                                 ) from None
    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), local_files_only=True,
                                                                   attn_implementation="eager").eval()
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except (OSError, ValueError) as exc:  # transformers' errors for a directory that holds no such model
        raise ConfigError(f"cannot load a cross-encoder from {model_dir}: {exc}") from None
    sample = tokenizer(["a query", "another query"], ["a passage to score", "short"], padding=True,
                       return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args, strict=True))).logits

    with atomic_directory(out_dir) as tmp, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about python control flow are expected
        torch.onnx.export(Logits(), tuple(sample[n] for n in names), str(tmp / ONNX_MODEL_FILE),
                          input_names=names, output_names=["logits"],
                          dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in names}, "logits": {0: "batch"}},
                          opset_version=17, do_constant_folding=True, dynamo=False)
        if int8:
            from onnxruntime.quantization import (  # type: ignore[import-untyped,unused-ignore]
                QuantType,
                quantize_dynamic,
            )

            fp32 = tmp / "model-fp32.onnx"
            (tmp / ONNX_MODEL_FILE).rename(fp32)
            with quiet_quantization_hint():
                quantize_dynamic(model_input=fp32, model_output=tmp / ONNX_MODEL_FILE, per_channel=True,
                                 weight_type=QuantType.QInt8)
            fp32.unlink()
        tokenizer.backend_tokenizer.save(str(tmp / TOKENIZER_FILE))
        shutil.copyfile(model_dir / "config.json", tmp / "config.json")
    return out_dir
