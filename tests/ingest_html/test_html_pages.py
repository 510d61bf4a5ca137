"""HTML ingest on pages written after each generator's markup (pages/): content only, the page's own ids as
anchors, code never a heading, and every cited anchor one the page has."""

from __future__ import annotations

import collections
import dataclasses
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from evidex.admission.gate import CitationRule, Principal, RejectReason
from evidex.config import ChunkingConfig
from evidex.ingest.html import TOP, read_html
from evidex.ingest.html_main import MainSource
from evidex.ingest.loaders import iter_documents, load_file
from evidex.ingest.run import chunk_document
from evidex.ingest.sections import missing_anchors
from evidex.types import Document, Provenance, Section

PAGES = Path(__file__).parent / "pages"
FURNITURE = ("navword", "sidebarword", "footerword", "headerword", "tocword", "tabword", "editword",
             "breadcrumbword", "paginationword", "versionword", "copyword", "lastupdateword")

EXPECTED = {  # page: (the rule that finds its content, [(anchor, heading)])
    "sphinx.html": (MainSource.ROLE_MAIN, [("module-vaultkeeper.snapshot", "snapshot — Snapshot backups"),
                                           ("taking-a-snapshot", "Taking a snapshot"), ("restoring", "Restoring")]),
    "sphinx_old.html": (MainSource.SPHINX_BODY, [("quotas", "Quotas"), ("raising-a-quota", "Raising a quota")]),
    "mkdocs_material.html": (MainSource.MKDOCS_MATERIAL, [("rotating-keys", "Rotating keys"),
                                                          ("schedule", "Schedule")]),
    # Docusaurus gives its h1 no id: the title cites the page's top
    "docusaurus.html": (MainSource.DOCUSAURUS, [(TOP, "Sealing volumes"), ("when-to-seal", "When to seal"),
                                                ("unsealing", "Unsealing")]),
    # no generator markup: readability finds div#content, whose id cites the text before the first heading;
    # "Exporting" has no id and cites the nearest one above it
    "plain.html": (MainSource.READABILITY, [("content", ""), ("retention", "Retention"),
                                            ("retention", "Exporting")]),
}


class _Ids(HTMLParser):
    """The ids and <a name>s of a page, read independently of the code under test."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(v for k, v in attrs if v and (k == "id" or (k == "name" and tag == "a")))


def page_ids(html: str) -> set[str]:
    parser = _Ids()
    parser.feed(html)
    return parser.ids


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_generator_s_page_reads_as_its_content_in_sections_citing_its_own_ids(name: str) -> None:
    html = (PAGES / name).read_text("utf-8")
    page = read_html(html)
    source, sections = EXPECTED[name]
    assert page.main is source
    assert [(s.anchor, s.heading) for s in page.sections] == sections
    assert not [word for word in FURNITURE if word in page.text]
    assert {s.anchor for s in page.sections} - {TOP} <= page_ids(html)  # ids a browser finds on the page
    assert "¶" not in page.text and "\u200b" not in page.text  # permalink marks are no text


def test_comment_lines_in_code_blocks_are_code_not_headings() -> None:
    for name in ("sphinx.html", "mkdocs_material.html", "docusaurus.html"):
        page = read_html((PAGES / name).read_text("utf-8"))
        assert not [s for s in page.sections if "rotate" in s.heading or "freeze" in s.heading or "seal the" in
                    s.heading]
    docusaurus = read_html((PAGES / "docusaurus.html").read_text("utf-8")).text
    assert "```\n# seal the volume named on the command line\nvaultctl seal vol-7\n```" in docusaurus


def test_sphinx_api_entries_and_admonitions_stay_in_their_section() -> None:
    page = read_html((PAGES / "sphinx.html").read_text("utf-8"))
    restoring = page.text[page.sections[2].start:]
    assert "Restoring over a live volume loses the writes" in restoring
    taking = page.text[page.sections[1].start:page.sections[2].start]
    assert "vaultkeeper.snapshot.create(bucket)" in taking and "return the snapshot id" in taking


def test_text_before_the_first_heading_cites_the_page_top_or_the_content_element() -> None:
    page = read_html("<html><body><nav>Menu</nav><main><p>Read this first.</p><h2 id='next'>Next</h2>"
                     "<p>Then this.</p></main></body></html>")
    assert [(s.anchor, s.heading) for s in page.sections] == [(TOP, ""), ("next", "Next")]
    page = read_html("<html><body><main id='main-content'><p>Read this first.</p></main></body></html>")
    assert [s.anchor for s in page.sections] == ["main-content"]


def test_a_section_element_names_the_heading_it_opens_and_an_id_inside_the_heading_wins() -> None:
    page = read_html("<main><section id='outer'><p>Intro.</p><section id='inner'><span id='t'></span>"
                     "<h2>Inner</h2><p>x</p></section><h2><a name='named'></a>Named</h2><p>y</p>"
                     "<h2>No id</h2><p>z</p></section></main>")
    assert [(s.anchor, s.heading) for s in page.sections] == [
        ("outer", ""), ("inner", "Inner"), ("named", "Named"), ("named", "No id")]


def test_every_chunk_of_every_page_cites_an_anchor_the_page_has(tmp_path: Path) -> None:
    for page in PAGES.glob("*.html"):
        (tmp_path / page.name).write_text(page.read_text("utf-8"), "utf-8")
    docs = [d for d in iter_documents(tmp_path) if isinstance(d, Document)]
    assert len(docs) == len(EXPECTED) and all(not d.warnings for d in docs)
    chunks = [c for d in docs for c in chunk_document(d, ChunkingConfig(max_chars=200, overlap_chars=20,
                                                                        min_chars=50), datetime.now(UTC))]
    assert len(chunks) > len(docs)
    for chunk in chunks:
        assert chunk.citation_anchor == TOP or chunk.citation_anchor in page_ids(
            (tmp_path / chunk.source).read_text("utf-8")), (chunk.source, chunk.citation_anchor)


def test_pages_sharing_a_sidebar_and_footer_make_no_repeated_chunk(tmp_path: Path) -> None:
    template = (PAGES / "sphinx.html").read_text("utf-8")
    topics = ("snapshots", "quotas", "sealing", "rotation")
    for topic in topics:
        page = template.replace("Snapshot backups", f"{topic.title()} guide").replace(
            "A snapshot copies every sealed volume", f"The {topic} procedure copies every sealed volume")
        (tmp_path / f"{topic}.html").write_text(page, "utf-8")
    texts = collections.Counter()
    for doc in iter_documents(tmp_path):
        assert isinstance(doc, Document)
        texts.update(c.text for c in chunk_document(doc, ChunkingConfig(), datetime.now(UTC)))
    assert texts and not [t for t, n in texts.items() if n > 1 and ("sidebar" in t or "footer" in t)]
    assert not [word for word in FURNITURE if any(word in t for t in texts)]


def test_a_section_anchor_the_source_lacks_cites_nothing_and_the_gate_rejects_it() -> None:
    doc = Document("p.html", "p.html", "P", "## Kept\n\nText one.\n\n## Lost\n\nText two.", fmt="html",
                   sections=(Section(0, "kept", "Kept"), Section(20, "gone", "Lost")), anchors=frozenset({"kept"}))
    assert missing_anchors(doc) == ["gone"]
    chunks = chunk_document(doc, ChunkingConfig(max_chars=800, overlap_chars=0, min_chars=1), datetime.now(UTC))
    assert [(c.heading, c.citation_anchor) for c in chunks] == [("Kept", "kept"), ("Lost", None)]
    rule, now, reader = CitationRule(), datetime.now(UTC), Principal.of("r", ["x"])
    cited = Provenance(citation_uri="https://docs.example.org/p.html")
    assert rule.check(dataclasses.replace(chunks[0], provenance=cited), reader, now) is None
    assert rule.check(dataclasses.replace(chunks[1], provenance=cited), reader, now) is RejectReason.NO_CITATION


def test_a_redirect_stub_and_a_page_without_text_make_no_chunks(tmp_path: Path) -> None:
    stub = tmp_path / "old.html"
    stub.write_text('<html><head><meta http-equiv="refresh" content="0; url=new.html"></head>'
                    '<body><p>Redirecting to <a href="new.html">new.html</a>...</p></body></html>', "utf-8")
    doc = load_file(stub, "old.html")
    assert isinstance(doc, Document) and doc.text == ""
    assert chunk_document(doc, ChunkingConfig(), datetime.now(UTC)) == ()
