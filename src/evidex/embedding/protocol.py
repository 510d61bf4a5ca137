"""The embedder contract: every backend turns text into L2-normalised float32 vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit vectors. `fingerprint` changes whenever the vectors would change (it keys the
    embeddings cache); `model_id` names the model they come from, whatever the build: the int8 ONNX export
    and torch fp32 (on a CPU or a GPU) of one model agree closely and may share an index, two models may not."""

    @property
    def fingerprint(self) -> str: ...

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """(len(texts), dim) float32, each row L2-normalised."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """(dim,) float32, L2-normalised. Must be cheap: called on every search."""
        ...
