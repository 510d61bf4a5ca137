"""The public API: what `evidex` exports (as httpx's tests/test_exported_members.py checks), its version, and the
package docstring's example run as written against a tiny corpus."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path

import pytest

import evidex
from evidex.config import Config
from tests.conftest import CorpusWriter, engine_config


def test_all_exports_exist_and_are_public() -> None:
    exported = set(evidex.__all__)
    assert len(exported) == len(evidex.__all__), "a name is listed twice"
    for name in exported:
        assert getattr(evidex, name) is not None, name
        if name != "__version__":
            member = getattr(evidex, name)
            assert not member.__name__.startswith("_"), name
            assert member.__module__.startswith("evidex."), (name, member.__module__)


def test_every_public_member_is_exported() -> None:
    """A name added to the lazy table and forgotten in `__all__` (or the reverse) is not public API. Submodules
    (attributes once imported) are not members: their contents are private."""
    members = {name for name in dir(evidex) if not name.startswith("_") and name != "annotations"
               and not isinstance(getattr(evidex, name), types.ModuleType)}
    assert members == set(evidex.__all__) - {"__version__"}


def test_names_are_the_types_the_engine_uses() -> None:
    from evidex.admission.gate import Principal
    from evidex.engine import Engine
    from evidex.pipeline import SearchRequest

    assert evidex.Engine is Engine and evidex.Principal is Principal and evidex.SearchRequest is SearchRequest
    assert issubclass(evidex.StoreError, evidex.EvidexError)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Retriever'"):
        _ = evidex.Retriever  # type: ignore[attr-defined]


def test_version_is_the_installed_distributions() -> None:
    assert evidex.__version__ == importlib.metadata.version("evidex")
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert f'\nversion = "{evidex.__version__}"\n' in pyproject  # one source: the installed metadata is pyproject's


def test_importing_evidex_loads_no_engine() -> None:
    """`import evidex` (and its version) stays cheap: the engine's imports load on first use of a name."""
    code = "import sys, evidex; evidex.__version__; print('numpy' in sys.modules, 'evidex.engine' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_the_documented_example_runs(tmp_path: Path, cache_dir: Path, write_corpus: CorpusWriter) -> None:
    """The package docstring's example, on a two-page corpus: ingest, a decision for a principal, its evidence."""
    corpus = write_corpus({
        "signing.md": """\
            ---
            access_labels: [engineering-read]
            citation_uri: https://handbook.example.org/signing
            published_at: 2025-01-01
            ---
            # Signing keys

            Rotate the release signing key every ninety days: generate the new key in the vault, publish its
            public half, then retire the old key after one release cycle.
            """,
        "lunch.md": """\
            ---
            access_labels: [engineering-read]
            citation_uri: https://handbook.example.org/lunch
            published_at: 2025-01-01
            ---
            # Lunch

            The canteen serves soup on Tuesdays.
            """,
    })
    config: Config = engine_config(tmp_path / "idx", cache_dir)
    with evidex.Engine.open(config) as engine:
        report = engine.ingest([corpus], label="first import")
        assert isinstance(report, evidex.IngestReport) and report.documents == 2
        result = engine.search_with_reasoning(
            "how do we rotate the signing key?",
            principal=evidex.Principal.of("alice", ["engineering-read"]),
            retrieved_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        citations = [chunk["citation"] for source in result["evidence"] for chunk in source["chunks"]]
        assert citations and citations[0].startswith("https://handbook.example.org/signing")
        assert result["decision"]["recommendation"]["action"] in {"proceed", "re-query", "stop"}
        typed = evidex.Result.model_validate(result)
        assert typed.evidence[0].chunks[0].citation == citations[0]
        hits = engine.search("signing key rotation", k=1, mode=evidex.RetrievalMode.BM25)
        assert isinstance(hits[0], evidex.Candidate) and hits[0].chunk.source == "signing.md"
        outsider = engine.search_with_reasoning("how do we rotate the signing key?",
                                                principal=evidex.Principal.of("bob", ["sales"]))
        assert outsider["evidence"] == []
