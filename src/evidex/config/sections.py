"""The sections of `evidex.toml`, `[index]` to `[gate]`: every key with its type, default, allowed values and
what it does (see `evidex.config.schema`). `docs/configuration.md` is generated from these declarations.

(ruff's RUF009 cannot tell that `setting` declares a field; a mode-typed default is marked for it.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evidex.config.schema import Check, setting
from evidex.types import EmbeddingBackend, FusionMode, GateRule, IndexBackend, RejectionVisibility

_DEVICE = r"^(?:cpu|cuda(?::\d+)?)$"
_DEVICE_TEXT = "cpu, cuda or cuda:N"
_OFF = "0 turns it off"


@dataclass(frozen=True)
class IndexConfig:
    """`[index]`: where the index is stored."""

    path: str = setting(".evidex", "Directory of the index (index.sqlite, keys, audit log), relative to the "
                                   "config file.", in_hash=False)
    backend: IndexBackend = setting(IndexBackend.SQLITE, "The store: one SQLite file, or Milvus (a server at "  # noqa: RUF009
                                                         "`uri`, or Milvus Lite when `uri` is empty).")
    uri: str = setting("", "Address of a remote backend; its token comes from EVIDEX_MILVUS_TOKEN, never from a "
                           "file.")
    collection: str = setting("", "Milvus collection name; empty = evidex_<index directory name>.")
    ann_min_chunks: int = setting(100_000, "Live chunks from which the SQLite store's dense search is approximate "
                                           "(faiss IVF, candidates scored exactly; needs the `ann` extra), exact "
                                           "below.", ge=0, zero="0 makes it approximate at any size")
    ann_exact_share: float = setting(0.05, "A filter letting through less than this share of the chunks is "
                                           "searched exactly over them, even above ann_min_chunks.", ge=0.0,
                                     le=1.0)


@dataclass(frozen=True)
class EmbeddingConfig:
    """`[embedding]`: the model that turns chunks and questions into vectors."""

    backend: EmbeddingBackend = setting(EmbeddingBackend.ONNX, "onnx runs the int8 export on onnxruntime alone; "  # noqa: RUF009
                                                               "torch runs the model itself (needed for a GPU).")
    device: str = setting("cpu", "Where the torch backend runs. A GPU speeds up ingest; the vectors are the same.",
                          pattern=_DEVICE, pattern_text=_DEVICE_TEXT)
    model_dir: str = setting("", "A local sentence-transformers directory; empty = the packaged "
                                 "all-MiniLM-L6-v2.")
    threads: int = setting(0, "Documents embedded in parallel at ingest.", ge=0, zero="0 uses every core",
                           in_hash=False)
    query_threads: int = setting(2, "Threads of one query's inference (onnx): two when no other inference runs, "
                                    "one beside another, so a query never waits for a core. The vectors are the "
                                    "same on any count.", ge=1, in_hash=False)
    batch_size: int = setting(32, "Chunks embedded per model call at ingest.", ge=1)
    query_cache: int = setting(256, "Vectors of the last N query texts kept in memory: a re-query repeats its "
                                    "question, and a kept vector is the one the model gives again.", ge=0,
                               zero="0 keeps no query vector", in_hash=False)
    cache_dir: str = setting("~/.cache/evidex", "The embedding cache (by model and content hash) and the ONNX "
                                                "export, shared by every index.", in_hash=False)


@dataclass(frozen=True)
class ChunkingConfig:
    """`[chunking]`: how documents are cut into indexed chunks (changing it needs a fresh index)."""

    max_chars: int = setting(1200, "Longest chunk, in characters: a longer section is split at paragraph, line, "
                                         "then word boundaries.",
                             ge=100)
    overlap_chars: int = setting(100, "Characters a chunk repeats from the one before, so a sentence cut at a "
                                      "boundary is whole in one of them.")
    min_chars: int = setting(200, "A trailing piece shorter than this joins its neighbour.")


@dataclass(frozen=True)
class RetrievalConfig:
    """`[retrieval]`: the broad first search, dense and BM25 fused."""

    fusion: FusionMode = setting(FusionMode.WEIGHTED, "weighted sums the min-max normalised scores; rrf sums "  # noqa: RUF009
                                                      "reciprocal ranks (ignores score gaps).")
    dense_weight: float = setting(0.5, "Weight of the dense ranking in the fusion.", ge=0)
    sparse_weight: float = setting(0.5, "Weight of the BM25 ranking in the fusion.", ge=0)
    rrf_k: int = setting(60, "The k of reciprocal rank fusion, 1 / (k + rank): larger flattens the ranks.", ge=1)
    candidate_pool: int = setting(100, "Hits each retriever returns before fusion.", ge=1)
    title_weight: float = setting(1.0, "BM25 weight of the title field relative to the body; a title match "
                                       "must count, never against a page.", gt=0)


@dataclass(frozen=True)
class EvidenceConfig:
    """`[evidence]`: reranking, rescue, bridging, reservation, grading and the recommendation.

    The automatic planner reads English questions: it splits a composite question at English connectives ("and
    how", "but", "while"), drops English question and function words ("what", "how", "the", "our"), reads a name
    as a run of capitalised words with English connectors ("of", "and", "the") and a possessive "'s", and a
    nested question by English relative phrasing ("the country where ..."). A question in another language is
    still searched (dense, BM25 and reranking work on any language the embedder knows), but its automatic plan
    finds fewer aspects: declare its families in `[[shapes]]` or in the request's plan. Identifiers and quoted
    strings are read in any language."""

    pool_size: int = setting(60, "Fused candidates that go on to reranking.", ge=1)
    wide_limit: int = setting(50, "Hits of one rescue search (one per missing family, never a loop).", ge=1)
    min_matches: int = setting(1, "A required family with fewer candidates that grading would keep than this is "
                                  "rescued.")
    max_per_doc: int = setting(1, "Chunks of one document in the top k before the cap is lifted.",
                               zero="0 = no cap")
    max_aspects: int = setting(6, "Obligations an automatic plan may create from the question's clauses (English "
                                  "clauses: see above).", ge=0)
    frame_word_share: float = setting(0.05, "A clause every word of which more than this share of the readable "
                                            "records holds frames the question (\"How do I turn that on\") and is "
                                            "no obligation; 1 keeps every clause.")
    frame_min_records: int = setting(1000, "Frames are dropped only on an index of at least this many readable "
                                           "records: in a small one the subject's own words are that common.")
    w_cross_encoder: float = setting(0.4, "Rerank weight of the cross-encoder score (when one is configured).")
    w_retrieval: float = setting(0.8, "Rerank weight of the fused retrieval score.")
    w_lexical: float = setting(0.3, "Rerank weight of the question words a chunk holds, by rarity.")
    w_title: float = setting(0.1, "Rerank weight of the share of a page title's words the question holds.")
    w_linked: float = setting(0.3, "Rerank weight of a page titled by a name the best evidence mentions (a bridge "
                                   "of a nested question).")
    w_inlink: float = setting(0.5, "Rerank weight of the inlink match: what other readable pages say around "
                                   "their links to the candidate's page, in the question's words, which the page "
                                   "itself may not use.")
    qualified_title_share: float = setting(0.02, "Titles are read as encyclopaedia titles, a name and its qualifier "
                                                 "(\"Salt Road (film)\", \"Caldport, Westshire\" name \"Salt Road\", "
                                                 "\"Caldport\"), only in an index where at least this share of the "
                                                 "distinct titles end in a parenthesised qualifier; elsewhere a title "
                                                 "is one name (\"Configure Liveness, Readiness and Startup Probes\").",
                                           ge=0, zero="0 always reads qualifiers; above 1 never")
    bridge_from_top: int = setting(3, "Leading candidates whose named entities a nested question follows.", ge=0,
                                   zero=_OFF)
    bridge_max_searches: int = setting(4, "Title look-ups of all bridge hops together (a bound, never a loop).",
                                       ge=0, zero=_OFF)
    bridge_hops: int = setting(1, "Hops a nested question follows from its leading evidence.", ge=0, zero=_OFF)
    bridge_context_names: int = setting(2, "Names the leading evidence adds that one more search joins to the "
                                           "question, for the page titled by neither.", ge=0, zero=_OFF)
    cited_min_pages: int = setting(2, "A candidate page linked from this many leading pages gains `cited_bonus` "
                                      "(its authors tied it to the evidence).", zero=_OFF)
    cited_bonus: float = setting(0.2, "Rerank bonus of a page the leading pages cite.")
    name_lookups: int = setting(4, "Title look-ups for named aspects no page in the pool is titled by.", ge=0,
                                zero=_OFF)
    exact_token_bonus: float = setting(0.03, "Rerank bonus per verbatim identifier of the question a chunk holds "
                                             "(at most two): a tie-breaker, kept small so it never outranks "
                                             "meaning.")
    cross_encoder_dir: str = setting("", "A local sentence-transformers or ONNX cross-encoder; empty = none.")
    cross_encoder_top_n: int = setting(30, "Candidates the cross-encoder scores (its cost is linear in this).")
    cross_encoder_device: str = setting("cpu", "Where a sentence-transformers cross-encoder runs.",
                                        pattern=_DEVICE, pattern_text=_DEVICE_TEXT)
    requery_threshold: float = setting(0.7, "Aspect coverage below this recommends re-query.", ge=0, le=1)
    min_question_word_share: float = setting(0.4, "Evidence holding less of the question's words, each weighted "
                                                  "by its rarity among the candidates, recommends re-query: it may "
                                                  "be off-topic.", ge=0, le=1)
    min_proceed_confidence: float = setting(0.2, "A covered answer whose confidence is below this, with some of "
                                                 "the question's words in no evidence, recommends re-query, not "
                                                 "proceed.", ge=0, le=1)
    grade_correct: float = setting(0.55, "Grading: a chunk scoring at least this is correct (kept).")
    grade_incorrect: float = setting(0.15, "Grading: a chunk scoring below this is incorrect (dropped unless it "
                                           "is a required family's last validated chunk).")


@dataclass(frozen=True)
class GateConfig:
    """`[gate]`: the admission gate and who the CLI asks as."""

    rules: str = setting("access,freshness,citation", "Admission rules, comma-separated; each runs for every "
                                                      "candidate.", items=GateRule)
    visibility: RejectionVisibility = setting(RejectionVisibility.REASONS_EXCEPT_ACCESS,  # noqa: RUF009
                                              "What a requester sees of rejected candidates; access denials as "
                                              "ids would let a question probe restricted records.")
    default_principal: str = setting("anonymous", "The principal of the CLI and of MCP over stdio.")
    default_labels: str = setting("", "Comma-separated access labels of the default principal.")
    default_owner: str = setting("", "Who takes the next step when no rejected record names an owner.")
    audit_log: str = setting("audit.jsonl", "The operators' audit log, relative to the index directory; empty = "
                                            "off.")
    audit_max_bytes: int = setting(64_000_000, "The audit log is renamed audit.jsonl.1 (the one before to .2, ...) "
                                               "before it grows past this.", ge=0, zero="0 never rotates",
                                   in_hash=False)
    audit_keep: int = setting(5, "Rotated audit logs kept; the oldest is deleted.", ge=0, in_hash=False)
    citation_schemes: str = setting("http,https", "Comma-separated URI schemes a citation may use; a record citing "
                                                  "another (javascript:, data:) has no citation to the gate.")
    hide_unpublished_paths: bool = setting(False, "Requesters see no source path of a rejected record that is not "
                                                  "yet published (an embargoed page's name is news).")
    hide_rejected_paths: bool = setting(False, "Requesters see no source path of any rejected record.")


@dataclass(frozen=True)
class SignalsConfig:
    """`[signals]`: the confidence model and the decision that follows from it (see `evidex calibrate`)."""

    confidence_model: str = setting("", "A confidence model written by `evidex calibrate` on your own labelled "
                                        "questions, relative to the config file; empty = the shipped model, fitted "
                                        "on the development sets of every domain.")
    proceed_confidence: float = setting(0.7, "Proceed only when the confidence (the probability that the context "
                                              "holds every required piece of evidence) is at least this and no "
                                              "required family is missing; below it, re-query.", ge=0, le=1)
    aspect_rank_depth: int = setting(2, "An aspect whose words the context does not hold is still covered when the "
                                        "context holds one of this many pages that speak of it best among the "
                                        "admitted candidates.", ge=0, zero="0 judges aspects by their words alone")


@dataclass(frozen=True)
class IngestConfig:
    """`[ingest]`: provenance for documents that carry none, and which files of a folder are read (see
    `evidex.ingest.overlay`; CLI flags of `evidex ingest` replace these). What an ingest wrote is in the index
    snapshot a result names, so none of these keys is in the configuration hash."""

    default_labels: str = setting("", "Comma-separated access labels for a document with none (front matter and "
                                      "overlay win).", in_hash=False)
    citation_base: str = setting("", "Citation URI template for a document without one, e.g. "
                                     "https://docs.example.com/{path}; fields {source} {path} {route} {dir} {name} "
                                     "{stem}.", in_hash=False)
    include: str = setting("", "Comma-separated globs over a file's path under its folder; empty reads every "
                               "file.", in_hash=False)
    exclude: str = setting("", "Comma-separated globs; a file matching one is not read (exclusion wins).",
                           in_hash=False)
    max_document_bytes: int = setting(8_000_000, "A larger file (or JSONL line) is a dead letter, not read.", ge=0,
                                      zero=_OFF, in_hash=False)
    document_timeout_s: float = setting(10.0, "Reading or chunking one document longer than this makes it a dead "
                                              "letter; the batch goes on.", ge=0, zero=_OFF, in_hash=False)
    follow_symlinks_outside: bool = setting(False, "Read files that symbolic links lead to outside the folder "
                                                   "ingested (else they are skipped and reported).", in_hash=False)


@dataclass(frozen=True)
class ServerConfig:
    """`[server]`: what one API key, and all of them together, may hold of a serving process (`evidex serve`,
    `evidex mcp --transport http`). A key's rate is its own (`evidex keys create --rate`: searches per minute);
    `requests_per_call` weighs the other requests against it. None of these changes a result, so none is in the
    configuration hash."""

    requests_per_call: float = setting(4.0, "Every authenticated request counts: a key may make this many requests "
                                            "of any kind (MCP initialize, tools/list, a stream opened, a health "
                                            "check) per search its rate allows, and a search counts against both.",
                                       ge=1, in_hash=False)
    max_streams_per_key: int = setting(2, "Event streams (MCP over HTTP: GET /mcp) one key may hold open at once; "
                                          "one more is refused with 429.", ge=1, in_hash=False)
    max_streams: int = setting(32, "Event streams all keys together may hold open at once per process; one more "
                                   "is refused with 503.", ge=1, in_hash=False)
    stream_idle_timeout_s: float = setting(30.0, "An event stream that has sent nothing for this long is "
                                                 "closed.", gt=0, in_hash=False)
    stream_max_s: float = setting(300.0, "An event stream is closed this long after it opened, busy or not.", gt=0,
                                  in_hash=False)


CHECKS: dict[type[Any], tuple[Check, ...]] = {
    RetrievalConfig: (
        Check("`dense_weight` and `sparse_weight` are not both 0.",
              lambda s: s.dense_weight + s.sparse_weight != 0,
              lambda s: "config keys 'retrieval.dense_weight' and 'retrieval.sparse_weight' are both 0"),
    ),
    ChunkingConfig: (
        Check("`overlap_chars` is >= 0 and below half of `max_chars`.",
              lambda s: 0 <= s.overlap_chars < s.max_chars // 2,
              lambda s: "config key 'chunking.overlap_chars' must be >= 0 and < max_chars / 2"),
    ),
    EmbeddingConfig: (
        Check("A `device` other than cpu needs `backend = \"torch\"` (the ONNX backend runs on the CPU).",
              lambda s: s.device == "cpu" or s.backend is EmbeddingBackend.TORCH,
              lambda s: f"config key 'embedding.device': {s.device!r} needs backend = 'torch' "
                        "(the ONNX backend runs on the CPU)"),
    ),
    IngestConfig: (
        Check("`citation_base`, when set, names only known fields and gives an absolute URI.",
              lambda s: not _citation_problem(s.citation_base),
              lambda s: f"config key 'ingest.citation_base': {_citation_problem(s.citation_base)}"),
    ),
    EvidenceConfig: (
        Check("`grade_incorrect` is <= `grade_correct`.",
              lambda s: s.grade_incorrect <= s.grade_correct,
              lambda s: "config keys 'evidence.grade_incorrect' must be <= 'evidence.grade_correct'"),
    ),
}


def _citation_problem(template: str) -> str:
    from evidex.ingest.overlay import citation_template_problem  # the template's fields live with ingest

    return citation_template_problem(template) if template else ""
