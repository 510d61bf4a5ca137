"""Configuration: the only module that reads TOML files or the environment.

A frozen `Config` is built once at the edge (CLI, HTTP, tests) and passed down. Every value can come
from `evidex.toml` or an environment override `EVIDEX_<SECTION>_<KEY>` (e.g. `EVIDEX_RETRIEVAL_FUSION=rrf`).
Unknown sections, unknown keys and ill-typed values are errors naming the key: a typo never silently
falls back to a default.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidex.errors import ConfigError
from evidex.retrieval.lexical import tokens
from evidex.types import FusionMode

CONFIG_FILE = "evidex.toml"
ENV_PREFIX = "EVIDEX_"


@dataclass(frozen=True)
class IndexConfig:
    path: str = ".evidex"  # directory holding index.sqlite (relative to the config file)
    backend: str = "sqlite"
    uri: str = ""  # for remote backends; tokens come from the environment, never from the file
    collection: str = ""  # milvus: collection name (empty = evidex_<index directory name>)


@dataclass(frozen=True)
class EmbeddingConfig:
    backend: str = "onnx"  # onnx (int8, default) | torch (reference)
    device: str = "cpu"  # torch backend only: cpu | cuda | cuda:N (a GPU speeds up ingest; vectors are the same)
    model_dir: str = ""  # a local sentence-transformers directory; empty = the packaged all-MiniLM-L6-v2
    threads: int = 0  # parallel document inferences (0 = all cores)
    query_threads: int = 2  # threads of one query's inference, onnx backend (1: a query never waits for a core)
    batch_size: int = 32
    query_cache: int = 256  # the last N query texts' vectors kept in memory (0 = none)
    cache_dir: str = "~/.cache/evidex"


@dataclass(frozen=True)
class ChunkingConfig:
    max_chars: int = 1200
    overlap_chars: int = 100
    min_chars: int = 200  # a trailing piece shorter than this joins its neighbour


@dataclass(frozen=True)
class RetrievalConfig:
    fusion: str = "weighted"  # weighted (normalised weighted sum) | rrf
    dense_weight: float = 0.5
    sparse_weight: float = 0.5
    rrf_k: int = 60
    candidate_pool: int = 100  # per retriever, before fusion
    title_weight: float = 1.0  # BM25 weight of the title field relative to the body


@dataclass(frozen=True)
class EvidenceConfig:
    pool_size: int = 60  # fused candidates that go on to reranking
    wide_limit: int = 50  # hits of one rescue search
    min_matches: int = 1  # a required family with fewer candidates than this is rescued
    max_per_doc: int = 1  # chunks of one document in the top-k before the cap is lifted (0 = no cap)
    max_aspects: int = 6  # obligations an automatic plan may create
    # An automatic clause aspect every word of which more than this share of the readable records holds is the
    # question's frame ("How do I set that up"), not an obligation (1 = keep every aspect); only on an index of at
    # least `frame_min_records` readable records (in a small one the subject's own words are that common).
    frame_word_share: float = 0.05
    frame_min_records: int = 1000
    w_cross_encoder: float = 0.4
    w_retrieval: float = 0.8  # 0.6 -> 0.8 once named pages were reserved: up on HotpotQA, MuSiQue, SciFact
    w_lexical: float = 0.3
    w_title: float = 0.1  # 0.15 -> 0.1, with the bonus below, once the fresh export put SciFact `full` under hybrid
    w_linked: float = 0.3
    # What other pages say around their links to a candidate's page (anchor text): 0.5 lifted the seven blind k8s
    # sets 0.871 -> 0.887 family recall, the development set unchanged (0.3-0.6 helped, 0.7 broke even, 1.0 hurt).
    w_inlink: float = 0.5
    bridge_from_top: int = 3  # candidates whose named entities are followed (0 = no bridging)
    bridge_max_searches: int = 4  # title look-ups of all hops together (2-8 measured: 4 best on MuSiQue, HotpotQA)
    bridge_hops: int = 1
    # Names the leading evidence adds that one more search joins to the question (`context_search`; 0 = none):
    # 2 measured best on MuSiQue (1 or 3 less), HotpotQA and the k8s sets unchanged.
    bridge_context_names: int = 2
    cited_min_pages: int = 2  # a candidate page linked from this many leading pages gains `cited_bonus` (0 = off)
    cited_bonus: float = 0.2
    name_lookups: int = 4  # title look-ups for named aspects with no page titled by them in the pool (0 = none)
    # Per verbatim identifier (at most two): a tie-breaker. At 0.1 it moved SciFact nDCG@10 0.7313 -> 0.7270 and
    # helped nowhere (scripts/ablate_rerank.py); at 0.03 it lifts HotpotQA's one identifier question back.
    exact_token_bonus: float = 0.03
    cross_encoder_dir: str = ""  # a local sentence-transformers or ONNX cross-encoder; empty = none
    cross_encoder_top_n: int = 30
    cross_encoder_device: str = "cpu"  # cpu | cuda | cuda:N (sentence-transformers cross-encoders only)
    requery_threshold: float = 0.7  # coverage below this recommends re-query
    # Evidence holding less of the question's words, each weighted by its rarity among the candidates (IDF):
    # re-query, it may be off-topic. 0.4 flags about as many of the dev sets' own questions as an unweighted 0.5
    # did (1-3%) and 6-16 points more of the questions asked of another set's index (scripts/eval_offtopic.py).
    min_question_word_share: float = 0.4
    # A covered answer whose confidence (the fitted quality estimate) is below this, with some of the question's
    # words in no evidence, recommends re-query, not proceed (a near miss the word check lets through).
    min_proceed_confidence: float = 0.2
    grade_correct: float = 0.55
    grade_incorrect: float = 0.15


@dataclass(frozen=True)
class GateConfig:
    rules: str = "access,freshness,citation"  # comma-separated; unknown names are errors
    visibility: str = "reasons-except-access"  # reasons-except-access | counts-only | all-reasons
    default_principal: str = "anonymous"
    default_labels: str = ""  # comma-separated labels of the default principal (CLI / MCP stdio)
    default_owner: str = ""  # who takes the next step when no rejected record names an owner
    audit_log: str = "audit.jsonl"  # relative to the index directory; empty = off


@dataclass(frozen=True)
class FamilyRule:
    pattern: str  # Python regex over the chunk's source
    name: str


@dataclass(frozen=True)
class ShapeFamily:
    name: str
    rescue_query: str
    label: str | None = None
    source_regex: str | None = None


@dataclass(frozen=True)
class ShapeRule:
    """[[shapes]]: a question shape as data. Detectors (keywords, patterns, similarity to example questions)
    -> required families."""

    name: str
    families: tuple[ShapeFamily, ...]
    keywords: tuple[str, ...] = ()
    min_keywords: int = 2
    patterns: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()  # questions of this shape: a question this close to one of them matches
    min_similarity: float = 0.7  # cosine between the question's and an example's embedding


@dataclass(frozen=True)
class Config:
    index: IndexConfig = field(default_factory=IndexConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    evidence: EvidenceConfig = field(default_factory=EvidenceConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    families: tuple[FamilyRule, ...] = ()
    shapes: tuple[ShapeRule, ...] = ()
    root: str = "."  # directory relative paths resolve against (where the config file lives)
    milvus_token: str | None = field(default=None, repr=False, compare=False)  # EVIDEX_MILVUS_TOKEN only

    @property
    def index_dir(self) -> Path:
        return _resolve(self.root, self.index.path)

    @property
    def cache_dir(self) -> Path:
        return _resolve(self.root, self.embedding.cache_dir)

    @property
    def fusion_mode(self) -> FusionMode:
        return FusionMode.from_str(self.retrieval.fusion)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("milvus_token")  # a secret: never in hashes, traces or responses
        return data

    def hash(self) -> str:
        """Hash of everything that can change a result (paths and caches excluded)."""
        data = self.to_dict()
        data.pop("root")
        data["index"].pop("path")
        data["embedding"].pop("cache_dir")
        data["embedding"].pop("threads")
        data["embedding"].pop("query_threads")  # the same vectors on any thread count (tested bit for bit)
        data["embedding"].pop("query_cache")  # a kept vector is the vector the model gives again
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def index_hash(self) -> str:
        """Hash of what shapes the index itself (chunking, embedding model, family rules, backend): two
        configurations with the same index hash can share one built index."""
        data = self.to_dict()
        keep = {"chunking": data["chunking"], "families": data["families"], "backend": data["index"]["backend"],
                "embedding": {k: data["embedding"][k] for k in ("backend", "model_dir")}}
        canonical = json.dumps(keep, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def replace(self, **sections: Any) -> Config:
        """A copy with whole sections or nested keys replaced: replace(retrieval={"fusion": "rrf"})."""
        updates: dict[str, Any] = {}
        for name, value in sections.items():
            current = getattr(self, name)
            if isinstance(value, Mapping) and dataclasses.is_dataclass(current) and not isinstance(current, type):
                updates[name] = _build_section(name, type(current), {**dataclasses.asdict(current), **value})
            else:
                updates[name] = value
        return dataclasses.replace(self, **updates)


_SECTIONS: dict[str, type[Any]] = {
    "index": IndexConfig,
    "embedding": EmbeddingConfig,
    "chunking": ChunkingConfig,
    "retrieval": RetrievalConfig,
    "evidence": EvidenceConfig,
    "gate": GateConfig,
}


def _resolve(root: str, path: str) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else Path(root) / p


def _coerce(key: str, value: Any, expected: type[Any]) -> Any:
    if expected is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in {"1", "true", "yes", "0", "false", "no"}:
            return value.lower() in {"1", "true", "yes"}
    elif expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
    elif expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif expected is str and isinstance(value, str):
        return value
    raise ConfigError(f"config key {key!r}: expected {expected.__name__}, got {value!r}")


def _build_section(name: str, cls: type[Any], values: Mapping[str, Any]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in fields:
            valid = ", ".join(sorted(fields))
            raise ConfigError(f"unknown config key '{name}.{key}'; valid keys: {valid}")
        kwargs[key] = _coerce(f"{name}.{key}", value, _field_type(fields[key]))
    section = cls(**kwargs)
    _validate(name, section)
    return section


def _field_type(f: dataclasses.Field[Any]) -> type[Any]:
    return {"str": str, "int": int, "float": float, "bool": bool}[str(f.type)]


_DEVICE = re.compile(r"^(?:cpu|cuda(?::\d+)?)$")


def check_device(key: str, device: str) -> None:
    if not _DEVICE.match(device):
        raise ConfigError(f"config key '{key}': {device!r} is not cpu, cuda or cuda:N")


def _validate(name: str, section: Any) -> None:
    if isinstance(section, RetrievalConfig):
        try:
            FusionMode.from_str(section.fusion)
        except ValueError as exc:
            raise ConfigError(f"config key 'retrieval.fusion': {exc}") from None
        for key in ("dense_weight", "sparse_weight"):
            if getattr(section, key) < 0:
                raise ConfigError(f"config key 'retrieval.{key}' must be >= 0")
        if not section.title_weight > 0:  # a title match must count (and never against a page)
            raise ConfigError("config key 'retrieval.title_weight' must be > 0")
        if section.dense_weight + section.sparse_weight == 0:
            raise ConfigError("config keys 'retrieval.dense_weight' and 'retrieval.sparse_weight' are both 0")
        if section.candidate_pool < 1 or section.rrf_k < 1:
            raise ConfigError("config keys 'retrieval.candidate_pool' and 'retrieval.rrf_k' must be >= 1")
    if isinstance(section, ChunkingConfig):
        if section.max_chars < 100:
            raise ConfigError("config key 'chunking.max_chars' must be >= 100")
        if not 0 <= section.overlap_chars < section.max_chars // 2:
            raise ConfigError("config key 'chunking.overlap_chars' must be >= 0 and < max_chars / 2")
    if isinstance(section, EmbeddingConfig):
        if section.backend not in {"onnx", "torch"}:
            raise ConfigError(f"config key 'embedding.backend': {section.backend!r} is not one of onnx, torch")
        check_device("embedding.device", section.device)
        if section.device != "cpu" and section.backend != "torch":
            raise ConfigError(f"config key 'embedding.device': {section.device!r} needs backend = 'torch' "
                              "(the ONNX backend runs on the CPU)")
        if section.threads < 0:
            raise ConfigError("config key 'embedding.threads' must be >= 0 (0 uses every core)")
        if section.batch_size < 1 or section.query_threads < 1:
            raise ConfigError("config keys 'embedding.batch_size' and 'embedding.query_threads' must be >= 1")
        if section.query_cache < 0:
            raise ConfigError("config key 'embedding.query_cache' must be >= 0 (0 keeps no query vector)")
    if isinstance(section, GateConfig):
        from evidex.admission.gate import GatePolicy  # validation lives with the gate's own names

        GatePolicy.from_config(section.rules, section.visibility)
    if isinstance(section, EvidenceConfig):
        if section.grade_incorrect > section.grade_correct:
            raise ConfigError("config keys 'evidence.grade_incorrect' must be <= 'evidence.grade_correct'")
        check_device("evidence.cross_encoder_device", section.cross_encoder_device)
        if min(section.pool_size, section.wide_limit, section.max_aspects + 1) < 1:
            raise ConfigError("config keys 'evidence.pool_size' and 'evidence.wide_limit' must be >= 1")
        for key in ("bridge_from_top", "bridge_max_searches", "bridge_hops", "bridge_context_names", "name_lookups"):
            if getattr(section, key) < 0:
                raise ConfigError(f"config key 'evidence.{key}' must be >= 0 (0 turns it off)")
        for key in ("requery_threshold", "min_question_word_share", "min_proceed_confidence"):
            if not 0 <= getattr(section, key) <= 1:
                raise ConfigError(f"config key 'evidence.{key}' must be between 0 and 1")
    if isinstance(section, IndexConfig) and section.backend not in {"sqlite", "milvus"}:
        raise ConfigError(f"config key 'index.backend': {section.backend!r} is not one of sqlite, milvus")


def _family_rules(raw: Any, where: str) -> tuple[FamilyRule, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: 'families' must be an array of tables [[families]]")
    rules = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) != {"pattern", "name"}:
            raise ConfigError(f"{where}: families[{i}] needs exactly the keys 'pattern' and 'name'")
        try:
            re.compile(item["pattern"])
        except re.error as exc:
            raise ConfigError(f"{where}: families[{i}].pattern is not a valid regex: {exc}") from None
        rules.append(FamilyRule(pattern=str(item["pattern"]), name=str(item["name"])))
    return tuple(rules)


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read `path` (or ./evidex.toml if present) and apply EVIDEX_* overrides from `env`."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = {}
    root = Path(".")
    where = "defaults"
    if path is None and Path(CONFIG_FILE).is_file():
        path = CONFIG_FILE
    if path is not None:
        path = Path(path)
        where = str(path)
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        root = path.parent
    unknown = set(raw) - set(_SECTIONS) - {"families", "shapes"}
    if unknown:
        raise ConfigError(f"{where}: unknown config section(s) {sorted(unknown)}; valid: "
                          f"{sorted([*_SECTIONS, 'families', 'shapes'])}")
    sections: dict[str, dict[str, Any]] = {name: dict(raw.get(name, {})) for name in _SECTIONS}
    for key, value in env.items():
        if not key.startswith(ENV_PREFIX) or key == "EVIDEX_CONFIG":
            continue
        rest = key[len(ENV_PREFIX):].lower()
        section, _, name = rest.partition("_")
        if section in sections and name and key != "EVIDEX_MILVUS_TOKEN":
            sections[section][name] = value
    built = {name: _build_section(name, cls, sections[name]) for name, cls in _SECTIONS.items()}
    return Config(**built, families=_family_rules(raw.get("families", []), where),
                  shapes=_shape_rules(raw.get("shapes", []), where), root=str(root),
                  milvus_token=env.get("EVIDEX_MILVUS_TOKEN") or None)


def _shape_rules(raw: Any, where: str) -> tuple[ShapeRule, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: 'shapes' must be an array of tables [[shapes]]")
    shapes = []
    for i, item in enumerate(raw):
        key = f"shapes[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: {key} must be a table")
        unknown = set(item) - {"name", "keywords", "min_keywords", "patterns", "examples", "min_similarity",
                               "families"}
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)} in {key}")
        if not isinstance(item.get("name"), str) or not isinstance(item.get("families"), list):
            raise ConfigError(f"{where}: {key} needs 'name' and a 'families' array")
        # A string where an array belongs had been read letter by letter ("unseal": seven one-letter keywords,
        # so every question matched the shape): each detector must be an array of non-empty strings.
        keywords, patterns, examples = (_strings(item, name, f"{where}: {key}")
                                        for name in ("keywords", "patterns", "examples"))
        for p in patterns:
            try:
                re.compile(p)
            except re.error as exc:
                raise ConfigError(f"{where}: {key}.patterns: invalid regex {p!r}: {exc}") from None
        for keyword in keywords:
            if not tokens(keyword):
                raise ConfigError(f"{where}: {key}.keywords: {keyword!r} has no searchable word (only stopwords "
                                  "or punctuation), so every question would hold it")
        min_keywords = item.get("min_keywords", 2)
        if isinstance(min_keywords, bool) or not isinstance(min_keywords, int) or min_keywords < 1:
            raise ConfigError(f"{where}: {key}.min_keywords must be a whole number >= 1, not {min_keywords!r}")
        if keywords and min_keywords > len(keywords):
            raise ConfigError(f"{where}: {key}.min_keywords is {min_keywords} but only {len(keywords)} keyword(s) "
                              "are given: the shape could never match by its keywords")
        if not (keywords or patterns or examples):
            raise ConfigError(f"{where}: {key} needs a detector: 'keywords', 'patterns' or 'examples'")
        min_similarity = item.get("min_similarity", 0.7)
        if not isinstance(min_similarity, (int, float)) or not 0 < min_similarity <= 1:
            raise ConfigError(f"{where}: {key}.min_similarity must be a number in (0, 1], not {min_similarity!r}")
        fams = []
        for j, f in enumerate(item["families"]):
            fkey = f"{key}.families[{j}]"
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or \
                    not isinstance(f.get("rescue_query"), str) or not (f.get("label") or f.get("source_regex")):
                raise ConfigError(f"{where}: {fkey} needs 'name', 'rescue_query' and 'label' or 'source_regex'")
            if f.get("source_regex") is not None:
                try:
                    re.compile(f["source_regex"])
                except (re.error, TypeError) as exc:
                    raise ConfigError(f"{where}: {fkey}.source_regex is not a valid regex: {exc}") from None
            fams.append(ShapeFamily(f["name"], f["rescue_query"], f.get("label"), f.get("source_regex")))
        shapes.append(ShapeRule(name=item["name"], families=tuple(fams), keywords=keywords,
                                min_keywords=min_keywords, patterns=patterns, examples=examples,
                                min_similarity=float(min_similarity)))
    return tuple(shapes)


def _strings(item: dict[str, Any], name: str, where: str) -> tuple[str, ...]:
    """`item[name]` as an array of non-empty strings (absent: none)."""
    value = item.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}.{name} must be an array of non-empty strings, not {value!r}")
    return tuple(value)
