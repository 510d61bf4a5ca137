"""A bounded loopback load on `evidex serve`: throughput, p50 / p95 / p99 and errors per worker count at 32
clients, then SIGTERM in the middle of the load (are the requests in flight answered?).

    python scripts/load_workers.py [--workers 1,2] [--clients 32] [--seconds 10] [--drain-workers 1]

Serves the bundled sample handbook (ingested into a temporary index; embeddings from the shared cache) with a
key whose rate is far above what is sent. Each client is one asyncio task with its own keep-alive connection
(httpx2), asking the handbook's questions round robin for `--seconds` after a warm-up of 2 s; an error is any
answer but 200, or a failed connection. Every run is bounded: a request times out after 30 s, a level after
`--seconds`, a server that does not answer its health check in 90 s fails the run.

The drain trial loads one server for 3 s, sends SIGTERM to it (the supervisor with `--workers N`), and counts
the requests that were sent before the signal: answered 200, or failed. Requests sent after it are refused
(connection refused or reset): counted apart, they were never in flight. The machine is shared: compare the rows
of one run, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

import evidex
from evidex.config import Config
from evidex.engine import Engine
from evidex.interfaces.http import SEARCH_PATH
from evidex.interfaces.keys import KeyStore

HANDBOOK = Path(evidex.__file__).parent / "sample" / "handbook"
QUESTIONS = ["How is a canary rollout promoted?", "What rotates the signing keys?", "Who approves a break-glass?",
             "How do I restore a backup?", "What does the on-call engineer do first?", "How are widgets upgraded?"]
ENTRY = "from evidex.interfaces.entry import main; main()"


@dataclass
class Tally:
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    sent_before: int = 0  # drain trial: requests started before the signal
    ok_before: int = 0
    failed_before: int = 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prepare(root: Path) -> tuple[Path, str]:
    """A fresh index of the handbook and a key of rate 100,000 a minute on it."""
    index = root / "index"
    config = Config().replace(index={"path": str(index)})
    with Engine.open(config) as engine:
        engine.ingest([HANDBOOK], default_labels=["staff"])
    with KeyStore(index / "keys.sqlite") as keys:
        key, _ = keys.create("load", "loader", ["staff", "engineering-read", "security"], rate_per_min=100_000)
    return index, key


def start(index: Path, workers: int, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "EVIDEX_SERVER_REQUESTS_PER_CALL": "4"}
    command = [sys.executable, "-c", ENTRY, "serve", "--index", str(index), "--port", str(port),
               "--workers", str(workers)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            cwd=index.parent)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).status_code == 200:
                return proc
        except httpx2.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not answer /v1/health in 90 s")


async def client(base: str, key: str, n: int, until: float, tally: Tally, signalled: list[float]) -> None:
    async with httpx2.AsyncClient(base_url=base, timeout=30, headers={"Authorization": f"Bearer {key}"}) as http:
        i = n
        while time.monotonic() < until:
            sent = time.monotonic()
            before = not signalled
            try:
                r = await http.post(SEARCH_PATH, json={"query": QUESTIONS[i % len(QUESTIONS)], "k": 5})
                outcome = "ok" if r.status_code == 200 else f"http {r.status_code}"
            except httpx2.TransportError as exc:
                outcome = type(exc).__name__
            i += 1
            if before:
                tally.sent_before += 1
                tally.ok_before += outcome == "ok"
                tally.failed_before += outcome != "ok"
            if outcome == "ok":
                tally.latencies_ms.append((time.monotonic() - sent) * 1000)
            else:
                tally.errors[outcome] += 1
                if signalled:
                    return  # refused after the signal: this client is done
                await asyncio.sleep(0.05)


async def load(base: str, key: str, clients: int, seconds: float, *, signal_after: float | None = None,
               proc: subprocess.Popen[bytes] | None = None) -> tuple[Tally, float]:
    tally, signalled = Tally(), []
    started = time.monotonic()
    tasks = [asyncio.create_task(client(base, key, n, started + seconds, tally, signalled)) for n in range(clients)]
    if signal_after is not None and proc is not None:
        await asyncio.sleep(signal_after)
        signalled.append(time.monotonic())
        proc.send_signal(signal.SIGTERM)
    await asyncio.gather(*tasks)
    return tally, time.monotonic() - started


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else float("nan")


def level(index: Path, key: str, workers: int, clients: int, seconds: float) -> None:
    port = free_port()
    proc = start(index, workers, port)
    try:
        base = f"http://127.0.0.1:{port}"
        asyncio.run(load(base, key, clients, 2.0))  # warm-up: every worker's first searches
        tally, wall = asyncio.run(load(base, key, clients, seconds))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    lat = tally.latencies_ms
    print(f"workers={workers} clients={clients} seconds={wall:.1f} ok={len(lat)} req/s={len(lat) / wall:.1f} "
          f"p50={pct(lat, 50):.0f}ms p95={pct(lat, 95):.0f}ms p99={pct(lat, 99):.0f}ms "
          f"errors={sum(tally.errors.values())} {dict(tally.errors) or ''}", flush=True)


def drain(index: Path, key: str, workers: int, clients: int) -> None:
    port = free_port()
    proc = start(index, workers, port)
    base = f"http://127.0.0.1:{port}"
    asyncio.run(load(base, key, clients, 1.0))
    signalled_at = time.monotonic()
    tally, _ = asyncio.run(load(base, key, clients, 8.0, signal_after=3.0, proc=proc))
    code = proc.wait(timeout=30)
    refused_after = sum(tally.errors.values()) - tally.failed_before
    print(f"drain workers={workers} clients={clients}: in flight or sent before SIGTERM {tally.sent_before}, "
          f"answered {tally.ok_before}, failed {tally.failed_before}; refused after it {refused_after} "
          f"{dict(tally.errors) or ''}; exit {code} {time.monotonic() - signalled_at - 3.0:.1f} s after SIGTERM",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--drain-workers", default="1", help="worker counts for the SIGTERM trial ('' skips it)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        index, key = prepare(Path(tmp))
        print(f"cpus={os.cpu_count()} load average={os.getloadavg()[0]:.1f}", flush=True)
        for workers in [int(w) for w in args.workers.split(",") if w]:
            level(index, key, workers, args.clients, args.seconds)
        for workers in [int(w) for w in args.drain_workers.split(",") if w]:
            drain(index, key, workers, args.clients)


if __name__ == "__main__":
    main()
