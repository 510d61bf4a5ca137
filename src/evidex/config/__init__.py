"""Configuration: the only package that reads TOML files or the environment.

A frozen `Config` is built once at the edge (CLI, HTTP, tests) and passed down. Every key of the sections
`[index]` to `[gate]` can come from `evidex.toml` or an environment override `EVIDEX_<SECTION>_<KEY>`
(`EVIDEX_RETRIEVAL_FUSION=rrf`). Unknown sections, unknown keys and ill-typed or out-of-range values are errors
naming the key: a typo never silently falls back to a default.

    >>> config = load_config("evidex.toml", env={"EVIDEX_CHUNKING_MAX_CHARS": "800"})  # doctest: +SKIP
    >>> Config().replace(retrieval={"fusion": "rrf"}).fusion_mode
    <FusionMode.RRF: 'rrf'>

Each key is declared once, with its type, default, allowed values and meaning (`sections.py`, through
`schema.py`); the reference in `docs/configuration.md` is generated from those declarations:
`python -m evidex.config --reference > docs/configuration.md`.
"""

from evidex.config.sections import (
    ChunkingConfig,
    EmbeddingConfig,
    EvidenceConfig,
    GateConfig,
    IndexConfig,
    RetrievalConfig,
)
from evidex.config.settings import CONFIG_FILE, ENV_PREFIX, SECTIONS, TABLE_ARRAYS, Config, load_config
from evidex.config.tables import FamilyRule, ShapeFamily, ShapeRule

__all__ = [
    "CONFIG_FILE",
    "ENV_PREFIX",
    "SECTIONS",
    "TABLE_ARRAYS",
    "ChunkingConfig",
    "Config",
    "EmbeddingConfig",
    "EvidenceConfig",
    "FamilyRule",
    "GateConfig",
    "IndexConfig",
    "RetrievalConfig",
    "ShapeFamily",
    "ShapeRule",
    "load_config",
]
