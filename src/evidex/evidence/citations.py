"""Pages the best evidence cites: the links its authors wrote (`[text](target)`, `href="target"`).

An engineering page links the pages its mechanism works with ("the CPU Manager ... with the Topology
Manager"), so a candidate page that several of the leading pages cite is related evidence by its authors'
word, not only by shared words. Links are resolved as `evidex.retrieval.links` says.
"""

from __future__ import annotations

from collections.abc import Sequence

from evidex.retrieval.links import link_paths, names, page_path
from evidex.types import Candidate


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
                     if other != doc_id and any(names(link, page) for link in links))
        if citing >= min_pages:
            cited.append(c.chunk.record_id)
    return frozenset(cited)
