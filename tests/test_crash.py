"""A real crash: a child process ingests with the real Engine and embedder and is killed with SIGKILL at
several points; the index it leaves must hold exactly the last committed state.

The child is plain `Engine.ingest` with instrumentation, so that the kills land where they matter and
the test does not depend on timing luck: it prints a marker line at each phase (embedding progress,
commit start, a point inside the commit transaction, commit done); during the commit it installs an
SQLite progress handler that sleeps 3 ms every 25 VM steps, stretching the one write transaction over
about a second, and shrinks the page cache so that uncommitted pages spill into the WAL file. For the
kills that must land before COMMIT, the child blocks at a chosen point until it is killed; the others
race the stretched transaction after a seeded random delay.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from evidex.config import Config
from evidex.embedding.cache import CACHE_FILE
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine
from evidex.ingest.loaders import iter_documents
from evidex.ingest.run import chunk_document
from evidex.stores.sqlite import INDEX_FILE, SqliteStore
from evidex.types import Document, RetrievalMode

pytestmark = pytest.mark.slow

CHILD = r"""
import sys, time
from pathlib import Path
from evidex.config import Config
from evidex.embedding import load_embedder
from evidex.engine import Engine

index_dir, embedding_cache, model_cache, corpus, mode = sys.argv[1:6]
config = Config().replace(index={"path": index_dir}, embedding={"cache_dir": embedding_cache, "batch_size": 4})
engine = Engine.open(config, embedder=load_embedder("onnx", None, Path(model_cache)))
store = engine.store
commit = store.commit_batch

def hold():
    print("holding", flush=True)
    time.sleep(600)  # until the parent kills us

def tick(calls=[0]):
    calls[0] += 1
    if calls[0] == 30:
        print("mid-transaction", flush=True)
    if mode == f"hold-{calls[0]}":
        hold()
    time.sleep(0.003)
    return 0

def instrumented_commit(batch):
    print("commit-start", flush=True)
    if mode != "plain":
        store._db.execute("PRAGMA cache_size = 8")  # spill dirty pages: uncommitted frames reach the WAL
        store._db.set_progress_handler(tick, 25)
    info = commit(batch)
    store._db.set_progress_handler(None, 0)
    print("commit-done", info.batch_id, flush=True)
    return info

def progress(phase, done, total):
    print("progress", phase, done, total, flush=True)
    if phase == "embed" and mode == "hold-embed":
        hold()

store.commit_batch = instrumented_commit
report = engine.ingest([Path(corpus)], progress=progress)
print("done", report.batch_id or "-", flush=True)
engine.close()
"""

N_FIRST, N_SECOND, N_CHANGED = 15, 40, 5  # the second corpus: 10 unchanged, 5 changed, 25 new documents


def markdown(i: int, revised: bool) -> str:
    word = f"revised{i:02d}" if revised else f"marker{i:02d}"
    topic = ["etcd backups", "ingress routing", "node drains", "quota limits", "tls renewal"][i % 5]
    para = (f"This runbook page {i} covers {topic}. The {word} keyword identifies it. Operators follow the "
            f"listed steps in order, record each result in the change log and page the owner when a step "
            f"fails twice. ")
    return f"# Page {i}\n\n## Steps\n\n{para * 2}\n\n## Checks\n\n{para}Verify {word} afterwards.\n"


def write(root: Path, n: int, changed: range) -> Path:
    root.mkdir()
    for i in range(n):
        (root / f"page-{i:02d}.md").write_text(markdown(i, revised=i in changed), encoding="utf-8")
    return root


def expected_ids(corpus: Path, config: Config) -> set[str]:
    ids: set[str] = set()
    for doc in iter_documents(corpus):
        assert isinstance(doc, Document)
        ids |= {c.record_id for c in chunk_document(doc, config.chunking, datetime.now(UTC))}
    return ids


@dataclass
class Child:
    proc: subprocess.Popen[str]
    lines: queue.Queue[str]
    log: list[str]

    def wait_for(self, prefix: str, timeout_s: float = 120.0) -> bool:
        """True once a line starting with prefix arrives; False if the child ended first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.05)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    return False
                continue
            if line.startswith(prefix):
                return True
        raise AssertionError(f"no {prefix!r} within {timeout_s} s; child said:\n" + "".join(self.log))

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@contextmanager
def child(index_dir: Path, embedding_cache: Path, model_cache: Path, corpus: Path, mode: str) -> Iterator[Child]:
    """mode: plain | slow (stretched commit) | hold-embed | hold-N (block at commit tick N until killed)."""
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", CHILD, str(index_dir), str(embedding_cache), str(model_cache), str(corpus),
         mode],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.append(line)
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    c = Child(proc, lines, log)
    try:
        yield c
    finally:
        c.kill()
        reader.join(timeout=30)
        assert proc.stdout is not None
        proc.stdout.close()


def test_sigkill_during_ingest_leaves_the_last_committed_state(tmp_path: Path, embedder: Embedder,
                                                               cache_dir: Path) -> None:
    index_dir, embedding_cache = tmp_path / "idx", tmp_path / "embeddings"  # a fresh cache: real embedding work
    config = Config().replace(index={"path": str(index_dir)},
                              embedding={"cache_dir": str(embedding_cache), "batch_size": 4})
    first_corpus = write(tmp_path / "first", N_FIRST, range(0))
    second_corpus = write(tmp_path / "second", N_SECOND, range(N_FIRST - N_CHANGED, N_FIRST))
    before, after = expected_ids(first_corpus, config), expected_ids(second_corpus, config)
    assert len(before) >= 2 * N_FIRST and not after <= before

    with Engine.open(config, embedder=embedder) as engine:
        first_batch = engine.ingest([first_corpus]).batch_id
    rng = random.Random(20240601)

    def check() -> str:
        """The index holds exactly the state before or after the second ingest; which one?"""
        store = SqliteStore(index_dir)
        try:
            assert store.check_integrity() == []
            chunks = store.all_chunks()
            live = {c.record_id for c in chunks}
            assert len(live) == len(chunks)
            assert live in (before, after), f"partial state: {len(live)} chunks ({len(before)}/{len(after)})"
            batches = store.ledger.batches()
            committed = {b.batch_id for b in batches if b.status == "committed"}
            assert {c.batch_id for c in chunks} <= committed  # every live record from a committed batch
            assert batches[0].batch_id == first_batch and batches[0].added == len(before)
            assert len(batches) == (1 if live == before else 2)
            engine = Engine.open(config, embedder=embedder, store=store)
            state = "before" if live == before else "after"
            for i in (0, 7, N_FIRST - 1):  # first-batch pages stay searchable, by BM25 and by vector
                word = f"revised{i:02d}" if state == "after" and i >= N_FIRST - N_CHANGED else f"marker{i:02d}"
                assert {c.chunk.source for c in engine.search(word, k=3, mode=RetrievalMode.BM25)} == {
                    f"page-{i:02d}.md"}
            assert engine.search(f"runbook page {N_FIRST - 1}", k=1, mode=RetrievalMode.DENSE)
            return state
        finally:
            store.close()
            db = sqlite3.connect(embedding_cache / CACHE_FILE)
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            db.close()

    assert check() == "before"
    wal = index_dir / (INDEX_FILE + "-wal")

    def wal_size() -> int:
        try:
            return wal.stat().st_size
        except FileNotFoundError:
            return 0

    # The first three kills must be undone whatever the scheduling: the child blocks there until killed
    # (between two embedding batches; early in the commit transaction; deep in it, once uncommitted pages
    # have spilled into the WAL). The next ones race a stretched transaction (about 1 s: some 300 progress
    # ticks of 3 ms) after a seeded random delay and may land before or after COMMIT; the last one comes
    # after COMMIT returned, so the new state must be there, whole.
    plans = [("hold-embed", "holding", 0.0), ("hold-30", "holding", 0.0), ("hold-200", "holding", 0.0),
             ("slow", "mid-transaction", rng.uniform(0.0, 0.3)), ("slow", "commit-start", rng.uniform(0.0, 1.5)),
             ("slow", "commit-done", 0.0)]
    outcomes: list[tuple[str, str]] = []
    for mode, marker, delay in plans:
        with child(index_dir, embedding_cache, cache_dir, second_corpus, mode) as c:
            reached = c.wait_for(marker)
            time.sleep(delay)
            wal_at_kill = wal_size()
            c.kill()
        outcome = check()
        outcomes.append((mode, outcome))
        if mode == "hold-200":
            assert wal_at_kill > 0  # uncommitted frames were on disk when the process died
        if outcome == "after":  # the commit went through before the kill: nothing left to interrupt
            break
        assert reached, "".join(c.log)
    assert outcomes[:3] == [("hold-embed", "before"), ("hold-30", "before"), ("hold-200", "before")]
    assert outcomes[-1][1] == "after"

    # A re-run completes; a further run finds nothing to do.
    for _ in range(2):
        with child(index_dir, embedding_cache, cache_dir, second_corpus, "plain") as c:
            assert c.wait_for("done"), "".join(c.log)
            assert c.proc.wait(timeout=60) == 0, "".join(c.log)
        assert check() == "after"
    assert "done -\n" in c.log, "".join(c.log)  # the second re-run had nothing to do
