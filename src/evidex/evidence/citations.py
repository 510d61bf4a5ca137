"""Pages the best evidence cites: the links its authors wrote (`[text](target)`, `href="target"`).

An engineering page links the pages its mechanism works with ("the CPU Manager ... with the Topology
Manager"), so a candidate page that several of the leading pages cite is related evidence by its authors'
word, not only by shared words. A link is resolved against the candidates' sources by path: relative to the
citing page (`../limit-range.md`), or by its last components (`/docs/concepts/policy/limit-range/`,
`https://site/docs/concepts/policy/limit-range/#scope` both name `concepts/policy/limit-range.md`); an
extension and a section's `index` / `_index` are not part of a page's name.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from evidex.types import Candidate, Chunk

_MARKDOWN_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")
_HTML_LINK = re.compile(r"""\bhref\s*=\s*["']([^"']+)["']""", re.I)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
_ORIGIN = re.compile(r"^[a-z][a-z0-9+.-]*://[^/]*", re.I)  # scheme and host of an absolute URL
_PAGE_SUFFIX = re.compile(r"\.(?:md|markdown|mdx|html?|rst|txt)$", re.I)
_SECTION_PAGE = ("index", "_index", "readme")


def page_path(source: str) -> tuple[str, ...]:
    """A source's name as links give it: its path components, without extension or a section's index page."""
    parts = [p for p in _PAGE_SUFFIX.sub("", source.strip("/")).split("/") if p]
    if parts and parts[-1].lower() in _SECTION_PAGE:
        parts.pop()
    return tuple(parts)


def link_paths(chunk: Chunk) -> list[tuple[str, ...]]:
    """The pages a chunk's links point at, as path components (site-absolute or resolved against the chunk's
    own source); a link to elsewhere in the same page, or to mail, is none."""
    out = []
    for target in [*_MARKDOWN_LINK.findall(chunk.text), *_HTML_LINK.findall(chunk.text)]:
        target = target.split("#", 1)[0].split("?", 1)[0]
        if not target or target.lower().startswith(("mailto:", "tel:", "javascript:")):
            continue
        if _SCHEME.match(target):  # an absolute URL: its path names the page (its site cannot be checked here)
            target = _ORIGIN.sub("", target) or "/"
        elif not target.startswith("/"):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(chunk.source), target))
            if target.startswith(".."):
                continue
        path = page_path(target)
        if path:
            out.append(path)
    return out


def _names(link: tuple[str, ...], page: tuple[str, ...]) -> bool:
    return bool(page) and len(page) <= len(link) and link[len(link) - len(page):] == page


def cited_records(leading: Sequence[Candidate], candidates: Sequence[Candidate], min_pages: int) -> frozenset[str]:
    """The best-ranked chunk of each candidate page that at least `min_pages` of the `leading` pages (other than
    itself) link to. `leading` must hold only text the requester may read: a restricted page must not steer."""
    if min_pages < 1:
        return frozenset()
    links_by_page: dict[str, set[tuple[str, ...]]] = {}
    for c in leading:
        links_by_page.setdefault(c.chunk.doc_id, set()).update(link_paths(c.chunk))
    if not any(links_by_page.values()):
        return frozenset()
    best: dict[str, Candidate] = {}
    for c in candidates:  # best ranked first
        best.setdefault(c.chunk.doc_id, c)
    cited = []
    for doc_id, c in best.items():
        page = page_path(c.chunk.source)
        citing = sum(1 for other, links in links_by_page.items()
                     if other != doc_id and any(_names(link, page) for link in links))
        if citing >= min_pages:
            cited.append(c.chunk.record_id)
    return frozenset(cited)
