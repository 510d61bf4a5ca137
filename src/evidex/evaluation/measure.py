"""Timing and memory measurement for the benchmark: latency percentiles (wall-clock and CPU), resident
set size now and at its peak, load average, size on disk."""

from __future__ import annotations

import os
import platform
import resource
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from evidex.evaluation.metrics import percentile


def ms_stats(values: Sequence[float], cpu: Sequence[float] | None = None) -> dict[str, float]:
    """Wall-clock percentiles; with `cpu` (CPU time of the calling thread for the same calls) also CPU
    percentiles, which time spent waiting for a core on a busy machine does not inflate."""
    out = {"p50_ms": round(percentile(values, 50), 3), "p95_ms": round(percentile(values, 95), 3),
           "mean_ms": round(statistics.fmean(values), 3) if values else float("nan"), "n": len(values)}
    if cpu is not None:
        out["cpu_p50_ms"] = round(percentile(cpu, 50), 3)
        out["cpu_p95_ms"] = round(percentile(cpu, 95), 3)
    return out


def time_modes(run: Callable[[str, str], object], queries: Sequence[str],
               modes: Sequence[str]) -> dict[str, dict[str, float]]:
    """Latency (wall and CPU ms, see `ms_stats`) of `run(query, mode)` for every query in every mode. The modes
    are interleaved per query and rotated, so that load spikes and warm caches fall evenly on all of them."""
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    for i, q in enumerate(queries):
        for j in range(len(modes)):
            mode = modes[(i + j) % len(modes)]
            started, started_cpu = time.perf_counter(), time.thread_time()
            run(q, mode)
            wall[mode].append((time.perf_counter() - started) * 1000)
            cpu[mode].append((time.thread_time() - started_cpu) * 1000)
    return {m: ms_stats(wall[m], cpu[m]) for m in modes}


def p50_ms(run: Callable[[str], object], texts: Sequence[str]) -> float:
    """The median wall-clock time of `run` on each of `texts`, in turn, in milliseconds."""
    took = []
    for text in texts:
        started = time.perf_counter()
        run(text)
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


def rss_mb() -> float:
    """Current resident set size (VmRSS) in MB; NaN where /proc is not available."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def maxrss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # bytes on macOS, KB on Linux
    return peak / (1024 * 1024) if platform.system() == "Darwin" else peak / 1024


def peak_rss_mb() -> float:
    """This process's own peak resident set (VmHWM), in MB. Unlike `ru_maxrss`, which a process started by
    fork and exec inherits from its parent at the fork, it counts only what this program held; `maxrss_mb`
    where /proc is not available."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return maxrss_mb()


def rss_parts_mb() -> dict[str, float]:
    """The resident set by kind (Linux): `anon` (the heap: what the process holds), `file` (pages of mapped
    files, such as memory-mapped vectors: page cache the kernel takes back under pressure) and `shmem`; empty
    where /proc is not available."""
    parts: dict[str, float] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                for kind in ("Anon", "File", "Shmem"):
                    if line.startswith(f"Rss{kind}:"):
                        parts[kind.lower()] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return parts


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine() -> dict[str, object]:
    """What a latency was measured on: cores, the CPU's model, and whether it has the int8 dot-product
    instructions (VNNI) that make quantized inference faster there: compare latencies only between reports
    that name the same machine."""
    fields: dict[str, str] = {}  # the first processor's "model name" and "flags" (Linux)
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "flags"):
                    fields.setdefault(key.strip(), value.strip())
                if len(fields) == 2:
                    break
    except OSError:
        pass
    model = fields.get("model name") or platform.processor() or platform.machine()
    int8_dot_product = bool({"avx512_vnni", "avx_vnni", "amx_int8"} & set(fields.get("flags", "").split()))
    return {"cpus": os.cpu_count() or 1, "cpu": model, "int8_dot_product": int8_dot_product,
            "platform": platform.platform()}


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


class RssSampler:
    """Polls VmRSS in a daemon thread: the peak of one phase, which ru_maxrss (whole process) cannot give."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak = rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            value = rss_mb()
            if value > self.peak:
                self.peak = value

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())
