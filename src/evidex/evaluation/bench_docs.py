"""Parts 1 and 2 of `evidex bench`, on a folder of real documents: embedding throughput (the raw embedder
against `Engine.ingest` of the same pages) and query latency per retrieval mode on the index that ingest built.

Any folder `evidex ingest` reads will do. Queries come from an optional questions file (JSON Lines with a
`question`, `text` or `query` string per line), else from the pages' titles.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evidex.config import Config
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine
from evidex.evaluation.measure import ms_stats, time_modes
from evidex.ingest.loaders import iter_documents
from evidex.ingest.run import chunk_document, embedding_text
from evidex.types import Chunk, Document, RetrievalMode

Log = Callable[[str], None]
K = 10


@dataclass(frozen=True)
class _Pages:
    """The leading pages of the folder that fit the chunk budget, and their chunks' texts."""

    all_docs: tuple[Document, ...]
    chosen: tuple[Document, ...]
    chunks: tuple[Chunk, ...]
    texts: tuple[str, ...]


@dataclass
class _Rounds:
    """Throughput (chunks/s) and CPU seconds per chunk of each round, raw embedder and ingest side by side."""

    raw_rates: list[float]
    ingest_rates: list[float]
    raw_cpu: list[float]
    ingest_cpu: list[float]
    ingest_rounds: list[dict[str, Any]]


def docs_part(config: Config, embedder: Embedder, docs: Path, questions: Path | None, *, chunk_budget: int,
              rounds: int, queries: int, work: Path, log: Log) -> tuple[dict[str, Any], dict[str, Any]]:
    """The embedding report and the latency report of the pages of `docs` (the first `chunk_budget` chunks'
    worth), built and measured under `work`."""
    pages = _first_pages(config, docs, chunk_budget)
    corpus = work / "docs-corpus"
    for doc in pages.chosen:  # the same pages, same relative sources, so ingest chunks exactly these texts
        target = corpus / doc.source
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(docs / doc.source, target)
    batch = config.embedding.batch_size
    log(f"docs: first {len(pages.chosen)} of {len(pages.all_docs)} pages -> {len(pages.chunks)} chunks "
        f"(budget {chunk_budget}); embedding batch {batch}")
    embedder.embed_documents(list(pages.texts[:batch]))  # warm-up: creates the document session, not timed
    measured, engine = _embedding_rounds(config, embedder, pages.texts, corpus, rounds, work, log)
    embedding = _embedding_report(config, embedder, pages, measured, rounds, log)
    try:
        pool, source = _queries(questions, pages.all_docs)
        latency = _query_latency(engine, [pool[i % len(pool)] for i in range(queries)], source,
                                 len(pages.chunks), log)
    finally:
        engine.close()
    return embedding, latency


def _first_pages(config: Config, docs: Path, chunk_budget: int) -> _Pages:
    all_docs = tuple(d for d in iter_documents(docs) if isinstance(d, Document))
    now = datetime.now(UTC).replace(microsecond=0)
    chosen: list[Document] = []
    chunks: list[Chunk] = []
    for doc in all_docs:
        doc_chunks = chunk_document(doc, config.chunking, now)
        if chunks and len(chunks) + len(doc_chunks) > chunk_budget:
            break
        chosen.append(doc)
        chunks.extend(doc_chunks)
    if not chunks:
        raise ValueError(f"{docs}: no document produced a chunk")
    return _Pages(all_docs, tuple(chosen), tuple(chunks), tuple(embedding_text(c) for c in chunks))


def _embedding_rounds(config: Config, embedder: Embedder, texts: Sequence[str], corpus: Path, rounds: int,
                      work: Path, log: Log) -> tuple[_Rounds, Engine]:
    """Interleaved rounds: the raw embedder over every text in batches, then `Engine.ingest` of the pages into
    a fresh index with an empty embedding cache (so it really embeds). Returns the last round's engine open."""
    batch = config.embedding.batch_size
    measured = _Rounds([], [], [], [], [])
    engine: Engine | None = None
    for r in range(1, rounds + 1):
        started, started_cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(texts), batch):
            embedder.embed_documents(list(texts[i:i + batch]))
        seconds = time.perf_counter() - started
        measured.raw_cpu.append((time.process_time() - started_cpu) / len(texts))
        measured.raw_rates.append(len(texts) / seconds)
        log(f"docs round {r}/{rounds}: raw embedder {len(texts)} chunks in {seconds:.1f} s "
            f"= {measured.raw_rates[-1]:.1f} chunks/s")
        if engine is not None:
            engine.close()
        engine = _ingest_round(config, embedder, corpus, work / f"docs-index-{r}", work / f"docs-cache-{r}",
                               measured)
        log(f"docs round {r}/{rounds}: Engine.ingest {measured.ingest_rounds[-1]['chunks']} chunks "
            f"({measured.ingest_rounds[-1]['embedded']} embedded) "
            f"in {measured.ingest_rounds[-1]['seconds']:.1f} s = {measured.ingest_rates[-1]:.1f} chunks/s")
    assert engine is not None  # rounds >= 1
    return measured, engine


def _ingest_round(config: Config, embedder: Embedder, corpus: Path, index: Path, cache: Path,
                  measured: _Rounds) -> Engine:
    cfg = config.replace(index={"path": str(index)},
                         embedding={"cache_dir": str(cache),  # fresh, empty cache
                                    "query_cache": 0})  # the queries repeat: each is embedded again
    engine = Engine.open(cfg, embedder=embedder)
    started, started_cpu = time.perf_counter(), time.process_time()
    report = engine.ingest([corpus], label="bench")
    seconds = time.perf_counter() - started
    measured.ingest_cpu.append((time.process_time() - started_cpu) / max(report.added_chunks, 1))
    measured.ingest_rates.append(report.added_chunks / seconds)
    measured.ingest_rounds.append({"seconds": round(seconds, 2), "chunks": report.added_chunks,
                                   "embedded": report.embedded, "cached": report.cached,
                                   "documents": report.documents, "empty_documents": report.empty_documents,
                                   "dead_letters": len(report.dead_letters)})
    return engine


def _embedding_report(config: Config, embedder: Embedder, pages: _Pages, measured: _Rounds, rounds: int,
                      log: Log) -> dict[str, Any]:
    started, started_cpu = time.perf_counter(), time.process_time()
    embedder.embed_documents(list(pages.texts))  # one call: the embedder sorts all texts by length (less padding)
    sorted_rate = len(pages.texts) / (time.perf_counter() - started)
    sorted_cpu = (time.process_time() - started_cpu) / len(pages.texts)
    log(f"docs: raw embedder, all chunks in one length-sorted call = {sorted_rate:.1f} chunks/s")
    raw_best, ingest_best = max(measured.raw_rates), max(measured.ingest_rates)
    return {
        "documents": len(pages.chosen), "chunks": len(pages.chunks), "batch_size": config.embedding.batch_size,
        "threads": config.embedding.threads or "all cores",
        "raw_chunks_per_s": round(raw_best, 2), "ingest_chunks_per_s": round(ingest_best, 2),
        "ratio": round(ingest_best / raw_best, 3),
        "raw_rounds_chunks_per_s": [round(x, 2) for x in measured.raw_rates],
        "ingest_rounds_chunks_per_s": [round(x, 2) for x in measured.ingest_rates],
        "ratio_per_round": [round(i / r, 3) for i, r in zip(measured.ingest_rates, measured.raw_rates, strict=True)],
        "raw_cpu_ms_per_chunk": round(min(measured.raw_cpu) * 1000, 2),
        "ingest_cpu_ms_per_chunk": round(min(measured.ingest_cpu) * 1000, 2),
        "cpu_ratio": round(min(measured.raw_cpu) / min(measured.ingest_cpu), 3),
        "ingest_rounds": measured.ingest_rounds,
        "raw_one_sorted_call_chunks_per_s": round(sorted_rate, 2),
        "raw_one_sorted_call_cpu_ms_per_chunk": round(sorted_cpu * 1000, 2),
        "note": f"best of {rounds} interleaved rounds (raw, ingest, raw, ingest, ...)",
    }


def _queries(questions: Path | None, docs: Sequence[Document]) -> tuple[list[str], str]:
    """The questions of `questions` (JSON Lines), else the pages' titles; and where they came from."""
    found: list[str] = []
    if questions is not None:
        for line in questions.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                text = item.get("question") or item.get("text") or item.get("query")
                if isinstance(text, str) and text.strip():
                    found.append(text.strip())
    if found:
        return found, str(questions)
    return [d.title for d in docs if d.title], "document titles"


def _query_latency(engine: Engine, qs: list[str], source: str, index_chunks: int, log: Log) -> dict[str, Any]:
    """`Engine.search(k=10)` in each retrieval mode, query encoding included, and the encoding alone."""
    for mode in RetrievalMode:  # warm-up: loads the dense matrix, the query session, SQLite pages
        engine.search(qs[0], k=K, mode=mode)
    times = time_modes(lambda q, m: engine.search(q, k=K, mode=RetrievalMode(m)), qs,
                       [m.value for m in RetrievalMode])
    encode: list[float] = []
    encode_cpu: list[float] = []
    for q in qs:
        started, started_cpu = time.perf_counter(), time.thread_time()
        engine.encode_query(q)
        encode.append((time.perf_counter() - started) * 1000)
        encode_cpu.append((time.thread_time() - started_cpu) * 1000)
    log("docs latency: " + ", ".join(f"{m} p50 {s['p50_ms']:.1f} ms" for m, s in times.items()))
    return {
        "index_chunks": index_chunks, "queries": len(qs), "distinct_queries": len(set(qs)),
        "query_source": source, "k": K,
        "modes": times,
        "query_encoding": ms_stats(encode, encode_cpu),
        "note": "Engine.search(k=10), query encoding included",
    }
