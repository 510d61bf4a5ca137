"""`serve --workers N` processes that share the load: each worker listens on its own socket (SO_REUSEPORT), so
the kernel spreads new connections over the workers evenly.

With one listening socket shared by every worker (uvicorn's supervisor), whichever worker wakes first accepts
every connection waiting (asyncio accepts up to the backlog per wake-up): 32 keep-alive clients connecting at
once often all landed on one worker, and two workers answered as one. With a socket each, the kernel picks the
socket for each new connection by a hash of its addresses.

The supervisor here starts the workers (spawned, as uvicorn's are), restarts one that dies, and on SIGTERM or
SIGINT sends each SIGTERM and waits: each worker stops accepting, answers the requests in flight, and exits.
"""

from __future__ import annotations

import multiprocessing
import signal
import socket
import threading
import time
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn

MAX_RESTARTS_PER_MINUTE = 10  # a worker that keeps dying (a port taken, a broken app) stops the server instead


def can_share_port() -> bool:
    """Whether this system lets several sockets listen on one port (Linux, the BSDs, macOS)."""
    return hasattr(socket, "SO_REUSEPORT")


def reuse_port_listener(host: str, port: int, backlog: int) -> socket.socket:
    """A TCP listening socket on (host, port) that other processes' sockets may share (SO_REUSEPORT). Declared
    IPPROTO_TCP, so asyncio sets TCP_NODELAY on what it accepts (see `http.tcp_listener`)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock


def _worker(config: uvicorn.Config) -> None:
    """One worker process: its own listening socket, then uvicorn until SIGTERM (graceful: in-flight requests
    are answered)."""
    import uvicorn

    sock = reuse_port_listener(config.host, config.port, config.backlog)
    uvicorn.Server(config).run(sockets=[sock])


def run_workers(config: uvicorn.Config, workers: int) -> None:
    """Run `workers` processes serving `config` on one port until SIGTERM or SIGINT. The port is held by a
    socket bound here (not listening: it takes no connection), so a port another program listens on fails here,
    before any worker starts."""
    stop = threading.Event()
    holder = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET, socket.SOCK_STREAM,
                           socket.IPPROTO_TCP)
    with holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind((config.host, config.port))
        previous = {sig: signal.signal(sig, lambda signum, frame: stop.set()) for sig in (signal.SIGTERM,
                                                                                        signal.SIGINT)}
        try:
            _supervise(config, workers, stop)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _supervise(config: uvicorn.Config, workers: int, stop: threading.Event) -> None:
    """Start the workers, restart one that dies, and at `stop` SIGTERM each and wait for it."""
    spawn = multiprocessing.get_context("spawn")
    processes: list[BaseProcess] = []
    restarts: list[float] = []
    try:
        for _ in range(workers):
            processes.append(spawn.Process(target=_worker, args=(config,), daemon=False))
            processes[-1].start()
        while not stop.wait(0.5):
            for i, process in enumerate(processes):
                if process.is_alive():
                    continue
                restarts = [t for t in restarts if t > time.monotonic() - 60] + [time.monotonic()]
                if len(restarts) > MAX_RESTARTS_PER_MINUTE:
                    stop.set()
                    break
                processes[i] = spawn.Process(target=_worker, args=(config,), daemon=False)
                processes[i].start()
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()  # SIGTERM: uvicorn's graceful shutdown
        for process in processes:
            process.join()
