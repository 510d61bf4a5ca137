"""`evidex serve` under concurrent clients: requests/s, latency p50 / p95 / p99, errors and the server's RSS at
1, 2, 4, 8 and 16 clients, beside the in-process floor (`Engine.run` with no HTTP).

    python scripts/bench_serve.py [--requests 160] [--clients 1,2,4,8,16] \
        [--server NAME=SRC_DIR[:WORKERS] ...] [--data ../shared/data/k8s] [--protocol api|mcp]

`--protocol mcp` runs `evidex mcp --transport http` instead, each request one stateless JSON-RPC `tools/call`
of search_with_reasoning on /mcp (a call the tool answers as an error counts as an error, "rate limited" as 429).

Serves the k8s documentation with its metadata overlay: the index `evidex eval` builds and caches (built here
once if it is missing; embeddings come from the embedding cache), copied to a temporary folder so that the
server's audit log stays out of the cache. A key with the `engineering-read` label and a rate far above what is
sent is made with `evidex keys create`; each server is `evidex serve` on a free port (its own process, as an
operator runs it). After one warm-up round, N client threads (one keep-alive connection each) send the 32
questions round robin, `--requests` per level. An error is any response but 200 (a 429 is counted apart) or a
failed connection. RSS is the server's resident memory after each level, CPU its user + system time over the
level's wall time (Linux /proc; 200% is both cores), both summed over its processes (uvicorn's supervisor and
workers). The floor is the same questions, one at a time, in a process of the same evidex without HTTP.

`--server NAME=SRC_DIR[:WORKERS]` (repeatable) serves the evidex under SRC_DIR (e.g. `before=../main/src`) with
`serve --workers WORKERS` (default 1; `--server one=src --server two=src:2` compares them): every level runs on
each server in turn (alternating which goes first), so a before/after comparison shares one run's noise.
The machine is small (2 cores) and shared: compare the rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from evidex.admission.gate import Principal
from evidex.config import load_config
from evidex.engine import Engine
from evidex.evaluation.runner import open_eval_engine
from evidex.interfaces.http import SEARCH_PATH
from evidex.interfaces.mcp_server import MCP_PATH
from evidex.pipeline import SearchRequest
from evidex.stores.sqlite import INDEX_FILE

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "k8s"
LABEL = "engineering-read"
RATE_PER_MIN = 100_000  # the most a key may have: no 429 at these rates
ENTRY = "from evidex.interfaces.entry import main; main()"  # `evidex`, from the PYTHONPATH given


@dataclass(frozen=True)
class Wire:
    """How a server is run and asked: the `evidex` command, the path that says it is up, and one request."""

    command: tuple[str, ...]
    probe: str  # answers 200 (the API's health) or 401 (the MCP endpoint, to a request without a key)
    path: str

    def body(self, question: str) -> str:
        if self.path == MCP_PATH:
            return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                               "params": {"name": "search_with_reasoning", "arguments": {"query": question}}})
        return json.dumps({"query": question})

    def status(self, http_status: int, payload: bytes) -> str:
        """The HTTP status, or for MCP the call's outcome: "200", "429" (rate limited) or what went wrong."""
        if self.path != MCP_PATH or http_status != 200:
            return str(http_status)
        reply = json.loads(payload)
        if "error" in reply:
            return f"jsonrpc-{reply['error'].get('code')}"
        if reply["result"].get("isError"):
            return "429" if "rate limited" in reply["result"]["content"][0]["text"] else "tool-error"
        return "200"


WIRES = {"api": Wire(("serve",), "/v1/health", SEARCH_PATH),
         "mcp": Wire(("mcp", "--transport", "http"), MCP_PATH, MCP_PATH)}
MCP_ACCEPT = "application/json, text/event-stream"


@dataclass
class Server:
    name: str
    src: Path
    work: Path
    workers: int = 1
    wire: Wire = WIRES["api"]
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.work / "server.log"

    def evidex(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`evidex ARGS` with this server's source, to completion."""
        done = subprocess.run([sys.executable, "-c", ENTRY, *args], env=self.env(), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"evidex {' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(self.src)}
        # The 32 questions go round robin: a server keeping query vectors would embed each only once. (An
        # evidex from before the setting would refuse it as an unknown key.)
        if "query_cache" in (self.src / "evidex" / "config.py").read_text():
            env["EVIDEX_EMBEDDING_QUERY_CACHE"] = "0"
        return env

    def floor(self, index: Path, data: Path) -> tuple[float, float]:
        """`in_process_floor` run by this server's evidex (this script in a child process)."""
        done = subprocess.run([sys.executable, __file__, "--floor", str(index), "--data", str(data)], env=self.env(),
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"the in-process floor of {self.name} failed: {done.stderr.strip()}")
        run_ms, result_ms = json.loads(done.stdout)
        return float(run_ms), float(result_ms)

    def start(self, index: Path, keys: Path) -> None:
        self.port = free_port()
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", ENTRY, *self.wire.command, "--index", str(index), "--keys", str(keys),
                 "--port", str(self.port), "--workers", str(self.workers)], env=self.env(), stdout=log,
                stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server {self.name} exited ({self.process.returncode}):\n{self.log_tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", self.wire.probe)
                if conn.getresponse().status in (200, 401):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server {self.name} did not answer {self.wire.probe} in 120 s:\n{self.log_tail()}")

    def pids(self) -> list[int]:
        """The server's process and its descendants (uvicorn's workers), from /proc."""
        assert self.process is not None
        parents: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                parents[int(stat.parent.name)] = int(stat.read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError):
                continue  # exited meanwhile
        tree = [self.process.pid]
        for pid in tree:
            tree += [child for child, parent in parents.items() if parent == pid]
        return tree

    def rss_mb(self) -> tuple[float, float]:
        """(resident now, peak) in MB over the server's processes, from /proc."""
        now = peak = 0.0
        for pid in self.pids():
            fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                          if ":" in line)
            now += int(fields["VmRSS"].split()[0]) / 1024
            peak += int(fields["VmHWM"].split()[0]) / 1024
        return now, peak

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the server's processes have used so far, from /proc."""
        total = 0
        for pid in self.pids():
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)  # uvicorn's graceful shutdown (the engine and key store close)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Level:
    clients: int
    seconds: float
    latencies_ms: tuple[float, ...]
    statuses: Counter[str]
    client_cpu_s: float = 0.0

    @property
    def errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status not in ("200", "429"))

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def drive(port: int, key: str, questions: Sequence[str], clients: int, requests: int,
          wire: Wire = WIRES["api"]) -> Level:
    """`requests` searches from `clients` threads, each on its own keep-alive connection, questions round robin."""
    lock = threading.Lock()
    next_request = iter(range(requests))
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Accept": MCP_ACCEPT}
    start = threading.Barrier(clients + 1)

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        start.wait()
        while True:
            with lock:
                i = next(next_request, None)
            if i is None:
                break
            body = wire.body(questions[i % len(questions)])
            began = time.perf_counter()
            try:
                conn.request("POST", wire.path, body=body, headers=headers)
                response = conn.getresponse()
                status = wire.status(response.status, response.read())
            except (OSError, http.client.HTTPException) as exc:
                status = type(exc).__name__
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            took = (time.perf_counter() - began) * 1000
            with lock:
                latencies.append(took)
                statuses[status] += 1
        conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    began, cpu = time.perf_counter(), time.process_time()
    for t in threads:
        t.join()
    return Level(clients, time.perf_counter() - began, tuple(latencies), statuses, time.process_time() - cpu)


def in_process_floor(index: Path, questions: Sequence[str], rounds: int = 2) -> tuple[float, float]:
    """p50 of `Engine.run` and of `Engine.search_with_reasoning` (the result the endpoint returns), in ms."""
    who = Principal.of("bench", [LABEL])
    runs: list[float] = []
    results: list[float] = []
    with Engine.open(load_config().replace(index={"path": str(index)})) as engine:
        for q in questions:  # warm-up: the model, the dense matrix, the word cache
            engine.search_with_reasoning(q, principal=who)
        for q in list(questions) * rounds:
            began = time.perf_counter()
            engine.run(SearchRequest(q, principal=who))
            runs.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            engine.search_with_reasoning(q, principal=who)
            results.append((time.perf_counter() - began) * 1000)
    return statistics.median(runs), statistics.median(results)


def copy_index(source: Path, target: Path) -> None:
    """A consistent copy of the SQLite index (the backup API: safe while another process writes it)."""
    target.mkdir(parents=True)
    with closing(sqlite3.connect(source / INDEX_FILE)) as src, closing(sqlite3.connect(target / INDEX_FILE)) as dst:
        src.backup(dst)


def parse_servers(given: Sequence[str]) -> list[tuple[str, Path, int]]:
    if not given:
        return [("serve", ROOT / "src", 1)]
    out = []
    for item in given:
        name, sep, rest = item.partition("=")
        src, _, workers = rest.partition(":")
        if not sep or not name or not (Path(src) / "evidex").is_dir() or not (workers or "1").isdigit():
            raise SystemExit(f"--server {item!r}: give NAME=SRC_DIR[:WORKERS], SRC_DIR holding the evidex package")
        out.append((name, Path(src).resolve(), int(workers or "1")))
    return out


Row = tuple[str, Level, float, float]  # server, level, RSS MB after it, server CPU seconds during it


def run_levels(servers: Sequence[Server], key: str, questions: Sequence[str], levels: Sequence[int],
               requests: int) -> list[Row]:
    """Each level on each server in turn, alternating which server goes first."""
    rows: list[Row] = []
    for n, clients in enumerate(levels):
        for server in servers if n % 2 == 0 else servers[::-1]:
            cpu = server.cpu_s()
            level = drive(server.port, key, questions, clients, requests, server.wire)
            rows.append((server.name, level, server.rss_mb()[0], server.cpu_s() - cpu))
    return rows


def report(servers: Sequence[Server], rows: Sequence[Row]) -> None:
    print(f"\n{'server':10s} {'clients':>7s} {'req/s':>7s} {'p50 ms':>8s} {'p95 ms':>8s} {'p99 ms':>8s} "
          f"{'errors':>6s} {'429':>4s} {'RSS MB':>7s} {'server CPU':>10s} {'client CPU':>10s}")
    for server in servers:
        for name, level, rss, cpu in rows:
            if name == server.name:
                print(f"{name:10s} {level.clients:7d} {len(level.latencies_ms) / level.seconds:7.1f} "
                      f"{level.percentile(0.50):8.1f} {level.percentile(0.95):8.1f} {level.percentile(0.99):8.1f} "
                      f"{level.errors:6d} {level.statuses.get('429', 0):4d} {rss:7.0f} "
                      f"{cpu / level.seconds:10.0%} {level.client_cpu_s / level.seconds:10.0%}")
        print(f"{server.name:10s} peak RSS {server.rss_mb()[1]:.0f} MB")
    print("CPU: user + system time over the level's wall time, as a share of one core (200% = both cores)")
    for name, level, _, _ in rows:
        odd = {status: n for status, n in level.statuses.items() if status != "200"}
        if odd:
            print(f"{name} at {level.clients} clients answered {odd}")
    for server in servers:
        logged = [line for line in server.log.read_text(errors="replace").splitlines()
                  if "ERROR" in line or "Traceback" in line or "WARNING" in line]
        if logged:
            print(f"{server.name}'s log holds {len(logged)} error or warning lines, the first: {logged[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=160, help="requests per concurrency level")
    parser.add_argument("--clients", default="1,2,4,8,16", help="concurrency levels, comma-separated")
    parser.add_argument("--server", action="append", default=[], metavar="NAME=SRC_DIR[:WORKERS]",
                        help="serve the evidex under SRC_DIR with WORKERS processes (repeatable; default: this "
                             "checkout, one process)")
    parser.add_argument("--data", type=Path, default=DATA, help="the k8s data set (docs/, overlay.jsonl, questions)")
    parser.add_argument("--floor", type=Path, metavar="INDEX", help="only print the in-process floor on INDEX (JSON)")
    parser.add_argument("--protocol", choices=sorted(WIRES), default="api",
                        help="api: `evidex serve`'s endpoint; mcp: `evidex mcp --transport http`")
    args = parser.parse_args()
    levels = [int(x) for x in args.clients.split(",") if x.strip()]
    questions = [json.loads(line)["question"] for line in (args.data / "questions.jsonl").read_text().splitlines()
                 if line.strip()]
    if args.floor is not None:
        print(json.dumps(in_process_floor(args.floor, questions)))
        return
    named = parse_servers(args.server)
    print(f"A small (2-core), shared and noisy machine: compare the rows of one run, not runs. {len(questions)} k8s "
          f"questions round robin, {args.requests} requests per level, a key with [{LABEL}].", flush=True)
    engine = open_eval_engine(load_config(), [args.data / "docs"], args.data / "overlay.jsonl",
                              log=lambda m: print(m, flush=True))
    cached = engine.config.index_dir
    engine.close()
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        work = Path(tmp)
        servers = [Server(name, src, work / name, workers, WIRES[args.protocol]) for name, src, workers in named]
        try:
            for server in servers:
                server.work.mkdir()
                copy_index(cached, server.work / "floor")
                run_ms, result_ms = server.floor(server.work / "floor", args.data)
                print(f"{server.name}: in-process floor (no HTTP, one thread): Engine.run p50 {run_ms:.1f} ms, "
                      f"search_with_reasoning (the endpoint's result) p50 {result_ms:.1f} ms", flush=True)
            keys = work / "keys.sqlite"
            key = servers[0].evidex("keys", "create", "bench-serve", "--principal", "bench", "--label", LABEL,
                                    "--rate", str(RATE_PER_MIN), "--keys", str(keys)).stdout.strip()
            for server in servers:
                copy_index(cached, server.work / "index")
                server.start(server.work / "index", keys)
                # several connections at once, so that every worker takes some
                warm = drive(server.port, key, questions, 2 * server.workers, len(questions) * server.workers,
                             server.wire)
                if warm.statuses != Counter({"200": len(questions) * server.workers}):
                    raise RuntimeError(f"warm-up on {server.name}: {dict(warm.statuses)}\n{server.log_tail()}")
                print(f"{server.name}: serving {server.src} on port {server.port} ({server.workers} worker(s)), "
                      f"RSS after warm-up "
                      f"{server.rss_mb()[0]:.0f} MB", flush=True)
            report(servers, run_levels(servers, key, questions, levels, args.requests))
        finally:
            for server in servers:
                server.stop()
                if server.process is not None and server.process.returncode not in (0, None):
                    print(f"{server.name} exited {server.process.returncode}:\n{server.log_tail()}")


if __name__ == "__main__":
    main()
