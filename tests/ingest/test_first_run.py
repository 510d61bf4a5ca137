"""A first run on one's own docs: a folder of plain markdown (no front matter, no overlay) is admitted and cited
with default labels and a citation URL template, through the engine and through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evidex.admission.gate import Principal
from evidex.interfaces import cli_runtime
from evidex.interfaces.cli import app
from tests.conftest import CorpusWriter, EngineFactory
from tests.ingest.tests_first_run_support import DOCS, evidence_citations

STAFF = Principal.of("reader", ["staff"])
BASE = "https://docs.example.com/{path}"


def test_default_labels_and_citation_base_admit_and_cite_bare_pages(make_engine: EngineFactory,
        write_corpus: CorpusWriter) -> None:
    engine = make_engine()
    report = engine.ingest([write_corpus(DOCS)], default_labels=["staff"], citation_base=BASE)
    assert report.documents == len(DOCS) and report.without_labels_or_citation == ()
    result = engine.search_with_reasoning("How do I roll a widget back to the last release?", principal=STAFF)
    assert "https://docs.example.com/guides/rollback#rolling-back" in evidence_citations(result)
    outsider = engine.search_with_reasoning("How do I roll a widget back?", principal=Principal.of("x", ["other"]))
    assert outsider["evidence"] == []


def test_every_ingest_counts_the_pages_the_gate_never_admits(make_engine: EngineFactory,
        write_corpus: CorpusWriter) -> None:
    engine = make_engine()
    corpus = write_corpus(DOCS)
    first = engine.ingest([corpus])
    again = engine.ingest([corpus])  # nothing changed: the reminder stays
    assert first.without_labels_or_citation == again.without_labels_or_citation == tuple(sorted(DOCS))
    assert again.unchanged_documents == len(DOCS) and again.batch_id == ""
    labelled = engine.ingest([corpus], default_labels="staff")  # labels alone: still no citation
    assert labelled.without_labels_or_citation == tuple(sorted(DOCS))
    assert engine.ingest([corpus], default_labels="staff", citation_base=BASE).without_labels_or_citation == ()


def test_front_matter_and_overlay_win_over_the_defaults(make_engine: EngineFactory,
        write_corpus: CorpusWriter, tmp_path: Path) -> None:
    engine = make_engine()
    corpus = write_corpus({**DOCS, "security/keys.md": """
        ---
        access_labels: [security]
        citation_uri: https://wiki.example.com/keys
        ---
        # Signing keys

        The widget signing key is rotated every ninety days by the security team.
        """})
    overlay = tmp_path / "overlay.jsonl"
    overlay.write_text('{"source_glob": "guides/**", "access_labels": ["support"]}\n'
                       '{"source": "guides/rollback.md", "access_labels": ["oncall"]}\n', encoding="utf-8")
    engine.ingest([corpus], metadata=overlay, default_labels="staff", citation_base=BASE)
    labels = {c.source: c.provenance.access_labels for c in engine.store.all_chunks()}
    assert labels == {"guides/rollback.md": ("oncall",), "guides/install.md": ("support",),
                      "index.md": ("staff",), "security/keys.md": ("security",)}
    keys = [c for c in engine.store.all_chunks() if c.source == "security/keys.md"]
    assert {c.provenance.citation_uri for c in keys} == {"https://wiki.example.com/keys"}


def test_include_and_exclude_choose_the_files_read(make_engine: EngineFactory,
        write_corpus: CorpusWriter) -> None:
    engine = make_engine()
    corpus = write_corpus({**DOCS, "drafts/teleport.md": "# Teleport\n\nNot designed yet.\n",
                           "notes.txt": "Loose notes about widgets.\n"})
    report = engine.ingest([corpus], include=["**/*.md"], exclude=["drafts/**"], default_labels="staff")
    assert report.documents == len(DOCS)
    assert {c.source for c in engine.store.all_chunks()} == set(DOCS)


@pytest.fixture
def runner_env(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    monkeypatch.chdir(tmp_path)  # no stray ./evidex.toml
    monkeypatch.setattr(cli_runtime.out, "_width", 200)
    return {"EVIDEX_EMBEDDING_CACHE_DIR": str(cache_dir), "EVIDEX_CONFIG": None}


def test_cli_first_run_cites_pages_with_no_overlay_written(write_corpus: CorpusWriter, tmp_path: Path,
                                                          runner_env: dict[str, str | None]) -> None:
    corpus, index = write_corpus(DOCS), str(tmp_path / "idx")
    runner = CliRunner()
    ingest = runner.invoke(app, ["ingest", str(corpus), "--default-labels", "staff,support",
                                 "--citation-base", BASE, "--index", index], env=runner_env)
    assert ingest.exit_code == 0, ingest.output
    assert "never admit" not in ingest.output
    query = runner.invoke(app, ["query", "How do I roll a widget back to the last release?", "--labels", "staff",
                                "--json", "--index", index], env=runner_env)
    assert query.exit_code == 0, query.output
    result = json.loads(query.stdout)
    assert "https://docs.example.com/guides/rollback#rolling-back" in evidence_citations(result)
    assert {c["status"] for group in result["evidence"] for c in group["chunks"]} == {"citation-accepted"}


def test_cli_says_on_each_ingest_how_many_pages_the_gate_never_admits(write_corpus: CorpusWriter, tmp_path: Path,
                                                                     runner_env: dict[str, str | None]) -> None:
    corpus, index = write_corpus(DOCS), str(tmp_path / "idx")
    runner = CliRunner()
    for _ in range(2):  # the second run changes nothing and still says it
        result = runner.invoke(app, ["ingest", str(corpus), "--index", index], env=runner_env)
        assert result.exit_code == 0, result.output
        assert f"{len(DOCS)} document(s) the gate will never admit" in result.output
        assert "--default-labels" in result.output


def test_cli_refuses_a_citation_base_without_a_field(write_corpus: CorpusWriter, tmp_path: Path,
                                                    runner_env: dict[str, str | None]) -> None:
    result = CliRunner().invoke(app, ["ingest", str(write_corpus(DOCS)), "--citation-base",
                                      "https://docs.example.com/", "--index", str(tmp_path / "idx")], env=runner_env)
    assert result.exit_code != 0
    assert "names no field" in result.output + result.stderr
