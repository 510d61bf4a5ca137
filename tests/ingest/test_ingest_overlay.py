"""Provenance for many pages at once (`evidex.ingest.overlay`): globs, citation templates, overlay precedence,
defaults and the file selection, without an index."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import evidex
from evidex.config import load_config
from evidex.errors import ConfigError, IngestError
from evidex.ingest.loaders import iter_documents
from evidex.ingest.overlay import (
    IngestRules,
    ProvenanceDefaults,
    SourceSelection,
    check_citation_template,
    glob_regex,
    read_overlay,
    render_citation,
    with_overlay,
)
from evidex.types import Document, Provenance

HANDBOOK = Path(evidex.__file__).parent / "sample" / "handbook"


@pytest.mark.parametrize(("glob", "source", "matches"), [
    ("guides/**", "guides/a.md", True),
    ("guides/**", "guides/x/y/b.md", True),
    ("guides/**", "guidesx/a.md", False),
    ("**/*.md", "top.md", True),
    ("**/*.md", "a/b/c.md", True),
    ("**/*.md", "a/b/c.html", False),
    ("*.md", "a/b.md", False),  # one * never crosses a folder
    ("*.md", "b.md", True),
    ("x/**/y.md", "x/y.md", True),
    ("x/**/y.md", "x/a/b/y.md", True),
    ("page?.md", "page1.md", True),
    ("page?.md", "page/.md", False),
    ("[!_]*.md", "_index.md", False),
    ("[!_]*.md", "index.md", True),
    ("v[12]/*", "v2/a.md", True),
    ("a[.md", "a[.md", True),  # an unclosed class is a literal bracket
    ("notes (old).md", "notes (old).md", True),  # regex characters are literals
])
def test_glob_matches_whole_paths_by_segment(glob: str, source: str, matches: bool) -> None:
    assert (glob_regex(glob).fullmatch(source) is not None) is matches


@pytest.mark.parametrize(("template", "source", "uri"), [
    ("https://docs.example.com/{path}", "guides/install.md", "https://docs.example.com/guides/install"),
    ("https://docs.example.com/{path}.html", "guides/install.md", "https://docs.example.com/guides/install.html"),
    ("https://docs.python.org/3/{source}", "library/os.html", "https://docs.python.org/3/library/os.html"),
    ("https://docs.example.com/{route}", "guides/install.md", "https://docs.example.com/guides/install/"),
    ("https://docs.example.com/{route}", "guides/_index.md", "https://docs.example.com/guides/"),
    ("https://docs.example.com/{route}", "guides/README.md", "https://docs.example.com/guides/"),
    ("https://docs.example.com/{route}", "index.md", "https://docs.example.com/"),
    ("https://git.example.com/blob/main/{dir}/{name}", "a/b.md", "https://git.example.com/blob/main/a/b.md"),
    ("https://wiki.example.com/{stem}", "teams/on call.md", "https://wiki.example.com/on%20call"),
])
def test_citation_template_fields(template: str, source: str, uri: str) -> None:
    check_citation_template(template)
    assert render_citation(template, source) == uri


def test_route_is_how_the_handbook_publishes_its_pages() -> None:
    """{route} is the pretty-URL layout of static site generators; every handbook page that states its
    citation URI states the one the template gives."""
    stated = {d.source: d.provenance.citation_uri for d in iter_documents(HANDBOOK)
              if isinstance(d, Document) and d.provenance.citation_uri}
    assert len(stated) >= 30
    for source, uri in stated.items():
        assert render_citation("https://handbook.northwind.example/{route}", source) == uri


@pytest.mark.parametrize(("template", "says"), [
    ("https://docs.example.com/{pth}", "unknown field(s) {pth}"),
    ("https://docs.example.com/", "names no field"),
    ("docs/{path}", "not give an absolute URI"),
    ("https://docs.example.com/{path", "write a literal brace"),
])
def test_a_bad_citation_template_is_refused_with_the_reason(template: str, says: str) -> None:
    with pytest.raises(ConfigError, match=r".*" + re.escape(says)):
        ProvenanceDefaults.of("staff", template)


def write_overlay(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "overlay.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_exact_source_wins_over_patterns_and_later_patterns_over_earlier(tmp_path: Path) -> None:
    overlay = read_overlay(write_overlay(
        tmp_path,
        '{"source_glob": "**", "access_labels": ["staff"], "owner": "docs@example.com"}',
        '{"source_prefix": "internal/", "access_labels": ["engineering"]}',
        '{"source": "internal/oncall.md", "access_labels": ["sre"]}',
        '{"source_glob": "internal/*.md", "authority_tier": "team"}',
    ))
    assert overlay.fields_for("public/intro.md") == {"access_labels": ("staff",), "owner": "docs@example.com"}
    assert overlay.fields_for("internal/build.md") == {"access_labels": ("engineering",),
                                                       "owner": "docs@example.com", "authority_tier": "team"}
    # The exact entry is applied last, whatever its line: its labels win over both patterns.
    assert overlay.fields_for("internal/oncall.md")["access_labels"] == ("sre",)
    assert overlay.fields_for("internal/oncall.md")["authority_tier"] == "team"


def test_overlay_entries_that_match_nothing_are_reported(tmp_path: Path) -> None:
    overlay = read_overlay(write_overlay(
        tmp_path, '{"source_glob": "guides/**", "owner": "a@example.com"}',
        '{"source_prefix": "gudies/", "owner": "b@example.com"}', '{"source": "faq.md", "owner": "c@example.com"}'))
    assert overlay.unmatched({"guides/a.md", "index.md"}) == ("faq.md", "gudies/ (source_prefix)")


@pytest.mark.parametrize(("line", "says"), [
    ('{"source": "a.md", "source_glob": "**", "owner": "x"}', "exactly one"),
    ('{"owner": "x"}', "exactly one"),
    ('{"source_glob": "", "owner": "x"}', "exactly one"),
    ('{"source_glob": "**", "acess_labels": ["x"]}', "did you mean access_labels"),
    ('{"source_prefix": "a/", "published_at": "last week"}', "not an ISO 8601 timestamp"),
])
def test_a_bad_overlay_line_is_an_error_naming_the_line(tmp_path: Path, line: str, says: str) -> None:
    path = write_overlay(tmp_path, '{"source": "ok.md", "owner": "x"}', line)
    with pytest.raises(IngestError, match=says) as caught:
        read_overlay(path)
    assert caught.value.location == f"{path}:2"


def test_defaults_fill_only_what_the_document_and_overlay_leave_empty() -> None:
    defaults = ProvenanceDefaults.of("staff, support", "https://docs.example.com/{path}")
    bare = with_overlay(Provenance(), "guides/install.md", None, defaults)
    assert bare.access_labels == ("staff", "support")
    assert bare.citation_uri == "https://docs.example.com/guides/install"
    own = Provenance(access_labels=("security",), citation_uri="https://wiki.example.com/install")
    assert with_overlay(own, "guides/install.md", None, defaults) == own


def test_selection_reads_included_files_and_exclusion_wins() -> None:
    selection = SourceSelection.of(include=["**/*.md"], exclude=["drafts/**", "**/_*"])
    assert [s for s in ("a.md", "g/b.md", "g/c.html", "drafts/d.md", "g/_index.md") if selection.admits(s)] == \
        ["a.md", "g/b.md"]
    assert SourceSelection.of().admits("anything.bin") and not SourceSelection.of()


def test_ingest_rules_take_given_values_over_the_configuration(tmp_path: Path) -> None:
    (tmp_path / "evidex.toml").write_text(
        '[ingest]\ndefault_labels = "staff"\ncitation_base = "https://docs.example.com/{path}"\n'
        'exclude = "drafts/**, **/_*"\n', encoding="utf-8")
    settings = load_config(tmp_path / "evidex.toml", env={}).ingest
    configured = IngestRules.resolve(settings)
    assert configured.defaults == ProvenanceDefaults(("staff",), "https://docs.example.com/{path}")
    assert configured.selection == SourceSelection((), ("drafts/**", "**/_*"))
    given = IngestRules.resolve(settings, default_labels=["eng"], exclude=[], citation_base="")
    assert given.defaults == ProvenanceDefaults(("eng",), "") and not given.selection


def test_a_bad_citation_base_in_the_configuration_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "evidex.toml").write_text('[ingest]\ncitation_base = "https://d.example.com/{file}"\n',
                                          encoding="utf-8")
    with pytest.raises(ConfigError, match=r"ingest\.citation_base.*\{file\}"):
        load_config(tmp_path / "evidex.toml", env={})
