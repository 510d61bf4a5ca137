"""`evidex eval`: build (or reuse) an index of a corpus, run each pipeline on each question, report.

Indexes built here are cached under `<cache_dir>/eval/<key>` where the key covers the corpus files
(path, size, mtime), the metadata overlay, the configuration hash, the embedder and the ingest code, so a
second run re-embeds nothing and re-ingests nothing, and a changed chunker is never evaluated on an index
an older one built. Only the `KEEP_EVAL_INDEXES` most recently used indexes are kept: every corpus,
configuration or chunker change builds another, and an index of a few hundred pages takes tens of MB.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from evidex.admission.gate import Principal
from evidex.config import Config
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine, configured_embedder
from evidex.evaluation import metrics
from evidex.evaluation.answers import EvalSettings, Ranked
from evidex.evaluation.budget import BUDGETS_TOKENS, TokenCounter, within_budget
from evidex.evaluation.datasets import Question
from evidex.evaluation.gate_audit import GateAudit
from evidex.evaluation.measure import machine
from evidex.evaluation.signal_check import check_signals, quality
from evidex.evidence.plan import EvidencePlan, RequiredFamily, explicit_plan
from evidex.ingest import run as ingest_run
from evidex.pipeline import SearchRequest
from evidex.stores.sqlite_schema import MIGRATIONS
from evidex.trace import StageSwitches
from evidex.types import EvalPlan, RetrievalMode

READY_MARKER = "READY"  # written when an index is complete; its mtime is the index's last use
KEEP_EVAL_INDEXES = 16


PipelineFn = Callable[[Engine, Question, EvalSettings], Ranked]


def _plain(mode: RetrievalMode) -> PipelineFn:
    """A plain retriever: no plan, no gate (its `leaks` show what an ungated retriever would expose)."""
    def run(engine: Engine, question: Question, settings: EvalSettings) -> Ranked:
        depth = max(settings.k, 100) * 2  # deep enough for document-level recall@100
        return Ranked(tuple(c.chunk for c in engine.search(question.text, k=depth, mode=mode)))

    return run


_NAME_SEPARATORS = re.compile(r"[-_/.]+")


def oracle_plan(question: Question) -> EvidencePlan:
    """The plan the questions file gives: its families with their rescue queries (and aspects). A family
    given without a rescue query is searched by its name's words ("network-policy-provider" -> "network policy
    provider", "Ed Wood"): searching the question again would only find what retrieval already found, while
    the name says what the family is about."""
    families = [RequiredFamily(name=f.name, rescue_query=f.rescue_query or _NAME_SEPARATORS.sub(" ", f.name),
                               source_regex=f.source_regex, doc_ids=f.doc_ids) for f in question.families]
    return explicit_plan(families, question.aspects, question.text)


def _evidence(switches: StageSwitches) -> PipelineFn:
    def run(engine: Engine, question: Question, settings: EvalSettings) -> Ranked:
        request = SearchRequest(query=question.text, k=settings.k, switches=switches,
                                plan=oracle_plan(question) if settings.plan is EvalPlan.ORACLE else None,
                                principal=settings.principal, retrieved_at=settings.retrieved_at)
        outcome = engine.run(request)
        result = engine.result_of(outcome)  # timed with the search: the signals are part of the answer
        info: dict[str, Any] = {
            "rescue_searches": sum(len(s.decisions.get("searches", [])) for s in outcome.trace.stages),
            "outcome": outcome, "result": result, "context": tuple(c.chunk for c in outcome.context)}
        return Ranked(tuple(c.chunk for c in outcome.ranked), info)

    return run


PIPELINES: dict[str, PipelineFn] = {
    "bm25": _plain(RetrievalMode.BM25),
    "dense": _plain(RetrievalMode.DENSE),
    "hybrid": _plain(RetrievalMode.HYBRID),
    "+rerank": _evidence(StageSwitches.only("rerank")),
    "+rescue": _evidence(StageSwitches.only("rerank", "rescue")),
    "+reserve": _evidence(StageSwitches.only("rerank", "rescue", "reserve")),
    "+grade": _evidence(StageSwitches.only("rerank", "rescue", "reserve", "grade")),
    "full": _evidence(StageSwitches()),
}


def register_pipeline(name: str, fn: PipelineFn) -> None:
    PIPELINES[name] = fn


def corpus_fingerprint(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for root in paths:
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for p in files:
            st = p.stat()
            h.update(f"{p.resolve()}\x00{st.st_size}\x00{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def open_eval_engine(config: Config, corpus: Sequence[Path], metadata: Path | None, *,
                     embedder: Embedder | None = None, progress: Any = None,
                     log: Callable[[str], None] = lambda _: None, query_cache: int = 0) -> Engine:
    """An engine over `corpus`, built once and then reused from the cache. By default it keeps no query
    vectors (`query_cache`): each question's search embeds it, as a new question's would, though the
    pipelines ask the same questions in turn."""
    config = config.replace(embedding={"query_cache": query_cache})
    embedder = embedder or configured_embedder(config)
    fingerprint = embedder.fingerprint
    # The schema too: an index written by a newer evidex (another checkout sharing the cache) is refused by an
    # older one, which then could not evaluate at all.
    key_parts = [corpus_fingerprint(corpus), corpus_fingerprint([metadata]) if metadata else "-",
                 config.index_hash(), fingerprint, f"sqlite-schema-{len(MIGRATIONS)}",
                 ingest_run.ingest_code_fingerprint()]
    key = hashlib.sha256("|".join(key_parts).encode()).hexdigest()[:16]
    index_dir = config.cache_dir / "eval" / key
    indexed = config.replace(index={"path": str(index_dir)})
    engine = Engine.open(indexed, embedder=embedder)
    if engine.store.ledger.embedding_model() not in (None, embedder.model_id):  # recorded under an older naming
        log(f"rebuilding evaluation index {index_dir}: it names its model {engine.store.ledger.embedding_model()}")
        engine.close()
        shutil.rmtree(index_dir)
        engine = Engine.open(indexed, embedder=embedder)
    if not (index_dir / READY_MARKER).exists():
        log(f"building evaluation index in {index_dir}")
        report = engine.ingest(list(corpus), metadata=metadata, label="eval", progress=progress)
        log(f"ingested {report.documents} documents, {report.added_chunks} chunks "
            f"({report.embedded} embedded) in {report.seconds:.1f} s")
        (index_dir / READY_MARKER).write_text(json.dumps(report.to_dict()))
        # Measured as a process that opens the index sees it: Milvus Lite searches the rows its running server
        # wrote without their index, many times slower than once the file is opened again (see docs/milvus.md);
        # closing the engine stops that server.
        engine.close()
        engine = Engine.open(indexed, embedder=embedder)
    else:
        log(f"reusing evaluation index {index_dir}")
        os.utime(index_dir / READY_MARKER)
    for removed in prune_eval_cache(index_dir.parent, KEEP_EVAL_INDEXES):
        log(f"removed evaluation index {removed}: not among the {KEEP_EVAL_INDEXES} most recently used")
    return engine


def prune_eval_cache(root: Path, keep: int) -> list[Path]:
    """Delete all but the `keep` most recently used complete indexes under `root`; an index still being built
    (no marker yet) is never touched."""
    complete = [d for d in root.iterdir() if (d / READY_MARKER).is_file()]
    complete.sort(key=lambda d: (d / READY_MARKER).stat().st_mtime_ns, reverse=True)
    for d in complete[keep:]:
        shutil.rmtree(d, ignore_errors=True)
    return complete[keep:]


def evaluate(engine: Engine, questions: Sequence[Question], pipelines: Sequence[str], *, k: int = 10,
             plan: EvalPlan | str = EvalPlan.AUTO, principal: Principal | None = None,
             retrieved_at: datetime | None = None,
             progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Run every pipeline on every question and report each pipeline's quality, latency and signals (and,
    with a principal and an instant, what the gate let through); `ValueError` names an unknown pipeline or
    plan."""
    unknown = [p for p in pipelines if p not in PIPELINES]
    if unknown:
        raise ValueError(f"unknown pipeline(s) {unknown}; choose from: {', '.join(PIPELINES)}")
    plan = EvalPlan.from_str(plan)
    settings = EvalSettings(k, plan, principal, retrieved_at)
    audit = None
    gate_info = None
    if principal is not None and retrieved_at is not None:
        audit = GateAudit.build(engine, principal, retrieved_at)
        gate_info = {"principal_labels": list(principal.labels), "retrieved_at": retrieved_at.isoformat()}
    report: dict[str, Any] = {"k": k, "plan": plan.value, "questions": len(questions), "machine": machine(),
                              "snapshot_id": engine.store.snapshot_id(), "config_hash": engine.config.hash(),
                              "gate": gate_info, "pipelines": {}}
    counter = TokenCounter()
    for name in pipelines:
        fn = PIPELINES[name]
        fn(engine, questions[0], settings) if questions else None  # warm-up (model load, caches)
        rows = []
        for i, q in enumerate(questions, start=1):
            started = time.perf_counter()
            ranked = fn(engine, q, settings)
            elapsed_ms = (time.perf_counter() - started) * 1000
            rows.append((q, ranked, elapsed_ms))
            if progress is not None:
                progress(name, i, len(questions))
        report["pipelines"][name] = summarize(rows, k, counter)
        if any("result" in r.info for _, r, _ in rows):
            checked = [(q, r.info["result"], quality(q, r.chunks, r.top_k(k)),
                        metrics.family_recall(q, r.top_k(k)) == 1.0) for q, r, _ in rows]
            report["pipelines"][name]["signals"] = check_signals(checked)
        if audit is not None:
            report["pipelines"][name].update(audit.score(engine, rows, k, plan))
    return report


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.fmean(present), 4) if present else None


def at_tokens(rows: Sequence[tuple[Question, Ranked, float]], counter: TokenCounter,
              budgets: Sequence[int] = BUDGETS_TOKENS) -> dict[str, dict[str, float | None]]:
    """Family recall and all-found of each answer read within each budget of tokens (see `evaluation.budget`):
    a pipeline's chunks in its own order, its context first."""
    out: dict[str, dict[str, float | None]] = {}
    for budget in budgets:
        recalls = [metrics.family_recall(q, within_budget(r.chunks, budget, counter)) for q, r, _ in rows]
        out[str(budget)] = {"family_recall": _mean(recalls),
                            "all_found": _mean([1.0 if x == 1.0 else 0.0 for x in recalls])}
    return out


def summarize(rows: Sequence[tuple[Question, Ranked, float]], k: int,
              counter: TokenCounter | None = None) -> dict[str, Any]:
    recalls = [metrics.family_recall(q, r.top_k(k)) for q, r, _ in rows]
    # The same over the first k distinct pages: a plain retriever often spends its k chunks on a few pages
    # (several chunks of one long page), which the evidence pipelines' one-chunk-per-page context does not.
    page_recalls = [metrics.family_recall(q, metrics.doc_ranking(r.info.get("context", r.chunks))[:k])
                    for q, r, _ in rows]
    latencies = [ms for _, _, ms in rows]
    # An evidence pipeline ranks only its candidate pool (about 60 chunks): recall@100 is not defined for it.
    pooled = any("context" in r.info for _, r, _ in rows)
    out: dict[str, Any] = {
        "questions": len(rows),
        "family_recall": _mean(recalls),
        "all_found": _mean([1.0 if x == 1.0 else 0.0 for x in recalls]),
        "family_recall_pages": _mean(page_recalls),
        "all_found_pages": _mean([1.0 if x == 1.0 else 0.0 for x in page_recalls]),
        "ndcg@10": _mean([metrics.ndcg_at(q, r.chunks, 10) for q, r, _ in rows]),
        "recall@100": None if pooled else _mean([metrics.recall_at(q, r.chunks, 100) for q, r, _ in rows]),
        "mrr": _mean([metrics.reciprocal_rank(q, r.chunks) for q, r, _ in rows]),
        "latency_ms": {"p50": round(metrics.percentile(latencies, 50), 2),
                       "p95": round(metrics.percentile(latencies, 95), 2)},
    }
    if counter is not None:
        out["at_tokens"] = at_tokens(rows, counter)
    extra_keys = sorted({key for _, r, _ in rows for key in r.info if isinstance(r.info[key], (int, float))})
    for key in extra_keys:
        out[key] = _mean([float(r.info[key]) for _, r, _ in rows if key in r.info])
    # Per question, what an analyst reads first: which families the answer missed, and whether each was ranked
    # just out of the k slots or never retrieved at all.
    out["per_question"] = [{"id": q.id, "family_recall": round(recall, 4),
                            "missed": metrics.missed_families(q, r.top_k(k), r.chunks)}
                           for (q, r, _), recall in zip(rows, recalls, strict=True)]
    return out
