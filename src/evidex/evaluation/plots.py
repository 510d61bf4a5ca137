"""Reliability diagrams for `evidex eval --plots DIR`: one PNG per pipeline whose report has agent signals, the
stated confidence against how often the answer was complete, so a reader sees at a glance where the probability
is too sure or too shy. matplotlib is an optional extra (`pip install 'evidex[plots]'`); it is imported only
here, and only when a plot is asked for.

    evidex eval --corpus docs --questions q.jsonl --pipelines full --plots plots/
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from evidex.errors import BackendUnavailable

INSTALL = "pip install 'evidex[plots]'"


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display is needed or wanted
        import matplotlib.pyplot as plt
    except ImportError:
        raise BackendUnavailable(f"--plots needs matplotlib: {INSTALL}") from None
    return plt


def require_plots() -> None:
    """Fail now, before a run that may take minutes, when matplotlib is missing (`BackendUnavailable` names the
    install command)."""
    _pyplot()


def write_reliability_diagrams(report: dict[str, Any], folder: Path) -> list[Path]:
    """Write `reliability-<pipeline>.png` into `folder` (made if missing) for each pipeline of an `evaluate`
    report with agent signals; returns the files written."""
    plt = _pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, row in report["pipelines"].items():
        signals = row.get("signals")
        if not signals or not signals.get("confidence_reliability"):
            continue
        points = [(s, t, n) for n, s, t in signals["confidence_reliability"] if n]
        fig, ax = plt.subplots(figsize=(4.5, 4.5), dpi=100)
        ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfectly calibrated")
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", color="tab:blue", label=name)
            for s, t, n in points:
                ax.annotate(str(n), (s, t), textcoords="offset points", xytext=(4, -10), fontsize=7)
        ece = signals.get("confidence_ece")
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="stated confidence", ylabel="share of answers complete",
               title=f"{name}: ECE {ece if ece is not None else 'n/a'}, {signals['questions']} questions")
        ax.legend(loc="upper left", fontsize=8)
        path = folder / f"reliability-{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
        fig.savefig(path, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written
