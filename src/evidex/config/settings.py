"""`Config`, the whole configuration, and `load_config`, which builds it from `evidex.toml` and the environment."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidex.config.schema import build_section, key_of
from evidex.config.sections import (
    CHECKS,
    ChunkingConfig,
    EmbeddingConfig,
    EvidenceConfig,
    GateConfig,
    IndexConfig,
    IngestConfig,
    RetrievalConfig,
    ServerConfig,
    SignalsConfig,
)
from evidex.config.tables import FamilyRule, ShapeRule, family_rules, shape_rules
from evidex.errors import ConfigError
from evidex.types import FusionMode

CONFIG_FILE = "evidex.toml"
ENV_PREFIX = "EVIDEX_"
_NOT_OVERRIDES = {"EVIDEX_CONFIG", "EVIDEX_MILVUS_TOKEN"}  # environment names that are no `EVIDEX_<SECTION>_<KEY>`


@dataclass(frozen=True)
class Config:
    index: IndexConfig = field(default_factory=IndexConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    evidence: EvidenceConfig = field(default_factory=EvidenceConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    signals: SignalsConfig = field(default_factory=SignalsConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
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
    def confidence_model_path(self) -> Path | None:
        """The `[signals] confidence_model` file, resolved against the config file's folder; None: the shipped one."""
        return _resolve(self.root, self.signals.confidence_model) if self.signals.confidence_model else None

    @property
    def fusion_mode(self) -> FusionMode:
        return self.retrieval.fusion

    def to_dict(self) -> dict[str, Any]:
        """Every setting as JSON values (a mode as its name), without the Milvus token."""
        data = dataclasses.asdict(self, dict_factory=_json_values)
        data.pop("milvus_token")  # a secret: never in hashes, traces or responses
        return data

    def hash(self) -> str:
        """Hash of everything that can change a result: the keys declared `in_hash` (paths, caches and thread
        counts are not) and the families and shapes. A section without such a key is left out whole, so adding
        one leaves every earlier hash as it was."""
        data = self.to_dict()
        data.pop("root")
        for name, cls in SECTIONS.items():
            for f in dataclasses.fields(cls):
                if not key_of(f).in_hash:
                    data[name].pop(f.name)
            if not data[name]:
                data.pop(name)
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
                merged = {**dataclasses.asdict(current), **value}
                updates[name] = build_section(name, type(current), merged, CHECKS.get(type(current), ()))
            else:
                updates[name] = value
        return dataclasses.replace(self, **updates)


SECTIONS: dict[str, type[Any]] = {
    "index": IndexConfig,
    "embedding": EmbeddingConfig,
    "chunking": ChunkingConfig,
    "retrieval": RetrievalConfig,
    "evidence": EvidenceConfig,
    "gate": GateConfig,
    "signals": SignalsConfig,
    "ingest": IngestConfig,
    "server": ServerConfig,
}
"""The `[section]` tables of `evidex.toml`, in the order of the reference."""

TABLE_ARRAYS: dict[str, type[Any]] = {"families": FamilyRule, "shapes": ShapeRule}
"""The `[[array]]` tables of `evidex.toml`."""


def _json_values(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {k: v.value if isinstance(v, enum.Enum) else v for k, v in items}


def _resolve(root: str, path: str) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else Path(root) / p


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read `path` (or ./evidex.toml if present) and apply EVIDEX_<SECTION>_<KEY> overrides from `env`."""
    env = os.environ if env is None else env
    raw, root, where = _read_file(path)
    unknown = set(raw) - set(SECTIONS) - set(TABLE_ARRAYS)
    if unknown:
        raise ConfigError(f"{where}: unknown config section(s) {sorted(unknown)}; valid: "
                          f"{sorted([*SECTIONS, *TABLE_ARRAYS])}")
    values: dict[str, dict[str, Any]] = {name: dict(raw.get(name, {})) for name in SECTIONS}
    for name, key, value in env_overrides(env):
        values[name][key] = value
    built = {name: build_section(name, cls, values[name], CHECKS.get(cls, ())) for name, cls in SECTIONS.items()}
    return Config(**built, families=family_rules(raw.get("families", []), where),
                  shapes=shape_rules(raw.get("shapes", []), where), root=str(root),
                  milvus_token=env.get("EVIDEX_MILVUS_TOKEN") or None)


def env_overrides(env: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(section, key, value) of every EVIDEX_<SECTION>_<KEY> in `env` whose section exists; an unknown key of
    a known section is kept, so that building the section names it as an error."""
    found = []
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name in _NOT_OVERRIDES:
            continue
        section, _, key = name[len(ENV_PREFIX):].lower().partition("_")
        if section in SECTIONS and key:
            found.append((section, key, value))
    return found


def _read_file(path: str | Path | None) -> tuple[dict[str, Any], Path, str]:
    """The TOML of `path` (./evidex.toml when None and present), the folder paths resolve against, and the
    name errors give the source."""
    if path is None and Path(CONFIG_FILE).is_file():
        path = CONFIG_FILE
    if path is None:
        return {}, Path("."), "defaults"
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return raw, path.parent, str(path)
