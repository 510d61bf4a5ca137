"""`evidex bench --plots DIR`: the cost of each figure against the index's size (`bench_scale`), as one PNG.

matplotlib comes with the `plots` extra (`pip install 'evidex[plots]'`); without it the command says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evidex.errors import BackendUnavailable

PLOT_FILE = "bench-cost-vs-size.png"


def write_plots(sizes: dict[str, Any], folder: Path) -> Path:
    """Latency p50 / p95 per mode, peak RSS and build time against the number of chunks (log axes)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise BackendUnavailable(f"--plots needs matplotlib: pip install 'evidex[plots]' ({exc})") from None
    ns = sorted(int(n) for n in sizes)
    rows = [sizes[str(n)] for n in ns]
    figure, (latency, memory, build) = plt.subplots(1, 3, figsize=(16, 5))
    for mode in rows[0]["latency_ms"]:
        line = latency.plot(ns, [r["latency_ms"][mode]["p50"] for r in rows], marker="o", label=f"{mode} p50")
        latency.plot(ns, [r["latency_ms"][mode]["p95"] for r in rows], linestyle=":",
                     color=line[0].get_color())
    latency.set(xscale="log", yscale="log", xlabel="chunks", ylabel="ms per query (dotted: p95)",
                title="Query latency (k=10)")
    latency.legend(fontsize=7)
    memory.plot(ns, [r["peak_rss_mb"] for r in rows], marker="o", label="serving peak RSS")
    memory.plot(ns, [r["build_peak_rss_mb"] for r in rows], marker="s", label="build peak RSS")
    memory.plot(ns, [r["disk_mb"] for r in rows], marker="^", label="index on disk")
    memory.set(xscale="log", yscale="log", xlabel="chunks", ylabel="MB", title="Memory and disk")
    memory.legend(fontsize=7)
    build.plot(ns, [r["build_s"] for r in rows], marker="o", label="ingest (commit_batch)")
    build.plot(ns, [r["dense_index_build_s"] for r in rows], marker="s", label="dense + approximate index")
    build.set(xscale="log", yscale="log", xlabel="chunks", ylabel="seconds", title="Build time")
    build.legend(fontsize=7)
    figure.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / PLOT_FILE
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
