"""One exception tree. Imports nothing from evidex.

    EvidexError
    ├── ConfigError          the operator must fix configuration (file, key, value)
    ├── BackendUnavailable   an optional dependency or service is missing (message says how to install it)
    ├── IngestError          a document or overlay line cannot be loaded (names the file and line)
    ├── StoreError           the index is inconsistent or an operation conflicts (e.g. rollback)
    ├── EmbeddingError       the embedding model cannot be built or loaded
    ├── StageError           a pipeline stage failed; names the stage
    └── AccessDenied         the caller's key or principal is not allowed to act
"""

from __future__ import annotations


class EvidexError(Exception):
    """Root of every error evidex raises on purpose."""


class ConfigError(EvidexError):
    pass


class BackendUnavailable(EvidexError):
    pass


class IngestError(EvidexError):
    def __init__(self, message: str, *, location: str = "") -> None:
        super().__init__(f"{location}: {message}" if location else message)
        self.reason = message
        self.location = location


class StoreError(EvidexError):
    pass


class EmbeddingError(EvidexError):
    pass


class StageError(EvidexError):
    def __init__(self, stage: str, message: str) -> None:
        super().__init__(f"stage {stage!r} failed: {message}")
        self.stage = stage


class AccessDenied(EvidexError):
    pass
