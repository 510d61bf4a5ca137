"""How a corpus writes its page titles, read from the corpus itself rather than assumed.

Encyclopaedia corpora (Wikipedia and the sets built from it) qualify a title to tell pages of one name apart:
"Salt Road (1951 film)", "Caldport, Westshire"; the name their text uses is the part before the qualifier, and
following a name from one page to another needs that bare name. Documentation does not write titles that way:
"Configure Liveness, Readiness and Startup Probes" is one name, and cutting it at the comma would leave
"Configure Liveness". So the bare-name reading applies only to an index where at least
`evidence.qualified_title_share` of the distinct titles end in a parenthesised qualifier, the form no other
kind of corpus uses at that rate (a documentation set's "Container Runtime Interface (CRI)" is a rare
exception among its titles).

    >>> QUALIFIED.bare("Caldport, Westshire"), PLAIN.bare("Configure Liveness, Readiness and Startup Probes")
    ('Caldport', 'Configure Liveness, Readiness and Startup Probes')
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from evidex.stores.protocol import LiveScan, Store

_QUALIFIER = re.compile(r"\S \([^()]+\)$")  # "Salt Road (1951 film)"


@dataclass(frozen=True)
class TitleConvention:
    """Whether the corpus's titles carry qualifiers after the name (`qualified`)."""

    qualified: bool

    def bare(self, title: str) -> str:
        """The name a title gives: less its qualifier where the corpus qualifies titles ("Salt Road (film)"
        and "Caldport, Westshire" name "Salt Road" and "Caldport"), else the whole title."""
        return self.unqualified(title).split(", ")[0] if self.qualified else title

    def unqualified(self, title: str) -> str:
        """A title less a parenthesised qualifier ("Salt Road (film)": "Salt Road") where the corpus
        qualifies titles, else the whole title. A place's region ("Caldport, Westshire") is kept: it is about
        Westshire too."""
        return title.split(" (")[0] if self.qualified else title


PLAIN = TitleConvention(qualified=False)
QUALIFIED = TitleConvention(qualified=True)


def qualified_share(titles: Iterable[str]) -> float:
    """The share of the distinct non-empty titles that end in a parenthesised qualifier."""
    distinct = {t for t in titles if t}
    return sum(1 for t in distinct if _QUALIFIER.search(t)) / len(distinct) if distinct else 0.0


def read_convention(titles: Iterable[str], min_share: float) -> TitleConvention:
    """QUALIFIED when at least `min_share` of the distinct titles are qualified (0: always; above 1: never)."""
    return QUALIFIED if min_share <= 0 or qualified_share(titles) >= min_share else PLAIN


class TitleConventions:
    """The convention of a store's titles, read once per index snapshot (every live chunk's title, on the first
    search after a change) and shared by the requests that follow. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: dict[tuple[str, float], TitleConvention] = {}

    def of(self, store: Store, min_share: float) -> TitleConvention:
        key = (store.snapshot_id(), min_share)
        with self._lock:
            if key not in self._read:
                titles: Iterable[str] = ()
                if 0 < min_share <= 1:
                    titles = (store.live_titles() if isinstance(store, LiveScan)
                              else (c.title for c in store.all_chunks()))
                self._read = {key: read_convention(titles, min_share)}  # only the current snapshot's
            return self._read[key]
