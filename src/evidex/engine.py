"""The facade every interface calls: open, ingest, search, rollback, stats."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.admission.audit import AuditLog
from evidex.admission.gate import AdmissionGate, GatePolicy, Principal, RejectionVisibility, hidden_path_reasons
from evidex.admission.verification import Verification, VerificationLog
from evidex.config import Config
from evidex.embedding.cache import EmbeddingCache, QueryVectors
from evidex.embedding.protocol import Embedder
from evidex.errors import BackendUnavailable, ConfigError, EvidexError, IngestError, StoreError
from evidex.evidence.plan import EvidencePlan
from evidex.evidence.terms import chunk_terms
from evidex.ingest.dead_letters import letter_target, reload_letter, settled_letters, still_duplicate
from evidex.ingest.limits import DocumentLimits
from evidex.ingest.loaders import LoadFailure, SkippedPath, iter_documents
from evidex.ingest.overlay import IngestRules, ProvenanceDefaults, read_overlay
from evidex.ingest.run import FamilyRules, Progress, ingest
from evidex.pipeline import PipelineParts, SearchOutcome, SearchRequest, run_search, shapes_from_config
from evidex.rerank.fused import context_terms
from evidex.result import ResultContext, build_result, decision_json
from evidex.retrieval.corpus import inlink_contexts, read_ahead
from evidex.retrieval.hybrid import retrieve
from evidex.serving import WARM_TERM_SETS_MAX, WARM_UP_QUERY, common_words, settle_heap
from evidex.stores.ann import AnnSettings
from evidex.stores.protocol import Store, describe_model_mismatch
from evidex.stores.sqlite import SqliteStore
from evidex.types import (
    BatchInfo,
    Candidate,
    Chunk,
    DeadLetter,
    Document,
    IndexBackend,
    IngestReport,
    RetrievalMode,
    SearchFilters,
)


def open_store(config: Config) -> Store:
    if config.index.backend is IndexBackend.SQLITE:
        return SqliteStore(config.index_dir, title_weight=config.retrieval.title_weight, ann=AnnSettings(
            min_chunks=config.index.ann_min_chunks, exact_below_share=config.index.ann_exact_share))
    if config.index.backend is IndexBackend.MILVUS:
        try:
            from evidex.stores.milvus import MilvusStore
        except ImportError as exc:
            raise BackendUnavailable(f"the milvus backend needs: pip install -e '.[milvus]' ({exc})") from None
        return MilvusStore.from_config(config, token=config.milvus_token)
    raise ConfigError(f"config key 'index.backend': unknown backend {config.index.backend!r}")


VERIFICATIONS_FILE = "verifications.sqlite"
_SNAPSHOT_ATTEMPTS = 3  # runs of one search before a stream of commits is reported instead
def ready_to_serve(engine: Engine) -> None:
    """A serving (or measuring) process's engine before its first request: warm, then the heap settled."""
    engine.warm_up()
    settle_heap()


def record_version(chunk: Chunk) -> str:
    """The version a human verification is tied to: the source version, else the chunk's content."""
    return chunk.provenance.source_version or f"content:{chunk.content_hash[:16]}"


def configured_embedder(config: Config) -> Embedder:
    """The embedder `config` names (built from the packaged model on first use; no download)."""
    from evidex.embedding import load_embedder

    e = config.embedding
    model_dir = Path(e.model_dir).expanduser() if e.model_dir else None  # None: the default model
    return load_embedder(e.backend, model_dir, config.cache_dir, e.threads or None, e.device, e.query_threads)


class Engine:
    """One index, one configuration. Thread-safe for concurrent searches; close it (or use `with`) when done.

        with Engine.open(load_config("evidex.toml")) as engine:
            engine.ingest(["handbook/"], label="weekly import")
            result = engine.search_with_reasoning("who approves a production database restore?",
                                                  principal=Principal.of("dana", ["ops-read"]))
    """

    def __init__(self, config: Config, store: Store, embedder: Embedder | None = None, *,
                 owns_store: bool = True) -> None:
        self.config = config
        self.store = store
        self._owns_store = owns_store  # close() closes the store (not for an engine borrowing another's)
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        self._cache: EmbeddingCache | None = None
        self._parts: PipelineParts | None = None
        self._model_checked = False
        self._query_vectors = QueryVectors(config.embedding.query_cache)
        self._verifications: VerificationLog | None = None

    @classmethod
    def open(cls, config: Config | None = None, *, embedder: Embedder | None = None,
             store: Store | None = None) -> Engine:
        config = config or Config()
        return cls(config, store or open_store(config), embedder)

    def with_config(self, config: Config) -> Engine:
        """The same index and embedder under another configuration (e.g. other reranking weights). The new engine
        borrows the store: closing it leaves this engine working; closing this one closes the store for both."""
        if config.index_hash() != self.config.index_hash():
            raise ConfigError("with_config: the new configuration needs a different index (chunking, embedding "
                              "or family rules changed); open a new engine instead")
        return Engine(config, self.store, self._embedder, owns_store=False)

    # ---- embedding ----------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """Loaded on first use: stats, BM25 search and rollback never pay for the model."""
        with self._embedder_lock:
            if self._embedder is None:
                self._embedder = configured_embedder(self.config)
            return self._embedder

    @property
    def embedding_cache(self) -> EmbeddingCache:
        if self._cache is None:
            self._cache = EmbeddingCache(self.config.cache_dir)
        return self._cache

    def encode_query(self, text: str) -> npt.NDArray[np.float32]:
        if not self._model_checked:  # a query vector of another model would rank by noise, silently
            indexed_with = self.store.ledger.embedding_model()
            if indexed_with is not None and indexed_with != self.embedder.model_id:
                raise StoreError(describe_model_mismatch(indexed_with, self.embedder.model_id))
            self._model_checked = indexed_with is not None
        return self._query_vectors.get(text, self.embedder.embed_query)

    # ---- ingest -------------------------------------------------------------------------------------
    def ingest(self, paths: Sequence[str | Path], *, metadata: str | Path | None = None, label: str = "",
               progress: Progress | None = None, sync: bool = False,
               default_labels: str | Sequence[str] | None = None, citation_base: str | None = None,
               include: Sequence[str] | None = None, exclude: Sequence[str] | None = None) -> IngestReport:
        """Ingest `paths` as one batch. `sync=True`: `paths` are the whole corpus, and a document the index
        holds that is no longer among them (its file deleted) is retired in the same batch. `default_labels`,
        `citation_base` (a URL template such as "https://docs.example.com/{path}"), `include` and `exclude`
        (globs over a file's path under its folder) replace the configuration's `[ingest]` keys when given
        (`evidex.ingest.overlay`): engine.ingest(["docs"], default_labels=["staff"], exclude=["drafts/**"])."""
        rules = IngestRules.resolve(self.config.ingest, default_labels=default_labels, citation_base=citation_base,
                                    include=include, exclude=exclude)
        select = rules.selection.admits if rules.selection else None
        missing = [str(p) for p in paths if not Path(p).exists()]
        if sync and missing:  # a mistyped path would otherwise retire everything it held
            raise IngestError(f"no such file or directory: {', '.join(missing)} (a sync ingest retires what "
                              "its paths no longer hold, so every path must exist)")
        empty = [str(p) for p in paths if sync and next((i for i in iter_documents(Path(p), select=select)
                                                         if not isinstance(i, SkippedPath)), None) is None]
        if empty:  # an unmounted or emptied folder: retiring everything it held is more likely a mistake
            raise IngestError(f"{', '.join(empty)} holds no documents: a sync would retire everything indexed "
                              "from it. Ingest without --sync (or leave the path out) if that is what you want")
        overlay = read_overlay(Path(metadata)) if metadata else None
        limits = DocumentLimits.from_config(self.config.ingest)
        items: Iterable[Document | LoadFailure | SkippedPath] = (item for p in paths
                                                   for item in iter_documents(Path(p), select=select, limits=limits))
        settled = settled_letters(self.store.ledger.dead_letters(), paths, sync=sync)
        return self._ingest(items, overlay, label or ", ".join(str(p) for p in paths), progress, settled,
                            record_repeats=False, sync=sync, defaults=rules.defaults)

    def retry_dead_letters(self, *, metadata: str | Path | None = None,
                           progress: Progress | None = None) -> IngestReport:
        """Load every dead letter again; the ones that now load land in a new batch (with the configuration's
        `[ingest]` default labels and citation base)."""
        overlay = read_overlay(Path(metadata)) if metadata else None
        live = set(self.store.ledger.document_hashes())
        items: list[Document | LoadFailure] = []
        now_loading: list[str] = []
        seen: set[tuple[str, str]] = set()
        for letter in self.store.ledger.dead_letters():
            target = letter_target(letter)
            if target.is_absolute() and not target.exists():  # its file was deleted: nothing is left to retry
                now_loading.append(letter.source)
                continue
            reloaded = [still_duplicate(item, letter, live) for item in reload_letter(letter)]
            # A file can be named twice (by its own letter and by its directory's): loaded once, failed once.
            keys = [("failure", f"{i.source}\0{i.reason}") if isinstance(i, LoadFailure) else ("document", i.doc_id)
                    for i in reloaded]
            items.extend(i for i, key in zip(reloaded, keys, strict=True) if key not in seen)
            seen.update(keys)
            if not any(isinstance(i, LoadFailure) and i.source == letter.source for i in reloaded):
                now_loading.append(letter.source)
        return self._ingest(items, overlay, "dead-letter retry", progress, now_loading, check_overlay=False,
                            defaults=IngestRules.resolve(self.config.ingest).defaults)

    def _ingest(self, items: Iterable[Document | LoadFailure | SkippedPath], overlay: Any, label: str,
                progress: Progress | None, resolved: Sequence[str] = (), *, record_repeats: bool = True,
                sync: bool = False, check_overlay: bool = True,
                defaults: ProvenanceDefaults | None = None) -> IngestReport:
        known = self.store.ledger.dead_letters()
        return ingest(self.store, lambda: self.embedder, items, chunking=self.config.chunking,
                      families=FamilyRules.from_config(self.config.families), overlay=overlay,
                      cache=self.embedding_cache, batch_size=self.config.embedding.batch_size, label=label,
                      known_dead_letters=known, resolved_dead_letters=resolved, progress=progress,
                      record_repeats=record_repeats, sync=sync, check_overlay=check_overlay, defaults=defaults,
                      limits=DocumentLimits.from_config(self.config.ingest),
                      citation_schemes=self.config.gate.citation_schemes)

    # ---- search -------------------------------------------------------------------------------------
    def search(self, query: str, *, k: int = 10, mode: RetrievalMode = RetrievalMode.HYBRID,
               filters: SearchFilters | None = None) -> list[Candidate]:
        """Ranked chunks (plain hybrid retrieval, no gate): the building block of the full pipeline, for operators
        and evaluations; an answer's evidence comes from `search_with_reasoning`, which admits what a principal may
        cite. `engine.search("restore drill", k=5, mode=RetrievalMode.BM25)[0].chunk.source`."""
        return retrieve(self.store, self.encode_query, query, mode=mode, limit=k,
                        settings=self.config.retrieval, filters=filters)

    def pipeline_parts(self) -> PipelineParts:
        if self._parts is None:
            gate = AdmissionGate(GatePolicy.from_config(self.config.gate.rules, self.config.gate.visibility,
                                                        self.config.gate.citation_schemes))
            cross_encoder = None
            if self.config.evidence.cross_encoder_dir:
                from evidex.rerank.cross_encoder import load_cross_encoder

                ev = self.config.evidence
                cross_encoder = load_cross_encoder(Path(ev.cross_encoder_dir).expanduser(), ev.cross_encoder_device)
            shapes = shapes_from_config(self.config)
            examples = {s.name: self.embedder.embed_documents(list(s.examples)) for s in shapes if s.examples}
            self._parts = PipelineParts(store=self.store, encode=self.encode_query, config=self.config, gate=gate,
                                        cross_encoder=cross_encoder, shapes=shapes, shape_examples=examples)
        return self._parts

    def run(self, request: SearchRequest) -> SearchOutcome:
        """The full evidence pipeline for one request (see `evidex.pipeline`), on one index snapshot: a
        search's reads are not one transaction, so when a commit lands while it runs (the snapshot differs
        before and after) it runs again. A result had named the later snapshot while holding scores of the
        earlier one, and replay on that snapshot then differed."""
        for _ in range(_SNAPSHOT_ATTEMPTS):
            before = self.store.snapshot_id()
            outcome = run_search(self.pipeline_parts(), request)
            if self.store.snapshot_id() == before:
                return dataclasses.replace(outcome, snapshot_id=before)
        raise StoreError(f"the index changed during each of {_SNAPSHOT_ATTEMPTS} attempts at this search "
                         "(ingest is committing batches): try again")

    def warm_up(self) -> None:
        """Load what a first search would (the model, the pipeline's parts, the index snapshot and its link
        index, the words of a question) and, on an index of at most WARM_TERM_SETS_MAX chunks, every chunk's
        term set (a search computes it for each chunk it meets first: ~150 per k8s question, 5 ms; all 3,563 k8s
        chunks take 0.2 s and 3 MB), the terms of every link context, and the sparse matches of its most common
        words (`common_words`: a search reads a word's matches the first time it meets the word, and a common
        word's are the long reads; on k8s 0.4-1.1 s and 4.8 MB). A server's first requests then cost what later
        ones do. An index that cannot be searched (written with another model) is left to fail on the request,
        where the caller reads why."""
        with contextlib.suppress(EvidexError):
            self.run(SearchRequest(query=WARM_UP_QUERY))
            if self.store.ledger.chunk_count() <= WARM_TERM_SETS_MAX:
                chunks = self.store.all_chunks()
                for chunk in chunks:
                    chunk_terms(chunk)
                for contexts in inlink_contexts(self.store, sorted({c.source for c in chunks})).values():
                    for context in contexts:
                        context_terms(context)
                read_ahead(self.store, common_words(chunks))

    def default_principal(self) -> Principal:
        g = self.config.gate
        return Principal.of(g.default_principal, [x.strip() for x in g.default_labels.split(",") if x.strip()])

    @property
    def verifications(self) -> VerificationLog:
        if self._verifications is None:
            self._verifications = VerificationLog(self.config.index_dir / VERIFICATIONS_FILE)
        return self._verifications

    def search_with_reasoning(self, query: str, aspect_focus: str | None = None, *, k: int = 10,
                              principal: Principal | None = None, retrieved_at: datetime | None = None,
                              plan: EvidencePlan | None = None) -> dict[str, Any]:
        """The agent tool: the decision for `query` as seen by `principal` at `retrieved_at` (JSON-ready).
        `principal` defaults to the configuration's ([gate] default_principal and default_labels); `retrieved_at`
        to now (pin it to replay a decision). The result holds the admitted evidence grouped by source (each chunk
        with its citation), the families covered and missing, rejections, signals and the recommendation:

            result = engine.search_with_reasoning("how is a lost laptop reported?",
                                                  principal=Principal.of("sam", ["it-read"]))
            action = result["decision"]["recommendation"]["action"]   # proceed, re-query or stop
            cited = [c["citation"] for source in result["evidence"] for c in source["chunks"]]
        """
        principal = principal or self.default_principal()
        request = SearchRequest(query=query, k=k, principal=principal, retrieved_at=retrieved_at,
                                aspect_focus=aspect_focus, plan=plan)
        outcome = self.run(request)
        result = self.result_of(outcome)
        if self.config.gate.audit_log and outcome.gate is not None:
            log = AuditLog(self.config.index_dir / self.config.gate.audit_log,
                           max_bytes=self.config.gate.audit_max_bytes, keep=self.config.gate.audit_keep)
            request_id = hashlib.sha256(decision_json(result).encode()).hexdigest()[:16]
            log.append(outcome.gate, request_id=request_id, principal=principal,
                       retrieved_at=outcome.retrieved_at, query=query)
        return result

    def result_of(self, outcome: SearchOutcome) -> dict[str, Any]:
        """The JSON-ready result of a pipeline outcome: evidence, families, rejections, signals, cost."""
        verified = self.verifications.for_records([(c.chunk.record_id, record_version(c.chunk))
                                                   for c in outcome.context], as_of=outcome.retrieved_at)
        policy = self.pipeline_parts().gate
        visibility = policy.policy.visibility if policy else RejectionVisibility.REASONS_EXCEPT_ACCESS
        ctx = ResultContext(snapshot_id=outcome.snapshot_id or self.store.snapshot_id(), config_hash=self.config.hash(),
                            embedding_model=self.embedder.fingerprint, chunk_size=self.config.chunking.max_chars,
                            visibility=visibility,
                            hide_paths_of=hidden_path_reasons(unpublished=self.config.gate.hide_unpublished_paths,
                                                              rejected=self.config.gate.hide_rejected_paths))
        return build_result(outcome, ctx, verified)

    def verify(self, record_id: str, *, claim: str, by: str, at: datetime | None = None) -> Verification:
        """Record that a person checked `claim` against the record's current source version."""
        chunk = self.show(record_id)
        if chunk is None:
            raise StoreError(f"no live record {record_id!r}")
        if not claim.strip() or not by.strip():
            raise ConfigError("a verification needs a non-empty --claim and --by")
        version = record_version(chunk)
        return self.verifications.record(record_id, version, claim.strip(), by.strip(),
                                         at or datetime.now(UTC).replace(microsecond=0))

    # ---- operations ---------------------------------------------------------------------------------
    def rollback(self, batch_id: str | None = None) -> BatchInfo:
        return self.store.rollback(batch_id)

    def show(self, record_id: str) -> Chunk | None:
        found = self.store.get([record_id])
        return found[0] if found else None

    def dead_letters(self) -> list[DeadLetter]:
        return self.store.ledger.dead_letters()

    def batches(self) -> list[BatchInfo]:
        return self.store.ledger.batches()

    def stats(self) -> dict[str, Any]:
        return {**self.store.ledger.stats(), "embedding_model": self.store.ledger.embedding_model(),
                "config_hash": self.config.hash()}

    def close(self) -> None:
        if self._owns_store:
            self.store.close()
        if self._cache is not None:
            self._cache.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
