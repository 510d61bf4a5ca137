"""kill -9 trials: ingest, rollback and sync killed at random points; the index must be whole afterwards.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/kill9_trials.py [--trials 100] [--seed 7] [--pages 40]

A base index holds two batches of a generated corpus. Each trial copies it, starts one operation through the
CLI (`evidex ingest` of changed pages, `evidex rollback`, or `evidex ingest --sync` of a corpus with pages
deleted), sends SIGKILL after a random delay between 0 and 1.2x the operation's own duration, then opens the
index and checks it:
- corrupt: SQLite's and the store's own integrity checks report a problem, or the index cannot be opened;
- half-committed: the live documents (id and content hash) are neither those before the operation nor those
  the same operation gives when it runs to the end (measured once per operation on its own copy).
It prints every trial's operation, delay and outcome, then the trials and failures per operation.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from evidex.config import Config
from evidex.engine import Engine

SOURCE = Path(__file__).resolve().parents[1] / "src"
TOPICS = ["backups", "rotation", "ingress", "quotas", "rollouts", "alerts", "tracing", "secrets", "storage", "dns"]


def page(i: int, version: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    body = " ".join(f"Step {n} of the {topic} runbook, revision {version}: check the {topic} dashboard, then "
                    f"record what changed in ticket {i * 100 + n}." for n in range(12))
    return f"# {topic.title()} runbook {i}\n\n## Before you start\n\n{body}\n\n## Afterwards\n\n{body[::-1]}\n"


def write_corpus(root: Path, pages: dict[int, int]) -> Path:
    """`pages`: page number -> revision."""
    root.mkdir(parents=True)
    for i, version in pages.items():
        (root / f"page-{i:03d}.md").write_text(page(i, version), encoding="utf-8")
    return root


def cli(frozen: Path, *args: str) -> subprocess.Popen[bytes]:
    """`evidex ARGS` from `frozen`, a copy of the source taken at the start: every trial runs the same code (a
    document's hash covers the ingest code, so an edit to the tree during the trials would change it)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(frozen)}
    command = [sys.executable, "-c", "from evidex.interfaces.entry import main; main()", *args]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def state(index: Path) -> tuple[str, dict[str, str]]:
    """('' or the problem found, the live documents' hashes)."""
    try:
        with Engine.open(Config().replace(index={"path": str(index)})) as engine:
            problems = engine.store.check_integrity()
            return "; ".join(problems), dict(engine.store.ledger.document_hashes())
    except Exception as exc:  # an index that cannot be opened is the failure this script looks for
        return f"cannot open: {type(exc).__name__}: {exc}", {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pages", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="kill9-"))
    frozen = Path(shutil.copytree(SOURCE, work / "src", ignore=shutil.ignore_patterns("__pycache__")))
    n = args.pages
    first = write_corpus(work / "c1", dict.fromkeys(range(n), 1))
    second = write_corpus(work / "c2", {i: 2 if i % 4 == 0 else 1 for i in range(n + n // 4)})
    changed = write_corpus(work / "c3", {i: 3 if i % 3 == 0 else (2 if i % 4 == 0 else 1) for i in range(n + n // 2)})
    shrunk = write_corpus(work / "c4", {i: 4 if i % 5 == 0 else 1 for i in range(0, n, 2)})
    base = work / "base"
    for corpus in (first, second):
        if cli(frozen, "ingest", str(corpus), "--index", str(base)).wait() != 0:
            raise SystemExit(f"building the base index failed ({corpus})")
    operations = {"ingest": ["ingest", str(changed)], "rollback": ["rollback"],
                  "sync": ["ingest", str(shrunk), "--sync"]}
    _, before = state(base)
    after: dict[str, dict[str, str]] = {}
    duration: dict[str, float] = {}
    for name, op in operations.items():  # each operation run to its end once: what "done" looks like, how long
        index = work / f"ref-{name}"
        shutil.copytree(base, index)
        started = time.perf_counter()
        if cli(frozen, *op, "--index", str(index)).wait() != 0:
            raise SystemExit(f"{name} fails even when not killed")
        duration[name] = time.perf_counter() - started
        problem, after[name] = state(index)
        if problem:
            raise SystemExit(f"{name} run to its end leaves a broken index: {problem}")
    print(f"base: {len(before)} documents; full runs: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in duration.items()), flush=True)
    failures: Counter[str] = Counter()
    trials: Counter[str] = Counter()
    for t in range(1, args.trials + 1):
        name = rng.choice(sorted(operations))
        delay = rng.uniform(0, 1.2 * duration[name])
        index = work / "trial"
        shutil.rmtree(index, ignore_errors=True)
        shutil.copytree(base, index)
        proc = cli(frozen, *operations[name], "--index", str(index))
        time.sleep(delay)
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        problem, live = state(index)
        if not problem and live not in (before, after[name]):
            problem = f"half-committed: {len(live)} live documents, neither the {len(before)} before " \
                      f"nor the {len(after[name])} after"
        landed = "after" if live == after[name] else "before" if live == before else "neither"
        trials[name] += 1
        failures[name] += bool(problem)
        print(f"trial {t:3d} {name:8s} kill at {delay:5.2f} s ({'killed' if killed else 'had finished'}): "
              f"{problem or 'whole, ' + landed}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"trials {sum(trials.values())}, failures {sum(failures.values())}: "
          + ", ".join(f"{k} {trials[k]} trials / {failures[k]} failures" for k in sorted(trials)))
    raise SystemExit(1 if sum(failures.values()) else 0)


if __name__ == "__main__":
    main()
