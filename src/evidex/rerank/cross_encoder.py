"""A cross-encoder from a local sentence-transformers directory (`evidence.cross_encoder_dir`).

No cross-encoder weights ship with evidex and none are downloaded: point the config at a directory you
have (e.g. an exported ms-marco-MiniLM-L-6-v2). The fused reranker applies it to its top N candidates only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from evidex.errors import BackendUnavailable, ConfigError


class SentenceTransformerCrossEncoder:
    """`CrossEncoder` protocol on sentence-transformers (torch), loaded from a local directory only."""

    def __init__(self, model_dir: Path, *, max_length: int = 256) -> None:
        if not (model_dir / "config.json").is_file():
            raise ConfigError(f"config key 'evidence.cross_encoder_dir': {model_dir} has no config.json")
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise BackendUnavailable(f"a cross-encoder needs torch: pip install 'evidex[torch]' ({exc})") from None
        self.name = f"cross-encoder:{model_dir.name}"
        self._model = CrossEncoder(str(model_dir), max_length=max_length, device="cpu",
                                   local_files_only=True)
        self._lock = threading.Lock()

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        with self._lock:
            scores = self._model.predict([(query, t) for t in texts], batch_size=16, show_progress_bar=False)
        return [float(s) for s in scores]
