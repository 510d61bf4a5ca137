"""The configuration schema: one declaration per key drives loading, environment overrides, errors and the
reference in docs/configuration.md, which must match what the schema generates today."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from evidex.config import SECTIONS, Config, load_config
from evidex.config.__main__ import main
from evidex.config.reference import REGENERATE, reference
from evidex.config.schema import key_of
from evidex.errors import ConfigError
from evidex.types import EmbeddingBackend, GateRule, IndexBackend, RejectionVisibility

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_the_checked_in_reference_is_the_generated_one() -> None:
    assert DOCS.is_file(), f"docs/configuration.md is missing; write it with: {REGENERATE}"
    assert DOCS.read_text(encoding="utf-8") == reference(), \
        f"docs/configuration.md is out of date with the config schema; regenerate it with: {REGENERATE}"


def test_the_module_entry_prints_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--reference"])
    assert capsys.readouterr().out == reference()


def test_every_key_is_in_the_reference_with_its_environment_name() -> None:
    text = reference()
    for name, cls in SECTIONS.items():
        assert f"## `[{name}]`" in text
        assert f"`EVIDEX_{name.upper()}_<KEY>`" in text
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in text, f"{name}.{f.name}"
            assert key_of(f).help.strip(), f"{name}.{f.name} has no description"


def test_modes_are_enums_read_from_their_names() -> None:
    config = load_config(None, env={"EVIDEX_INDEX_BACKEND": "Milvus", "EVIDEX_EMBEDDING_BACKEND": "torch",
                                    "EVIDEX_GATE_VISIBILITY": " counts-only "})
    assert config.index.backend is IndexBackend.MILVUS
    assert config.embedding.backend is EmbeddingBackend.TORCH
    assert config.gate.visibility is RejectionVisibility.COUNTS_ONLY
    assert config.to_dict()["gate"]["visibility"] == "counts-only"  # a mode serialises as its name


@pytest.mark.parametrize(("env", "message"), [
    ({"EVIDEX_GATE_VISIBILITY": "everything"},
     "config key 'gate.visibility': unknown rejection visibility 'everything'; choose one of: reasons-except-access"),
    ({"EVIDEX_GATE_RULES": "access,fresh"},
     "config key 'gate.rules': unknown admission rule 'fresh'; choose one of: access, freshness, citation"),
    ({"EVIDEX_GATE_RULES": " , "}, "config key 'gate.rules' needs at least one of: access, freshness, citation"),
    ({"EVIDEX_GATE_RULES": "access,Access"}, "config key 'gate.rules' lists access more than once"),
    ({"EVIDEX_EMBEDDING_BATCH_SIZE": "0"}, "config key 'embedding.batch_size' must be >= 1"),
    ({"EVIDEX_EVIDENCE_REQUERY_THRESHOLD": "1.5"}, "config key 'evidence.requery_threshold' must be between 0 and 1"),
    ({"EVIDEX_EVIDENCE_BRIDGE_HOPS": "-1"}, r"config key 'evidence.bridge_hops' must be >= 0 \(0 turns it off\)"),
    ({"EVIDEX_EVIDENCE_GRADE_INCORRECT": "0.9"}, "'evidence.grade_incorrect' must be <= 'evidence.grade_correct'"),
])
def test_schema_errors_name_the_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str],
                                    message: str) -> None:
    monkeypatch.chdir(tmp_path)  # no ./evidex.toml
    with pytest.raises(ConfigError, match=message):
        load_config(None, env=env)


def test_gate_rules_keep_their_spelling_in_the_config() -> None:
    config = Config().replace(gate={"rules": "Access, citation"})
    assert config.gate.rules == "Access, citation"
    assert [GateRule.from_str(x) for x in config.gate.rules.split(",")] == [GateRule.ACCESS, GateRule.CITATION]


def test_the_config_hash_of_the_defaults_is_pinned() -> None:
    """Results record `Config.hash()`, and eval indexes are keyed by `index_hash()`: a refactoring of the config
    must leave both as they are for the same settings. Change these only with a setting that changes results."""
    assert Config().hash() == "b3e13687dfc2ff5a"
    assert Config().index_hash() == "ed92a4b00c0f0e66"
    assert Config().replace(retrieval={"fusion": "rrf"}).hash() == "1cb49fe122fdce7c"
    assert Config().replace(gate={"rules": "access,citation", "visibility": "counts-only"}).hash() \
        == "5d49447508300244"
