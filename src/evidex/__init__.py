"""evidex: evidence-aware retrieval for engineering knowledge bases.

The public Python API. Everything a program needs to ingest documents, ask for a decision and read it is
importable from here; the modules behind these names are private and may move.

    from datetime import UTC, datetime
    from evidex import Engine, Principal, Result, load_config

    config = load_config("evidex.toml")          # or Config() for the defaults
    with Engine.open(config) as engine:
        report = engine.ingest(["docs/"], label="first import")
        result = engine.search_with_reasoning(
            "how do we rotate the signing key?",
            principal=Principal.of("alice", ["engineering-read"]),
            retrieved_at=datetime.now(UTC),
        )
        for source in result["evidence"]:              # admitted evidence, grouped by source
            for chunk in source["chunks"]:
                print(chunk["citation"], chunk["evidence_family"])
        print(result["decision"]["recommendation"]["action"])   # proceed, re-query or stop
        typed = Result.model_validate(result)                     # the same, as typed models

Names load on first use (PEP 562): `import evidex` and `evidex.__version__` cost a few milliseconds, not the
engine's imports (numpy, the stores, the pipeline).
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    __version__: str
    from evidex.admission.gate import Principal
    from evidex.admission.verification import Verification
    from evidex.config import Config, load_config
    from evidex.engine import Engine
    from evidex.errors import (
        AccessDenied,
        BackendUnavailable,
        ConfigError,
        EmbeddingError,
        EvidexError,
        IngestError,
        StageError,
        StoreError,
    )
    from evidex.evidence.plan import EvidencePlan
    from evidex.pipeline import SearchOutcome, SearchRequest
    from evidex.result_models import Result
    from evidex.types import (
        BatchInfo,
        Candidate,
        Chunk,
        DeadLetter,
        IngestReport,
        Provenance,
        RetrievalMode,
        SearchFilters,
    )

# Each public name and the module that defines it.
_HOMES: dict[str, str] = {
    "Engine": "evidex.engine",
    "Config": "evidex.config",
    "load_config": "evidex.config",
    "Principal": "evidex.admission.gate",
    "SearchRequest": "evidex.pipeline",
    "SearchOutcome": "evidex.pipeline",
    "EvidencePlan": "evidex.evidence.plan",
    "RetrievalMode": "evidex.types",
    "SearchFilters": "evidex.types",
    "Candidate": "evidex.types",
    "Chunk": "evidex.types",
    "Provenance": "evidex.types",
    "IngestReport": "evidex.types",
    "BatchInfo": "evidex.types",
    "DeadLetter": "evidex.types",
    "Verification": "evidex.admission.verification",
    "Result": "evidex.result_models",
    "EvidexError": "evidex.errors",
    "ConfigError": "evidex.errors",
    "BackendUnavailable": "evidex.errors",
    "IngestError": "evidex.errors",
    "StoreError": "evidex.errors",
    "EmbeddingError": "evidex.errors",
    "StageError": "evidex.errors",
    "AccessDenied": "evidex.errors",
}

__all__ = [
    "AccessDenied",
    "BackendUnavailable",
    "BatchInfo",
    "Candidate",
    "Chunk",
    "Config",
    "ConfigError",
    "DeadLetter",
    "EmbeddingError",
    "Engine",
    "EvidencePlan",
    "EvidexError",
    "IngestError",
    "IngestReport",
    "Principal",
    "Provenance",
    "Result",
    "RetrievalMode",
    "SearchFilters",
    "SearchOutcome",
    "SearchRequest",
    "StageError",
    "StoreError",
    "Verification",
    "__version__",
    "load_config",
]


def _installed_version() -> str:
    """The one version: pyproject.toml's, as installed (importlib.metadata costs ~45 ms: read on first use)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("evidex")
    except PackageNotFoundError:  # a source tree on sys.path that was never installed
        return "0.0.0+unknown"


def __getattr__(name: str) -> _typing.Any:
    if name == "__version__":
        value: _typing.Any = _installed_version()
        globals()[name] = value
        return value
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'evidex' has no attribute {name!r}")
    value = getattr(_importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
