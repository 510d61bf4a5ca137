"""Where a documentation page's own content is, and what inside it is the site's furniture.

A generated docs page wraps a few paragraphs of content in navigation, sidebars, a table of contents,
breadcrumbs, "edit this page" links and footers that repeat on every page. Indexed as text, that furniture
becomes chunks that match every query about the site and cite nothing. `find_main` picks the content
element by the generators' own markup, most specific first:

    MkDocs Material   <article class="md-content__inner">
    Docusaurus        <div class="theme-doc-markdown">
    Sphinx, MkDocs    <div class="body" role="main"> (Sphinx basic themes, Read the Docs, Furo, pydata),
                      <div role="main"> (MkDocs' own themes)
    Sphinx (old)      <div class="document"> <div class="body">
    any HTML5 site    <main>, or a page's only <article> (mdBook, Hugo, Jekyll themes)

and, on a page none of these describe, the element holding what readability-lxml keeps as the article
(chosen by measurement over trafilatura and jusText: docs/ingest-formats.md). `strip_furniture` then removes what
sits inside the content element but is not content: navigation, permalink marks, breadcrumbs, tables of
contents, edit links, pagination, page footers.

    >>> root = lxml.html.document_fromstring("<body><nav>Home</nav><main><p>Restore the snapshot.</p></main></body>")
    >>> find_main(root)[1]
    <MainSource.MAIN_ELEMENT: 'main-element'>
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator

import lxml.html
from lxml import etree
from lxml.html import HtmlElement


class MainSource(enum.StrEnum):
    """Which rule found a page's content element (recorded so a reader can see why a page read as it did)."""

    MKDOCS_MATERIAL = "mkdocs-material"
    DOCUSAURUS = "docusaurus"
    ROLE_MAIN = "role-main"  # Sphinx and MkDocs themes
    SPHINX_BODY = "sphinx-body"
    MAIN_ELEMENT = "main-element"
    ARTICLE = "article"
    READABILITY = "readability"
    WHOLE_PAGE = "whole-page"


def _has_class(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


_CONTAINERS: tuple[tuple[MainSource, str], ...] = (
    (MainSource.MKDOCS_MATERIAL, f"//article[{_has_class('md-content__inner')}]"),
    (MainSource.DOCUSAURUS, f"//*[{_has_class('theme-doc-markdown')}]"),
    (MainSource.ROLE_MAIN, "//*[@role='main']"),
    (MainSource.SPHINX_BODY, f"//div[{_has_class('document')}]//div[{_has_class('body')}]"),
    (MainSource.MAIN_ELEMENT, "//main"),
)

# Elements that are never content wherever they sit: scripts, forms, navigation, page footers.
_NEVER_CONTENT_TAGS = frozenset({"script", "style", "noscript", "template", "nav", "footer", "button", "form", "select",
                       "textarea", "input", "svg", "iframe", "object", "canvas", "dialog"})
_NEVER_CONTENT_ROLES = frozenset({"navigation", "search", "banner", "contentinfo", "toolbar", "menu", "menubar",
                                  "dialog"})
# Site furniture by the class names the generators give it.
_FURNITURE_CLASSES = frozenset({
    "headerlink", "hash-link",  # permalink marks: Sphinx and MkDocs' pilcrow, Docusaurus' '#'
    "sphinxsidebar", "related", "footer", "rst-footer-buttons", "toctree-wrapper", "contents",  # Sphinx
    "breadcrumbs", "breadcrumb", "wy-breadcrumbs", "theme-doc-breadcrumbs", "md-path",  # breadcrumbs
    "md-content__button", "md-source-file", "md-footer", "md-sidebar",  # MkDocs Material
    "theme-edit-this-page", "theme-doc-footer", "theme-doc-toc-mobile", "theme-doc-version-banner",  # Docusaurus
    "theme-doc-version-badge", "pagination-nav", "theme-last-updated",
    "edit-this-page", "editthispage", "prev-next-area", "toc", "table-of-contents", "skip-link",  # common
})
_HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})


def find_main(root: HtmlElement) -> tuple[HtmlElement, MainSource]:
    """The element holding the page's own content, and the rule that found it. Where a rule matches several
    elements (a pydata theme nests one role="main" in another), the innermost wins."""
    for source, path in _CONTAINERS:
        found = _elements(root.xpath(path))
        if found:
            return _innermost(found), source
    articles = _elements(root.iter("article"))
    if len(articles) == 1:
        return articles[0], MainSource.ARTICLE
    body = root.find("body")
    body = body if isinstance(body, HtmlElement) else root
    kept = readability_main(body)
    return (kept, MainSource.READABILITY) if kept is not None else (body, MainSource.WHOLE_PAGE)


def _elements(found: Iterable[object]) -> list[HtmlElement]:
    return [e for e in found if isinstance(e, HtmlElement)]


def _innermost(found: list[HtmlElement]) -> HtmlElement:
    inside = set(found)
    for element in found:
        if not any(d in inside for d in element.iterdescendants()):
            return element
    return found[0]


def strip_furniture(main: HtmlElement) -> None:
    """Remove the site's furniture from inside the content element (in place), in one pass over it. The tail
    text after a removed element stays: it belongs to the content around it."""
    doomed: list[HtmlElement] = []
    walker = etree.iterwalk(main, events=("start",))
    for _, element in walker:
        if element is not main and isinstance(element, HtmlElement) and _is_furniture(element):
            doomed.append(element)
            walker.skip_subtree()
    for element in doomed:
        element.drop_tree()


def _is_furniture(element: HtmlElement) -> bool:
    tag = element.tag if isinstance(element.tag, str) else ""
    if tag in _NEVER_CONTENT_TAGS or element.get("role") in _NEVER_CONTENT_ROLES:
        return True
    if not _FURNITURE_CLASSES.isdisjoint((element.get("class") or "").split()):
        return True
    return tag == "header" and not any(e.tag in _HEADING_TAGS for e in element.iter())  # a bar, not a title


def readability_main(body: HtmlElement) -> HtmlElement | None:
    """The smallest element holding the text blocks readability-lxml keeps as the article, or None when it
    keeps none. readability scores containers by their paragraphs' length and commas against their link
    density and class names, so a block of links or a one-line footer loses on any site; the element found
    here is one of the page's own, so its structure and ids still give the citation anchors."""
    from readability import Document as Readability  # only for a page no rule describes

    try:
        summary = Readability(lxml.html.tostring(body, encoding="unicode")).summary(html_partial=True)
        kept = lxml.html.fragment_fromstring(summary, create_parent="div")
    except (etree.ParserError, ValueError, TypeError):  # readability found no text to score
        return None
    wanted = {_normal(e.text_content()) for e in _blocks(kept)} - {""}
    holders = [e for e in _blocks(body) if _normal(e.text_content()) in wanted]
    return _common_ancestor(holders) if holders else None


def _blocks(root: HtmlElement) -> Iterator[HtmlElement]:
    """The leaf text blocks under `root` (paragraphs, list items, code, cells, headings)."""
    for element in root.iter(*_TEXT_BLOCKS):
        if isinstance(element, HtmlElement):
            yield element


_TEXT_BLOCKS = ("p", "li", "pre", "td", "th", "dd", "dt", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6",
                "figcaption", "caption")


def _normal(text: str) -> str:
    return " ".join(text.split())


def _common_ancestor(elements: list[HtmlElement]) -> HtmlElement:
    paths = [[e, *(a for a in e.iterancestors() if isinstance(a, HtmlElement))][::-1] for e in elements]
    common = paths[0][0]
    for level in zip(*paths, strict=False):
        if any(node is not level[0] for node in level):
            break
        common = level[0]
    return common
