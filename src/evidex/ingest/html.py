"""HTML documentation pages as indexed text: the page's own content, in sections that cite the page's own ids.

`read_html` keeps only the content element (`html_main.find_main`, without the site's furniture) and writes it
as plain text with markdown-style heading lines (`## Title`), code blocks fenced and never read as headings
(a `# comment` inside `<pre>` is code). Each heading opens a `Section` whose anchor is an id the page has, so
`page.html#anchor` takes a browser to it. A heading's anchor, first found wins:

1. the id its permalink names (Sphinx' and MkDocs' `<a class="headerlink" href="#id">`, Docusaurus'
   `hash-link`), when that id is the heading's, one inside it, or the section it opens;
2. the heading's own `id`;
3. an id inside the heading (`<h3><a name="verify"></a>Verify</h3>`);
4. the id of the element the heading opens (Sphinx' `<section id=...>`, older Sphinx' `<div class="section"
   id=...>`): an ancestor with an id and no text before the heading;
5. the nearest id before it in the content (an empty target `<span id=...>`, the content element's id);
6. the page's top (see below).

Text before the first heading cites the nearest id before it (the content element's own, a section it opens),
else `top`: the HTML standard scrolls a fragment "top" that names no element to the top of the document, so
`page.html#top` always resolves. `anchors` lists every id and `<a name>` of the original page (and `top`):
what ingest checks each citation against.

    >>> page = read_html('<main><p>Intro.</p><section id="setup"><h2>Setup<a class="headerlink" '
    ...                  'href="#setup">¶</a></h2><pre># not a heading</pre></section></main>')
    >>> [(s.anchor, s.heading) for s in page.sections]
    [('top', ''), ('setup', 'Setup')]
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import lxml.html
from lxml import etree
from lxml.html import HtmlElement

from evidex.errors import IngestError
from evidex.ingest.html_main import MainSource, find_main, strip_furniture
from evidex.ingest.sections import missing_anchors
from evidex.types import Document, Section

TOP = "top"  # the fragment every browser resolves to the top of a page (HTML standard, "indicated part")
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = frozenset({"p", "div", "section", "article", "main", "header", "aside", "blockquote", "ul", "ol", "dl",
                     "dt", "dd", "table", "thead", "tbody", "tfoot", "tr", "caption", "figure", "figcaption",
                     "details", "summary", "hr", "br", "address", "fieldset", "legend"})
_CELLS = frozenset({"td", "th"})
_ID = re.compile(r"\S+")  # an HTML5 id: any characters but whitespace


@dataclass(frozen=True)
class HtmlPage:
    title: str
    text: str
    sections: tuple[Section, ...]
    anchors: frozenset[str]  # every id and <a name> of the original page, and "top"
    main: MainSource


def read_html(html: str) -> HtmlPage:
    """The page's title (its <title>, else its first heading), its content as text, the sections that cite
    it, and the anchors the page has. Raises IngestError for a page with no markup to read."""
    # huge_tree: libxml2 otherwise drops a text node over 10 MB without a word (a one-line page of one paragraph
    # read as empty); the size and time of a document are bounded by ingest (`limits.DocumentLimits`) instead.
    try:
        root = lxml.html.document_fromstring(html.encode("utf-8"),
                                             parser=lxml.html.HTMLParser(encoding="utf-8", huge_tree=True))
    except (etree.ParserError, ValueError) as exc:
        raise IngestError(f"not readable as HTML: {exc}") from None
    etree.strip_tags(root, etree.Comment, etree.ProcessingInstruction)  # their tail text stays
    anchors = frozenset(_page_anchors(root)) | {TOP}
    title = " ".join((root.findtext(".//title") or "").split())
    main, source = find_main(root)
    strip_furniture(main)
    writer = _Writer(_own_id(main) or TOP, anchors)
    writer.walk(main)
    text, sections = writer.result()
    if _is_redirect(root) and len(text) < _REDIRECT_TEXT:  # "Redirecting to ...": the page is elsewhere
        text, sections = "", ()
    if not title:
        title = next((s.heading for s in sections if s.heading), "")
    return HtmlPage(title, text, sections, anchors, source)


_REDIRECT_TEXT = 200  # at most this much text beside a meta refresh: a stub pointing elsewhere, not a page


def _is_redirect(root: HtmlElement) -> bool:
    return any((m.get("http-equiv") or "").lower() == "refresh" for m in root.iter("meta"))


def _page_anchors(root: HtmlElement) -> list[str]:
    values = root.xpath("//@id | //a/@name")
    return [str(v) for v in values if _ID.fullmatch(str(v))]


def _own_id(element: HtmlElement) -> str | None:
    value = element.get("id") or (element.get("name") if element.tag == "a" else None)
    return value if value and _ID.fullmatch(value) else None


class _Writer:
    """Walks the content element once, in document order, writing text and opening a section per heading."""

    def __init__(self, top: str, anchors: frozenset[str]) -> None:
        self.top = top
        self.anchors = anchors
        self.out: list[str] = []
        self.size = 0  # characters written so far
        self.line: list[str] = []  # inline text of the block being written
        self.sections: list[Section] = []
        self.open_ids: list[tuple[HtmlElement, str, int]] = []  # open elements with ids, and the text written before
        self.last_id: str | None = None
        self.written = 0  # non-space characters written: "no text since" tells a section's opening heading

    def walk(self, main: HtmlElement) -> None:
        walker = etree.iterwalk(main, events=("start", "end"))
        for event, element in walker:
            if not isinstance(element.tag, str):
                continue
            tag = element.tag.lower()
            if event == "start":
                if self._start(element, tag):
                    walker.skip_subtree()
            else:
                self._end(element, tag)
        self._flush()

    def _start(self, element: HtmlElement, tag: str) -> bool:
        """Handle an element's start; True when its whole subtree was written here (a heading, a code block)."""
        if tag in _HEADINGS:
            self._heading(element, _HEADINGS[tag])
            return True
        if tag == "pre":
            self._code(element)
            return True
        own = _own_id(element)
        if own is not None:
            self.open_ids.append((element, own, self.written))
            self.last_id = own
        if tag in _BLOCKS or tag == "li":
            self._flush()
            if tag == "li":
                self.line.append("- ")
        elif tag in _CELLS and "".join(self.line).strip():
            self.line.append(" | ")
        self._inline(element.text)
        return False

    def _end(self, element: HtmlElement, tag: str) -> None:
        if self.open_ids and self.open_ids[-1][0] is element:
            self.open_ids.pop()
        if tag in _BLOCKS or tag == "li":
            self._flush()
        self._inline(element.tail)

    def _heading(self, element: HtmlElement, level: int) -> None:
        self._flush()
        anchor = self._heading_anchor(element)
        title = " ".join(element.text_content().split())
        if anchor != self.top:  # the nearest place to cite for what follows, until another id
            self.last_id = anchor
        if not title:  # an empty heading opens nothing
            return
        self.sections.append(Section(self.size, anchor, title))
        self._write("#" * level + " " + title + "\n\n")
        self.written += len(title)

    def _heading_anchor(self, heading: HtmlElement) -> str:
        inner = [i for i in (_own_id(e) for e in heading.iter() if isinstance(e.tag, str)) if i]
        ancestors = {_own_id(a) for a in heading.iterancestors()} - {None}
        for link in heading.iter("a"):
            target = (link.get("href") or "").removeprefix("#") if (link.get("href") or "").startswith("#") else ""
            if target and target in self.anchors and (target in inner or target in ancestors):
                return target
        if inner:
            return inner[0]
        opened = [i for _, i, before in self.open_ids if before == self.written]
        if opened:
            return opened[-1]
        return self.last_id or self.top

    def _code(self, element: HtmlElement) -> None:
        self._flush()
        own = _own_id(element)
        if own is not None:
            self.last_id = own
        for br in element.iter("br"):  # Docusaurus ends each code line with <br>
            br.tail = "\n" + (br.tail or "")
        code = element.text_content().strip("\n")
        if code.strip():
            self._write("```\n" + code + "\n```\n\n")
            self.written += len(code.strip())

    def _inline(self, text: str | None) -> None:
        if text:
            self.line.append(text)

    def _flush(self) -> None:
        words = " ".join("".join(self.line).split())
        self.line = ["- "] if words == "-" else []  # a list item's mark waits for its first paragraph
        if words and words != "-":
            self._write(words + "\n\n")
            self.written += len(words)

    def _write(self, text: str) -> None:
        if not self.sections and self.size == 0 and text.strip():
            self.sections.append(Section(0, self.last_id or self.top, ""))  # text before the first heading
        self.out.append(text)
        self.size += len(text)

    def result(self) -> tuple[str, tuple[Section, ...]]:
        text = "".join(self.out)
        stripped = text.rstrip()
        sections = tuple(s for s in self.sections if s.start < len(stripped))
        return stripped, sections


def html_document(html: str, source: str, origin: str, default_title: str) -> Document:
    """One HTML page as a document: its content as text, chunked by its sections; a section whose anchor the
    page lacks is reported in `warnings` and cites nothing (see `sections.missing_anchors`)."""
    page = read_html(html)
    doc = Document(doc_id=source, source=source, title=page.title or default_title, text=page.text, fmt="html",
                   origin=origin, sections=page.sections, anchors=page.anchors)
    missing = missing_anchors(doc)
    if not missing:
        return doc
    return dataclasses.replace(doc, warnings=tuple(
        f"citation anchor #{a} does not exist in the page: its chunks cite no anchor and are not admitted"
        for a in missing))
