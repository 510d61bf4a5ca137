"""Links between pages: where a page's links point, and what its author says around them.

A link is resolved by path: relative to the page that holds it (`../limit-range.md`), or by its last components
(`/docs/concepts/policy/limit-range/`, `https://site/docs/concepts/policy/limit-range/#scope` both name
`concepts/policy/limit-range.md`); an extension and a section's `index` / `_index` are not part of a page's name.

The words around a link are its author's words for the page it points to: "run a logging agent on every node
with a [DaemonSet](...)" says what the DaemonSet page is for in the words a question uses, which the page itself
may not. Web search learned to rank by such anchor text. `LinkIndex` holds, for one snapshot of an index, each
link's context under every page name the link could mean.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from evidex.types import Chunk

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


def _links(source: str, text: str) -> Iterator[tuple[tuple[str, ...], re.Match[str]]]:
    """Each link of `text` (written in the page `source`) that names a page: its path components (site-absolute
    or resolved against `source`) and where it stands; a link to elsewhere in the same page, or to mail, is none."""
    for m in sorted([*_MARKDOWN_LINK.finditer(text), *_HTML_LINK.finditer(text)], key=lambda m: m.start()):
        target = m.group(1).split("#", 1)[0].split("?", 1)[0]
        if not target or target.lower().startswith(("mailto:", "tel:", "javascript:")):
            continue
        if _SCHEME.match(target):  # an absolute URL: its path names the page (its site cannot be checked here)
            target = _ORIGIN.sub("", target) or "/"
        elif not target.startswith("/"):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
            if target.startswith(".."):
                continue
        path = page_path(target)
        if path:
            yield path, m


def link_paths(chunk: Chunk) -> list[tuple[str, ...]]:
    """The pages a chunk's links point at, as path components (see `_links`)."""
    return [path for path, _ in _links(chunk.source, chunk.text)]


_LINK_MARKUP = re.compile(r"\[([^\]]*)\]\([^)]*\)|<[^>]+>")  # a markdown link (kept: its text) or an HTML tag


def _plain(text: str) -> str:
    return _LINK_MARKUP.sub(lambda m: m.group(1) or " ", text)


def link_contexts(source: str, text: str, words: int = 20) -> list[tuple[tuple[str, ...], str]]:
    """(the page a link of `text` points at, the `words` words either side of it and its own text, link markup
    left out) for each link to another page. What the author of `source` says of that page."""
    out = []
    own = page_path(source)
    for path, m in _links(source, text):
        if names(path, own):
            continue
        opening, closing = ("[", ")") if m.re is _MARKDOWN_LINK else ("<", ">")  # the link, or its <a ...> tag
        start = max(text.rfind(opening, 0, m.start() + 1), 0)
        end = text.find(closing, m.end()) + 1 or m.end()
        before = _plain(text[:start]).split()[-words:]
        after = _plain(text[end:]).split()[:words]
        out.append((path, " ".join([*before, *_plain(text[start:end]).split(), *after])))
    return out


def names(link: tuple[str, ...], page: tuple[str, ...]) -> bool:
    """The link (its path components) names the page: its last components are the page's path."""
    return bool(page) and len(page) <= len(link) and link[len(link) - len(page):] == page


CONTEXT_WORDS = 20  # words either side of a link taken as its context


class LinkIndex:
    """The link contexts of a snapshot's live records, by the page they name: built from (record id, source,
    text) rows, read by `contexts`."""

    def __init__(self, rows: Iterable[tuple[str, str, str]]) -> None:
        self._by_name: dict[str, list[tuple[str, str]]] = {}
        for record_id, source, text in rows:
            for path, context in link_contexts(source, text, CONTEXT_WORDS):  # never a link to its own page
                entry = (record_id, context)
                for i in range(len(path)):  # every name the link could be read as, so a page looks up its own
                    self._by_name.setdefault("/".join(path[i:]), []).append(entry)

    def contexts(self, sources: Sequence[str], readable: Callable[[str], bool]) -> dict[str, list[str]]:
        """For each of `sources` that links name: the contexts of those links in other pages' records that
        `readable` (a test by record id) lets through."""
        out: dict[str, list[str]] = {}
        for source in dict.fromkeys(sources):
            found = [context for record_id, context in self._by_name.get("/".join(page_path(source)), ())
                     if readable(record_id)]
            if found:
                out[source] = found
        return out
