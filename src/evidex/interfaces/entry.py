"""The `evidex` console entry point. It sets process-wide knobs before numpy or onnxruntime load."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub
    # One BLAS thread: a query's matrix-vector product gains nothing from a second thread, whose spinning
    # takes the other core from SQLite's full-text search (measured by `evidex bench`).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if sys.argv[1:] in (["--version"], ["-V"]):  # what `evidex --version` prints, without loading every command
        from evidex import __version__

        print(f"evidex {__version__}")
        return
    from evidex.interfaces.cli import app

    app()
