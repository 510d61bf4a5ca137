"""Ingest through the real Engine: markdown as sites write it, anchors and spans, loaders, provenance,
families, idempotent re-ingest and the embeddings cache."""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evidex.config import ChunkingConfig, FamilyRule
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine
from evidex.errors import IngestError
from evidex.ingest.chunking import chunk_text
from evidex.ingest.markdown import clean, find_headings, slugify
from evidex.ingest.run import record_id
from evidex.stores.sqlite import SqliteStore
from evidex.types import Chunk, RetrievalMode

EngineFactory = Callable[..., Engine]
CorpusWriter = Callable[..., Path]
_WORD = re.compile(r"[^\W_]+")
NO_MERGE = {"min_chars": 1}  # keep every section its own chunk, so anchors are exact per section

GUIDE = """
    ---
    title: Deploy guide
    evidence_family: deploy
    access_labels: [ops, eng]
    published_at: 2024-01-02
    source_version: "1.4"
    ---
    Build the {{< glossary_tooltip text="container image" term_id="image" >}} first.
    <!-- secretword: reviewer note, never indexed -->

    # Deploy guide

    {{< note >}}
    Notes stay readable.
    {{< /note >}}

    ## Rolling out {#rollout}

    Use canary rollouts.

    ## Checks

    First checks.

    ```bash
    # not a heading
    echo hi
    ```

    ## Checks

    Second checks.
"""

POLICY_TOML = """
    +++
    title = "Network policies"
    evidence_family = "network"
    published_at = 2024-03-01T10:00:00Z
    access_labels = ["eng"]
    +++
    ## Default deny

    Deny all ingress by default.
"""


def chunks_of(engine: Engine, doc_id: str | None = None) -> list[Chunk]:
    store = engine.store
    assert isinstance(store, SqliteStore)
    found = [c for c in store.all_chunks() if doc_id is None or c.doc_id == doc_id]
    return sorted(found, key=lambda c: (c.doc_id, c.chunk_index))


def bm25(engine: Engine, query: str) -> list[str]:
    return [c.chunk.source for c in engine.search(query, k=20, mode=RetrievalMode.BM25)]


# ---- markdown ---------------------------------------------------------------------------------------------
def test_yaml_front_matter_shortcodes_comments_and_anchors(make_engine: EngineFactory,
                                                           write_corpus: CorpusWriter) -> None:
    corpus = write_corpus({"guide.md": GUIDE})
    engine = make_engine(chunking=NO_MERGE)
    report = engine.ingest([corpus])
    assert (report.documents, report.dead_letters) == (1, ())
    chunks = chunks_of(engine, "guide.md")
    assert [(c.citation_anchor, c.heading) for c in chunks] == [
        (f"char={chunks[0].span_start},{chunks[0].span_end}", ""),  # before any heading: an exact range
        ("deploy-guide", "Deploy guide"),
        ("rollout", "Rolling out"),  # custom id
        ("checks", "Checks"),  # the `# not a heading` inside the fence is not a heading
        ("checks-1", "Checks"),  # duplicate headings get -1 as GitHub and Hugo render them
    ]
    assert chunks[0].text == "Build the container image first."  # tooltip -> its text
    assert "Notes stay readable." in chunks[1].text and "{{" not in chunks[1].text  # note shortcode removed
    assert "# not a heading" in chunks[3].text
    assert chunks[2].text == "## Rolling out\n\nUse canary rollouts."  # the id marker is markup, not evidence
    assert all("secretword" not in c.text and "<!--" not in c.text for c in chunks)
    assert bm25(engine, "secretword") == []
    assert bm25(engine, "container image") == ["guide.md"]
    p = chunks[0].provenance
    assert (p.evidence_family, p.access_labels, p.published_at, p.source_version) == (
        "deploy", ("eng", "ops"), datetime(2024, 1, 2, tzinfo=UTC), "1.4")
    assert {c.title for c in chunks} == {"Deploy guide"}


def test_spans_map_back_into_the_original_file(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    corpus = write_corpus({"guide.md": GUIDE, "policy.md": POLICY_TOML})
    engine = make_engine(chunking=NO_MERGE)
    engine.ingest([corpus])
    chunks = chunks_of(engine)
    assert len(chunks) == 6
    for c in chunks:
        original = (corpus / c.source).read_text(encoding="utf-8")
        span = original[c.span_start:c.span_end]
        for word in _WORD.findall(c.text):
            assert word in span, (c.source, c.citation_anchor, word)
        assert c.citation_anchor
        if not c.citation_anchor.startswith("char="):
            assert c.text.startswith("#") and span.lstrip("#").strip().startswith(c.heading)
    first = chunks_of(engine, "guide.md")[0]
    original = (corpus / "guide.md").read_text(encoding="utf-8")
    assert original[first.span_start:first.span_end] == (
        'Build the {{< glossary_tooltip text="container image" term_id="image" >}} first.')
    assert first.citation_anchor == f"char={first.span_start},{first.span_end}"


def test_toml_front_matter(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    engine = make_engine()
    engine.ingest([write_corpus({"policy.md": POLICY_TOML})])
    (chunk,) = chunks_of(engine)
    assert (chunk.title, chunk.citation_anchor, chunk.heading) == ("Network policies", "default-deny", "Default deny")
    p = chunk.provenance
    assert (p.evidence_family, p.access_labels, p.published_at) == (
        "network", ("eng",), datetime(2024, 3, 1, 10, 0, tzinfo=UTC))
    assert "+++" not in chunk.text and "title" not in chunk.text


INLINE_HTML = """\
## Controls

| Profile | Meaning |
| --- | --- |
| <strong style="white-space: nowrap">Baseline</strong> | prevents known escalations |

<table>
	<tbody>
		<tr>
			<td style="white-space: nowrap">HostPath Volumes</td>
			<td>
				<p>HostPath volumes must be forbidden.</p>
				<ul><li><code>spec.volumes[*].hostPath</code></li></ul>
			</td>
		</tr>
		<tr>
			<td>Sysctls</td><td>Only a <a href="/docs/tasks/sysctl/">safe subset</a> of sysctls.</td>
		</tr>
	</tbody>
</table>

Run `kubectl logs <pod-name>` or replace <pod-name> with yours.

```html
<td>kept in code</td>
```
"""


def test_inline_html_reads_as_its_text_with_offsets_into_the_file() -> None:
    cleaned = clean(INLINE_HTML)
    text = cleaned.text
    assert "| Baseline | prevents known escalations |" in text  # a tag around a word leaves the word alone
    assert "HostPath Volumes\n" in text and "\nHostPath volumes must be forbidden.\n" in text  # no indentation
    assert "spec.volumes[*].hostPath" in text and "<code>" not in text.split("```")[0]
    assert "Sysctls Only a" in text  # two cells' words do not run together ("SysctlsOnly")
    assert '<a href="/docs/tasks/sysctl/">safe subset</a>' in text  # a link says which page is meant: kept
    assert "\n\nSysctls" in text  # a row's end is a paragraph break, where chunks are cut first
    assert "`kubectl logs <pod-name>`" in text and "replace <pod-name> with" in text  # code, placeholders stay
    assert "<td>kept in code</td>" in text  # nothing inside a fence is touched
    assert "<table>" not in text and "style=" not in text and "\t" not in text
    for i, char in enumerate(text):  # every character that came from the file maps back to itself
        assert char.isspace() or INLINE_HTML[cleaned.source_offset(i)] == char, i


CHARACTER_REFERENCES = """\
| Feature | Alpha&nbsp;(v1.27) | Beta |
| --- | --- | --- |
| <tt>SidecarContainers</tt> | &#x2713; | &#10003; |

Pods &mdash; and only pods &amp; their <i>volumes</i> &hellip; a pipe &#124; and &bogus; and &amp;lt;

Write `&amp;` or `a &lt; b` in code as is.

```
echo "&#x2713; &mdash;"
```
"""


def test_character_references_read_as_their_characters_outside_code() -> None:
    cleaned = clean(CHARACTER_REFERENCES)
    text = cleaned.text
    assert "| Alpha\xa0(v1.27) |" in text and "| SidecarContainers | \u2713 | \u2713 |" in text
    assert "Pods \u2014 and only pods & their volumes \u2026 a pipe | and &bogus; and &lt;" in text
    assert "`&amp;` or `a &lt; b`" in text and 'echo "&#x2713; &mdash;"' in text  # code is as written
    for i, char in enumerate(text):  # a decoded character maps to its reference, the rest to themselves
        offset = cleaned.source_offset(i)
        assert CHARACTER_REFERENCES[offset] == char or CHARACTER_REFERENCES[offset] == "&", (i, char)


def test_inline_html_markup_is_not_evidence(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    engine = make_engine()
    engine.ingest([write_corpus({"pss.md": INLINE_HTML})])
    assert bm25(engine, "nowrap") == [] and bm25(engine, "tbody") == []
    assert bm25(engine, "hostPath forbidden") == ["pss.md"]


@pytest.mark.parametrize(("title", "slug"), [
    ("Hello, World!", "hello-world"), ("C++ & Go", "c--go"), ("`code` and *emph*", "code-and-emph"),
    ("[Link](https://example.com) text", "link-text"), ("Über uns", "über-uns"),
    ("What is a Pod?", "what-is-a-pod"), ("snake_case name", "snake_case-name"),
])
def test_github_slugs(title: str, slug: str) -> None:
    assert slugify(title) == slug


def test_heading_anchors_and_fences() -> None:
    text = "# Top\n\n## Setup ##\n\n~~~\n## fenced\n~~~\n\n## Setup\n\n### Setup\n\n## Custom {#my-id}\n"
    assert [(h.level, h.title, h.anchor) for h in find_headings(text)] == [
        (1, "Top", "top"), (2, "Setup", "setup"), (2, "Setup", "setup-1"), (3, "Setup", "setup-2"),
        (2, "Custom", "my-id")]


def test_setext_headings_are_headings_and_rules_lists_and_code_are_not() -> None:
    """An underlined heading ("Install\n=======") had not been seen, so its section cited the heading above
    it (a walkthrough). A rule after a blank line, a list item over dashes, text in a fence and an indented pair
    (most often a list's code block) stay text."""
    text = ("Intro.\n\nInstall steps\n=============\n\nRun it.\n\nVerify\n------\n\nCheck it.\n\n---\n\n"
            "- item\n---\n\n```\nCode\n----\n```\n\n   Data\n   ====\n\n## Verify\n")
    assert [(h.level, h.title, h.anchor) for h in find_headings(text)] == [
        (1, "Install steps", "install-steps"), (2, "Verify", "verify"), (2, "Verify", "verify-1")]

def test_heading_anchors_are_unique_within_a_document() -> None:
    text = "## Checks\n\n## Checks\n\n## Checks 1\n\n## Rollout {#rollout}\n\n## Rollout\n"
    anchors = [h.anchor for h in find_headings(text)]
    assert anchors == ["checks", "checks-1", "checks-1-1", "rollout", "rollout-1"]


# ---- chunk sizes -------------------------------------------------------------------------------------------
def test_long_sections_split_within_max_chars_with_overlap(make_engine: EngineFactory,
                                                           write_corpus: CorpusWriter) -> None:
    sentences = " ".join(f"Step {i:02d} checks the rollout gate number {i:02d}." for i in range(40))
    corpus = write_corpus({"long.md": f"# Runbook\n\n## Long section\n\n{sentences}\n\n## Short\n\nTail text.\n"})
    engine = make_engine(chunking={"max_chars": 300, "overlap_chars": 60, "min_chars": 1})
    engine.ingest([corpus])
    chunks = chunks_of(engine)
    original = (corpus / "long.md").read_text(encoding="utf-8")
    long = [c for c in chunks if c.citation_anchor == "long-section"]
    assert len(long) >= 5
    assert all(len(c.text) <= 300 for c in chunks)
    for a, b in itertools.pairwise(long):
        assert b.span_start < a.span_end  # overlap
        assert original[b.span_start:a.span_end].strip() in a.text
        assert a.span_end - b.span_start <= 60
    covered = "".join(original[c.span_start:c.span_end] for c in long)
    for i in range(40):
        assert f"Step {i:02d} " in covered
    assert [c.citation_anchor for c in chunks][-1] == "short"


_word = st.text(alphabet="abcdefghij", min_size=1, max_size=25)
_paragraph = st.lists(_word, min_size=1, max_size=40).map(" ".join)
_heading = st.sampled_from(["", "# ", "## ", "### "])
_document = st.lists(st.tuples(_heading, _paragraph).map("".join), min_size=1, max_size=8).map("\n\n".join)


@given(_document, st.integers(100, 400), st.floats(0, 0.49), st.integers(0, 300), st.booleans())
def test_chunking_properties(text: str, max_chars: int, overlap_share: float, min_chars: int,
                             headings: bool) -> None:
    overlap = int(max_chars * overlap_share)
    pieces = chunk_text(clean(text), max_chars=max_chars, overlap_chars=overlap, min_chars=min_chars,
                        headings=headings)
    covered = [False] * len(text)
    for p in pieces:
        assert 0 < len(p.text) <= max_chars
        assert text[p.start:p.end] == p.text  # nothing to clean: the span is the text itself
        covered[p.start:p.end] = [True] * (p.end - p.start)
    assert all(covered[i] for i, ch in enumerate(text) if not ch.isspace())  # no text is lost
    assert [p.start for p in pieces] == sorted(p.start for p in pieces)


# ---- other formats -----------------------------------------------------------------------------------------
def test_jsonl_with_doc_id_and_beir_id(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    lines = [
        {"doc_id": "kb-1", "title": "Quota", "text": "A resource quota caps namespace memory.",
         "source": "kb/quota", "access_labels": ["eng"], "published_at": "2024-05-01T00:00:00Z"},
        {"_id": "4983", "title": "Scifact claim", "text": "Microglia respond to amyloid plaques."},
    ]
    corpus = write_corpus({"corpus.jsonl": "\n".join(json.dumps(x) for x in lines) + "\n"})
    engine = make_engine()
    report = engine.ingest([corpus / "corpus.jsonl"])
    assert report.documents == 2
    chunks = chunks_of(engine)
    got = [(c.doc_id, c.source, c.title, c.text, c.citation_anchor) for c in chunks]
    assert got == [
        ("4983", "4983", "Scifact claim", "Microglia respond to amyloid plaques.", "char=0,37"),
        ("kb-1", "kb/quota", "Quota", "A resource quota caps namespace memory.", "char=0,39"),
    ]
    assert chunks[1].provenance.access_labels == ("eng",)
    assert chunks[1].provenance.published_at == datetime(2024, 5, 1, tzinfo=UTC)
    assert bm25(engine, "amyloid") == ["4983"]


def test_html_with_headings(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    """A page that gives its headings no ids is cited at its top ("#top" resolves on every page): the slugs cited
    before (#ingress-guide, #tls-termination) are ids this page does not have."""
    html = """
        <html><head><title>Ingress guide</title><style>.hidden { color: red }</style></head>
        <body><nav>menu navword</nav>
        <h1>Ingress guide</h1><p>Routes external traffic.</p>
        <h2>TLS termination</h2><p>Terminate TLS at the edge &amp; forward.</p>
        <script>var scriptword = 1;</script>
        <h2>Path rules</h2><ul><li>exact</li><li>prefix</li></ul>
        </body></html>
    """
    engine = make_engine(chunking=NO_MERGE)
    engine.ingest([write_corpus({"site/ingress.html": html})])
    chunks = chunks_of(engine)
    assert [(c.source, c.title, c.citation_anchor, c.heading) for c in chunks] == [
        ("site/ingress.html", "Ingress guide", "top", "Ingress guide"),
        ("site/ingress.html", "Ingress guide", "top", "TLS termination"),
        ("site/ingress.html", "Ingress guide", "top", "Path rules"),
    ]
    assert "Terminate TLS at the edge & forward." in chunks[1].text
    assert bm25(engine, "navword") == [] and bm25(engine, "scriptword") == [] and bm25(engine, "hidden") == []


def test_html_headings_cite_the_ids_the_page_gives_them(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    """A rendered page's own ids are its exact anchors: `<h2 id="custom-id">` had been cited by a slug of its
    title (#restore-steps), which the page does not have. A heading without an id cites the nearest id above it
    (#verify), since a slug of its title (#clean-up) is no id the page has."""
    html = """
        <html><head><title>Restore runbook</title></head><body>
        <h2 id="custom-id">Restore steps</h2><p>Stop the writers, then restore the snapshot.</p>
        <h3><a name="verify"></a>Verify it</h3><p>Compare the row counts with the audit table.</p>
        <h2>Clean up</h2><p>Drop the temporary schema.</p>
        <h2 id="Überblick">Überblick</h2><p>An HTML5 id may be any letters.</p>
        </body></html>
    """
    engine = make_engine(chunking=NO_MERGE)
    engine.ingest([write_corpus({"site/restore.html": html})])
    chunks = chunks_of(engine)
    assert [(c.citation_anchor, c.heading) for c in chunks] == [
        ("custom-id", "Restore steps"), ("verify", "Verify it"), ("verify", "Clean up"), ("Überblick", "Überblick")]
    assert "{#" not in " ".join(c.heading + c.text for c in chunks)
    assert chunks[0].text.startswith("## Restore steps\n")  # the heading line stays, without its id marker

def test_plain_text(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    corpus = write_corpus({"ops-notes.txt": "# not a heading in text\n\nPlain runbook notes.\n"})
    engine = make_engine()
    engine.ingest([corpus])
    (chunk,) = chunks_of(engine)
    assert (chunk.title, chunk.heading, chunk.citation_anchor) == ("Ops notes", "", "char=0,45")
    assert chunk.text == "# not a heading in text\n\nPlain runbook notes."


# ---- provenance and families -------------------------------------------------------------------------------
FAMILY_CORPUS = {
    "deploy/a.md": "---\naccess_labels: [eng]\nowner: me\npublished_at: 2024-01-01\n---\nAlpha deploy text.\n",
    "deploy/c.md": "---\nevidence_family: custom\n---\nGamma deploy text.\n",
    "misc/deploy-notes.md": "Notes about deploys.\n",
    "misc/b.md": "Beta misc text.\n",
    "misc/x.txt": "Plain text, no rule.\n",
}
FAMILY_RULES = (FamilyRule(r"^deploy/", "deploy"), FamilyRule(r"deploy", "deploy-ish"), FamilyRule(r"\.md$", "docs"))


def families(engine: Engine) -> dict[str, str | None]:
    return {c.source: c.provenance.evidence_family for c in chunks_of(engine)}


def test_family_rules_first_match_and_front_matter_precedence(make_engine: EngineFactory,
                                                               write_corpus: CorpusWriter) -> None:
    engine = make_engine(families=FAMILY_RULES)
    engine.ingest([write_corpus(FAMILY_CORPUS)])
    assert families(engine) == {
        "deploy/a.md": "deploy",  # first matching rule, though two later rules match too
        "deploy/c.md": "custom",  # front matter wins over every rule
        "misc/deploy-notes.md": "deploy-ish",
        "misc/b.md": "docs",
        "misc/x.txt": None,  # no rule matches
    }


def test_metadata_overlay_merges_into_provenance(make_engine: EngineFactory, write_corpus: CorpusWriter,
                                                 tmp_path: Path) -> None:
    overlay = tmp_path / "overlay.jsonl"
    overlay.write_text("\n".join(json.dumps(x) for x in [
        {"source": "deploy/a.md", "access_labels": ["secret"], "owner": "team-x", "source_version": "9"},
        {"source": "misc/b.md", "evidence_family": "from-overlay", "citation_uri": "https://x.test/b"},
        {"source": "not/in/corpus.md", "owner": "nobody"},
    ]) + "\n", encoding="utf-8")
    engine = make_engine(families=FAMILY_RULES)
    engine.ingest([write_corpus(FAMILY_CORPUS)], metadata=overlay)
    by_source = {c.source: c.provenance for c in chunks_of(engine)}
    a = by_source["deploy/a.md"]
    assert (a.access_labels, a.owner, a.source_version) == (("secret",), "team-x", "9")  # the overlay wins
    assert a.published_at == datetime(2024, 1, 1, tzinfo=UTC)  # what the overlay does not name is kept
    assert a.evidence_family == "deploy"
    b = by_source["misc/b.md"]
    assert (b.evidence_family, b.citation_uri) == ("from-overlay", "https://x.test/b")  # overlay beats rules


def test_overlay_sources_that_match_no_document_are_reported(make_engine: EngineFactory,
                                                               write_corpus: CorpusWriter, tmp_path: Path) -> None:
    """A path typo in an overlay had silently dropped the restriction or citation it carried. A document that
    failed to load is not a typo; a retry (a part of the corpus) reports nothing."""
    corpus = write_corpus({**SMALL, "broken.md": b"\x00"})
    overlay = tmp_path / "overlay.jsonl"
    overlay.write_text("\n".join(json.dumps({"source": s, "access_labels": ["eng"]})
                                 for s in ["a.md", "broken.md", "does/not/exist.md", "./b.md"]) + "\n")
    engine = make_engine()
    report = engine.ingest([corpus], metadata=overlay)
    assert report.unmatched_overlay_sources == ("does/not/exist.md", "./b.md")
    assert report.to_dict()["unmatched_overlay_sources"] == ["does/not/exist.md", "./b.md"]
    assert chunks_of(engine, "a.md")[0].provenance.access_labels == ("eng",)  # the rest still applies
    assert engine.ingest([corpus], metadata=overlay).unmatched_overlay_sources == ("does/not/exist.md", "./b.md")
    assert engine.retry_dead_letters(metadata=overlay).unmatched_overlay_sources == ()


def test_mistaken_provenance_is_a_warning_and_the_document_is_ingested(
        make_engine: EngineFactory, write_corpus: CorpusWriter, tmp_path: Path) -> None:
    """A misspelled field, a validity that holds at no instant and a citation that is no URI had all loaded
    without a word. They stay documents (fail closed: never admitted, or cited as given), each with a warning
    naming the key or value. The time check sees the overlay merged in; ordinary metadata is not flagged."""
    corpus = write_corpus({
        "typo.md": "---\naccess_label: [eng]\ncitation_uri: https://x.test/typo\n---\n# Typo\n\nterntypoword\n",
        "camel.md": "---\ncitationURI: https://x.test/c\nsuperceded_by: new.md\n---\n# Camel\n\ncamelword\n",
        "ebp.md": ("---\npublished_at: 2026-05-01T00:00:00Z\nexpires_at: 2026-01-01T00:00:00Z\n---\n"
                   "# Ebp\n\nebpword\n"),
        "uri.md": "---\ncitation_uri: not a url\n---\n# Uri\n\nuriword\n",
        "hugo.md": ("---\ntitle: Hugo\ndescription: d\nweight: 3\nreviewers: [a]\ncontent_type: concept\n"
                    "aliases: [/x/]\nlinkTitle: H\npublishDate: 2024-01-01\norder: 2\npublished: true\n"
                    "min-kubernetes-server-version: v1.28\ncitation_uri: mailto:docs@x.test\n---\n"
                    "# Hugo\n\nhugoword\n"),
        "later.md": "---\nexpires_at: 2025-01-01T00:00:00Z\n---\n# Later\n\nlaterword\n",
        "c.jsonl": '{"doc_id": "j", "text": "jsonlword", "ownr": "team"}\n',
    })
    overlay = tmp_path / "overlay.jsonl"
    overlay.write_text('{"source": "later.md", "published_at": "2025-06-01T00:00:00Z"}\n', encoding="utf-8")
    engine = make_engine()
    report = engine.ingest([corpus], metadata=overlay)
    assert report.dead_letters == () and engine.stats()["documents"] == 7
    assert sorted((w.source, w.reason) for w in report.warnings) == [
        ("camel.md", "citationURI: not a provenance field (did you mean citation_uri?)"),
        ("camel.md", "superceded_by: not a provenance field (did you mean superseded_by?)"),
        ("ebp.md", "expires_at 2026-01-01T00:00:00Z is not after published_at 2026-05-01T00:00:00Z: the gate "
                   "admits it at no instant"),
        ("hugo.md", "citation_uri scheme 'mailto' is not in [gate] citation_schemes (http, https): the gate counts "
                    "it as no citation"),
        ("j", "ownr: not a provenance field (did you mean owner?)"),
        ("later.md", "expires_at 2025-01-01T00:00:00Z is not after published_at 2025-06-01T00:00:00Z: the gate "
                     "admits it at no instant"),
        ("typo.md", "access_label: not a provenance field (did you mean access_labels?)"),
        ("uri.md", "citation_uri 'not a url' is not an absolute URI (scheme:..., e.g. https://host/path)"),
    ]
    assert report.to_dict()["warnings"][0] == {"source": report.warnings[0].source,
                                               "reason": report.warnings[0].reason}
    assert bm25(engine, "terntypoword") == ["typo.md"] and bm25(engine, "uriword") == ["uri.md"]


# ---- re-ingest -------------------------------------------------------------------------------------------
SMALL = {
    "a.md": "# Alpha\n\nAlpha service restarts nightly.\n",
    "b.md": "# Beta\n\nBeta keeps obsoleteword in its first version.\n",
    "c.md": "# Gamma\n\nGamma stores backups.\n",
}


def test_record_ids_are_stable_across_indexes(make_engine: EngineFactory, write_corpus: CorpusWriter,
                                              tmp_path: Path) -> None:
    corpus = write_corpus(SMALL)
    first = make_engine()
    first.ingest([corpus])
    second = make_engine(index={"path": str(tmp_path / "other")})
    second.ingest([corpus])
    ids = [c.record_id for c in chunks_of(first)]
    assert ids == [c.record_id for c in chunks_of(second)]
    assert ids == [record_id(c.doc_id, c.chunk_index, c.text) for c in chunks_of(first)]
    first.rollback()
    first.ingest([corpus])
    assert [c.record_id for c in chunks_of(first)] == ids


def test_reingesting_unchanged_documents_is_a_no_op(make_engine: EngineFactory,
                                                    write_corpus: CorpusWriter) -> None:
    corpus = write_corpus(SMALL)
    engine = make_engine()
    engine.ingest([corpus])
    snapshot, batches = engine.store.snapshot_id(), engine.batches()
    report = engine.ingest([corpus])
    assert (report.batch_id, report.documents, report.unchanged_documents, report.added_chunks) == ("", 3, 3, 0)
    assert (report.embedded, report.cached, report.replaced_documents) == (0, 0, 0)
    assert engine.batches() == batches
    assert engine.store.snapshot_id() == snapshot


def test_an_upgraded_chunker_rechunks_unchanged_documents(make_engine: EngineFactory, write_corpus: CorpusWriter,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Documents are skipped by a hash of their text, provenance and chunking settings; without the ingest code
    in it, an index kept the old chunker's chunks for every unchanged file after an upgrade."""
    from evidex.ingest import run as ingest_run

    corpus = write_corpus(SMALL)
    engine = make_engine()
    engine.ingest([corpus])
    monkeypatch.setattr(ingest_run, "ingest_code_fingerprint", lambda: "a-newer-chunker")
    report = engine.ingest([corpus])
    assert (report.replaced_documents, report.unchanged_documents, report.embedded) == (3, 0, 0)
    assert engine.ingest([corpus]).unchanged_documents == 3


def test_a_changed_document_replaces_its_chunks(make_engine: EngineFactory,
                                               write_corpus: CorpusWriter) -> None:
    corpus = write_corpus(SMALL)
    engine = make_engine(chunking=NO_MERGE)
    engine.ingest([corpus])
    assert bm25(engine, "obsoleteword") == ["b.md"]
    (corpus / "b.md").write_text("# Beta\n\nBeta now mentions freshword.\n\n## More\n\nA second section.\n",
                                 encoding="utf-8")
    report = engine.ingest([corpus])
    assert (report.replaced_documents, report.unchanged_documents, report.added_chunks) == (1, 2, 2)
    assert bm25(engine, "obsoleteword") == []
    assert bm25(engine, "freshword") == ["b.md"]
    assert [c.citation_anchor for c in chunks_of(engine, "b.md")] == ["beta", "more"]
    assert engine.stats()["chunks"] == 4 and engine.stats()["documents"] == 3


def test_a_plain_ingest_keeps_a_deleted_file_and_a_sync_ingest_retires_it(
        make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    corpus = write_corpus(SMALL)
    engine = make_engine()
    engine.ingest([corpus])
    (corpus / "b.md").unlink()
    assert engine.ingest([corpus]).retired_documents == ()  # without --sync an ingest only adds and replaces
    assert bm25(engine, "obsoleteword") == ["b.md"]
    report = engine.ingest([corpus], sync=True)
    assert (report.retired_documents, report.replaced_documents, report.unchanged_documents) == (("b.md",), 0, 2)
    assert report.batch_id and bm25(engine, "obsoleteword") == []
    assert engine.stats()["documents"] == 2
    assert engine.ingest([corpus], sync=True).batch_id == ""  # nothing left to retire: no batch
    engine.rollback()  # the sync batch
    assert bm25(engine, "obsoleteword") == ["b.md"]


def test_a_sync_ingest_keeps_every_path_it_is_given_and_what_failed_to_load(
        make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    first = write_corpus(SMALL)
    second = write_corpus({"d.md": "# Delta\n\nDelta holds deltaword.\n"}, name="second")
    engine = make_engine()
    engine.ingest([first, second])
    (first / "a.md").write_bytes("caf\xe9 broken now".encode("latin-1"))  # fails to load: not gone
    report = engine.ingest([first, second], sync=True)
    assert report.retired_documents == () and [d.source for d in report.dead_letters] == ["a.md"]
    assert bm25(engine, "restarts") == ["a.md"] and bm25(engine, "deltaword") == ["d.md"]
    report = engine.ingest([second], sync=True)  # only the second folder is the corpus now
    assert report.retired_documents == ("a.md", "b.md", "c.md")
    assert bm25(engine, "restarts") == [] and bm25(engine, "deltaword") == ["d.md"]


def test_a_sync_ingest_drops_the_dead_letter_of_a_deleted_file(make_engine: EngineFactory,
                                                               write_corpus: CorpusWriter) -> None:
    corpus = write_corpus({**SMALL, "broken.md": b"binary\x00 blob"})
    other = write_corpus({"x.md": b"\x00"}, name="other")
    engine = make_engine()
    engine.ingest([corpus, other])
    assert {d.source for d in engine.dead_letters()} == {"broken.md", "x.md"}
    (corpus / "broken.md").unlink()
    (other / "x.md").unlink()
    engine.ingest([corpus])  # a plain ingest keeps every letter
    assert {d.source for d in engine.dead_letters()} == {"broken.md", "x.md"}
    engine.ingest([corpus], sync=True)  # nothing is left to retry under the synced path; 'other' is not synced
    assert {d.source for d in engine.dead_letters()} == {"x.md"}


def test_a_directory_that_cannot_be_listed_is_a_dead_letter_and_a_sync_retires_nothing(
        make_engine: EngineFactory, write_corpus: CorpusWriter, monkeypatch: pytest.MonkeyPatch) -> None:
    """Path.rglob skipped an unreadable directory without a word, so a sync retired every document in it.
    (The test runs as root, which may list anything: the refusal is the operating system's, simulated.)"""
    corpus = write_corpus({**SMALL, "sub/d.md": "# Delta\n\nDelta holds deltaword.\n"})
    engine = make_engine()
    engine.ingest([corpus])
    listing = os.scandir

    def refuse(path: Any = ".") -> Any:
        if Path(path) == corpus / "sub":
            raise PermissionError(13, "Permission denied", str(path))
        return listing(path)

    monkeypatch.setattr(os, "scandir", refuse)
    report = engine.ingest([corpus], sync=True)
    assert report.retired_documents == () and "sub/" in report.sync_skipped
    assert [(d.source, d.reason) for d in engine.dead_letters()] == [
        ("sub/", "cannot list the directory: Permission denied")]
    assert bm25(engine, "deltaword") == ["sub/d.md"]
    monkeypatch.setattr(os, "scandir", listing)
    engine.retry_dead_letters()  # listed now: the letter resolves, its documents keep their ids
    assert engine.dead_letters() == [] and bm25(engine, "deltaword") == ["sub/d.md"]


def refuse_listing(monkeypatch: pytest.MonkeyPatch, *folders: Path) -> None:
    """os.scandir refuses `folders` (the test runs as root, which may list anything)."""
    listing = os.scandir

    def refuse(path: Any = ".") -> Any:
        if Path(path) in folders:
            raise PermissionError(13, "Permission denied", str(path))
        return listing(path)

    monkeypatch.setattr(os, "scandir", refuse)


def test_unlistable_directories_each_keep_a_letter_and_settle_once(
        make_engine: EngineFactory, write_corpus: CorpusWriter, monkeypatch: pytest.MonkeyPatch) -> None:
    one = write_corpus({"a.md": "# A\n\nAlpha onewordy.\n"}, name="one")
    two = write_corpus({"b.md": "# B\n\nBeta twowordy.\n", "sub/bad.md": b"\x00"}, name="two")
    engine = make_engine()
    engine.ingest([two])  # sub/bad.md fails on its own first
    with monkeypatch.context() as patch:
        refuse_listing(patch, one, two / "sub")
        engine.ingest([one, two])
    letters = {d.source: d.attempts for d in engine.dead_letters()}
    assert letters == {f"{one.absolute().as_posix()}/": 1, "sub/": 1, "sub/bad.md": 1}  # two roots: two letters
    engine.retry_dead_letters()  # sub/bad.md is named twice (its letter, its directory's): failed once
    assert {d.source: d.attempts for d in engine.dead_letters()} == {"sub/bad.md": 2}
    assert bm25(engine, "onewordy") == ["a.md"]
    (two / "sub" / "bad.md").write_text("# Bad\n\nFixed badwordy.\n", encoding="utf-8")
    with monkeypatch.context() as patch:
        refuse_listing(patch, two / "sub")
        engine.ingest([two])
    assert {d.source for d in engine.dead_letters()} == {"sub/", "sub/bad.md"}
    engine.ingest([two])  # a plain ingest that lists the directory settles its letter
    assert engine.dead_letters() == [] and bm25(engine, "badwordy") == ["sub/bad.md"]


def test_a_sync_ingest_retires_nothing_when_a_failure_names_no_document(
        make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    """A bad JSONL line could be any document: retiring the ones not seen could retire the one it was."""
    corpus = write_corpus({**SMALL, "more.jsonl": '{"doc_id": "j1", "text": "jsonl quollword"}\n'})
    engine = make_engine()
    engine.ingest([corpus])
    (corpus / "more.jsonl").write_text('{"doc_id": "j1", "text": \n', encoding="utf-8")
    (corpus / "c.md").unlink()
    report = engine.ingest([corpus], sync=True)
    assert report.retired_documents == () and "more.jsonl:1" in report.sync_skipped
    assert bm25(engine, "quollword") == ["j1"] and bm25(engine, "backups") == ["c.md"]


def test_a_sync_ingest_of_a_missing_or_empty_path_writes_nothing(make_engine: EngineFactory, write_corpus: CorpusWriter,
                                                        tmp_path: Path) -> None:
    corpus = write_corpus(SMALL)
    engine = make_engine()
    engine.ingest([corpus])
    batches = engine.batches()
    with pytest.raises(IngestError, match="no such file or directory"):
        engine.ingest([tmp_path / "typo"], sync=True)
    (tmp_path / "unmounted").mkdir()
    with pytest.raises(IngestError, match="unmounted holds no documents"):
        engine.ingest([corpus, tmp_path / "unmounted"], sync=True)
    assert engine.batches() == batches and engine.stats()["documents"] == 3


@pytest.mark.parametrize("given", ["deploy", "deploy/canary.md"])
def test_a_sync_given_part_of_the_corpus_is_refused(make_engine: EngineFactory, write_corpus: CorpusWriter,
                                                    given: str) -> None:
    """A subfolder or a single file names its documents by shorter paths, so a sync of it would retire the
    rest of the index and re-add these under new names."""
    corpus = write_corpus({**SMALL, "deploy/canary.md": "# Canary\n\nCanary steps.\n"})
    engine = make_engine()
    engine.ingest([corpus])
    batches = engine.batches()
    with pytest.raises(IngestError, match=r"canary\.md as deploy/canary\.md"):
        engine.ingest([corpus / given], sync=True)
    assert engine.batches() == batches and engine.stats()["documents"] == 4


def test_a_sync_of_the_corpus_that_gained_or_moved_up_a_page_goes_through(make_engine: EngineFactory,
                                                                          write_corpus: CorpusWriter) -> None:
    """A top-level page named like a nested one ("_index.md" beside "data/_index.md"), or a page moved up a
    level, is a shorter name of an indexed one too, but the rest of the corpus is still what was indexed."""
    corpus = write_corpus({**SMALL, "data/_index.md": "# Data\n\nData section.\n",
                           "sub/x.md": "# X\n\nXray xwordy.\n"})
    engine = make_engine()
    engine.ingest([corpus])
    (corpus / "_index.md").write_text("# Home\n\nHome page.\n", encoding="utf-8")
    (corpus / "b.md").unlink()
    assert engine.ingest([corpus], sync=True).retired_documents == ("b.md",)
    (corpus / "sub" / "x.md").rename(corpus / "x.md")
    assert engine.ingest([corpus], sync=True).retired_documents == ("sub/x.md",)
    assert bm25(engine, "xwordy") == ["x.md"]


def test_changing_only_the_overlay_rewrites_the_document(make_engine: EngineFactory,
                                                         write_corpus: CorpusWriter, tmp_path: Path) -> None:
    corpus = write_corpus(SMALL)
    overlay = tmp_path / "overlay.jsonl"
    overlay.write_text('{"source": "a.md", "access_labels": ["eng"]}\n', encoding="utf-8")
    engine = make_engine()
    engine.ingest([corpus], metadata=overlay)
    ids = [c.record_id for c in chunks_of(engine)]
    overlay.write_text('{"source": "a.md", "access_labels": ["eng", "ops"]}\n', encoding="utf-8")
    report = engine.ingest([corpus], metadata=overlay)
    assert (report.replaced_documents, report.unchanged_documents, report.embedded) == (1, 2, 0)
    assert chunks_of(engine, "a.md")[0].provenance.access_labels == ("eng", "ops")
    assert [c.record_id for c in chunks_of(engine)] == ids  # same text, same ids
    assert engine.stats()["chunks"] == 3


def test_the_embeddings_cache_serves_a_second_index(make_engine: EngineFactory, write_corpus: CorpusWriter,
                                                    tmp_path: Path) -> None:
    corpus = write_corpus(SMALL)
    private = {"cache_dir": str(tmp_path / "embeddings")}  # a fresh cache: the first run must compute
    first = make_engine(embedding=private)
    report = first.ingest([corpus])
    assert (report.added_chunks, report.embedded, report.cached) == (3, 3, 0)
    second = make_engine(index={"path": str(tmp_path / "other")}, embedding=private)
    report = second.ingest([corpus])
    assert (report.added_chunks, report.embedded, report.cached) == (3, 0, 3)
    hits = [(c.chunk.record_id, round(c.score, 6)) for c in first.search("backups", mode=RetrievalMode.DENSE)]
    assert [(c.chunk.record_id, round(c.score, 6))
            for c in second.search("backups", mode=RetrievalMode.DENSE)] == hits


def test_real_embedder_finds_the_paraphrase(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    engine = make_engine()
    engine.ingest([write_corpus(SMALL)])
    top = engine.search("where are the backup copies kept", k=1, mode=RetrievalMode.DENSE)[0]
    assert top.chunk.source == "c.md"
    assert engine.search("alpha nightly restart", k=1)[0].chunk.source == "a.md"


def test_chunking_config_is_part_of_the_document_hash(make_engine: EngineFactory,
                                                      write_corpus: CorpusWriter) -> None:
    corpus = write_corpus(SMALL)
    make_engine().ingest([corpus])
    report = make_engine(chunking=ChunkingConfig(max_chars=500)).ingest([corpus])
    assert report.replaced_documents == 3


_SYNC_TEXTS = ("# A\n\nalpha apples grow.\n", "# B\n\nbeta bananas ripen.\n", "# C\n\ngamma cherries fall.\n")
_SYNC_NAMES = ("a.md", "sub/b.md", "sub/deep/c.md", "d.md")
_SYNC_STEP = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(_SYNC_NAMES), st.integers(0, len(_SYNC_TEXTS) - 1)),
    st.tuples(st.just("delete"), st.sampled_from(_SYNC_NAMES), st.just(0)),
    st.tuples(st.just("break"), st.sampled_from(_SYNC_NAMES), st.just(0)),
)


@given(rounds=st.lists(st.lists(_SYNC_STEP, min_size=1, max_size=3), min_size=1, max_size=4))
def test_a_sync_leaves_exactly_the_files_that_load_plus_the_last_good_version_of_broken_ones(
        embedder: Embedder, cache_dir: Path, rounds: list[list[tuple[str, str, int]]]) -> None:
    """Files written, deleted and broken between syncs: the live documents are the files that load, plus
    the previous version of a file that fails now; rolling back the last sync restores what was live."""
    from tempfile import TemporaryDirectory

    from tests.conftest import engine_config

    with TemporaryDirectory() as tmp:
        root = Path(tmp) / "docs"
        (root / "sub" / "deep").mkdir(parents=True)
        (root / "keep.md").write_text(_SYNC_TEXTS[0], encoding="utf-8")  # the folder never empties
        with Engine.open(engine_config(Path(tmp) / "idx", cache_dir), embedder=embedder) as engine:
            engine.ingest([root])
            broken: set[str] = set()
            before: set[str] = set()
            for steps in rounds:
                for kind, name, text in steps:
                    path = root / name
                    if kind == "delete":
                        path.unlink(missing_ok=True)
                        broken.discard(name)
                    elif kind == "break":
                        path.write_bytes(b"\x00 not text")
                        broken.add(name)
                    else:
                        path.write_text(_SYNC_TEXTS[text], encoding="utf-8")
                        broken.discard(name)
                before = set(engine.store.ledger.document_hashes())
                report = engine.ingest([root], sync=True)
                present = {"keep.md", *(n for n in _SYNC_NAMES if (root / n).exists())}
                assert set(engine.store.ledger.document_hashes()) == (present - broken) | (present & broken & before)
            if report.batch_id:
                engine.rollback()
                assert set(engine.store.ledger.document_hashes()) == before
