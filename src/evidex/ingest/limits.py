"""Per-document bounds of an ingest: one document too large, too slow or too deeply nested to read becomes a dead
letter with the reason, and the rest of the batch goes on.

The readers are linear in their input; the bounds are what keeps one hostile or broken file from holding the
whole batch anyway (a 2 GB export, a reader that meets a shape nobody timed). The time bound interrupts the
reading of one document with a timer signal, so it holds in pure-Python code and in regular expressions alike;
where no signal can be used (a thread other than the main one) a document that took too long is still set aside
when it is done.

>>> limits = DocumentLimits(max_bytes=1_000, timeout_s=5.0)
>>> limits.size_problem(4_096)
'document of 4096 bytes is over [ingest] max_document_bytes = 1000'
>>> with limits.deadline("chunk"):
...     pieces = "a b c".split()
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from evidex.config.sections import IngestConfig

DEFAULT_MAX_BYTES = IngestConfig.max_document_bytes
DEFAULT_TIMEOUT_S = IngestConfig.document_timeout_s
MAX_NESTING = 64  # front matter or a JSON record nested deeper than this is not a document's metadata


class DocumentTimeout(Exception):
    """Reading or chunking one document took longer than its bound (`phase` says which)."""

    def __init__(self, phase: str, timeout_s: float) -> None:
        super().__init__(f"{phase} took longer than [ingest] document_timeout_s = {timeout_s:g} s")
        self.reason = str(self)


@dataclass(frozen=True)
class DocumentLimits:
    """`max_bytes`: the largest document read (0: no bound); `timeout_s`: the longest one document's reading or
    chunking may take (0: no bound); `follow_symlinks_outside`: whether reading may leave the folder ingested."""

    max_bytes: int = DEFAULT_MAX_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S
    follow_symlinks_outside: bool = False  # read a file a symbolic link leads to outside the folder ingested

    @classmethod
    def from_config(cls, section: IngestConfig) -> DocumentLimits:
        """From the `[ingest]` section's `max_document_bytes` and `document_timeout_s`."""
        return cls(section.max_document_bytes, section.document_timeout_s, section.follow_symlinks_outside)

    def size_problem(self, size: int) -> str | None:
        """The dead letter's reason when a document of `size` bytes is over the bound, else None."""
        if self.max_bytes and size > self.max_bytes:
            return f"document of {size} bytes is over [ingest] max_document_bytes = {self.max_bytes}"
        return None

    @contextmanager
    def deadline(self, phase: str) -> Iterator[None]:
        """Raise `DocumentTimeout` if the block runs past `timeout_s` (interrupting it in the main thread)."""
        if not self.timeout_s:
            yield
            return
        started = time.perf_counter()
        if threading.current_thread() is not threading.main_thread():
            yield
        else:
            def expire(signum: int, frame: FrameType | None) -> None:
                raise DocumentTimeout(phase, self.timeout_s)

            previous = signal.signal(signal.SIGALRM, expire)
            # Again every 0.1 s after the bound: a reader that swallows the first interruption meets the next one.
            signal.setitimer(signal.ITIMER_REAL, self.timeout_s, 0.1)
            try:
                yield
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
        if time.perf_counter() - started > self.timeout_s:
            raise DocumentTimeout(phase, self.timeout_s)


NO_LIMITS = DocumentLimits(0, 0.0, follow_symlinks_outside=True)
