"""Delimited spans of markup found in time linear in the text: shortcodes, comments, tooltips, code spans, links.

A pattern like `<!--.*?-->` tried at every opener rescans the rest of the text from each one when no closer
follows (`"<!--" * 100_000` takes minutes); these scanners find what those patterns find, left to right and
without overlap, but look at each character a bounded number of times. The tests compare each one with the
pattern it replaces on generated text.

>>> list(closed_spans("a <!-- b --> c <!-- d", re.compile("<!--"), re.compile("-->")))
[(2, 12)]
>>> code_spans("run `make` or ``a`b``")
[(4, 10), (14, 21)]
>>> unlink("see [the guide](guide.md)")
'see the guide'
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_TICKS = re.compile(r"`+")


def closed_spans(text: str, opener: re.Pattern[str], closer: re.Pattern[str],
                 start: int = 0) -> Iterator[tuple[int, int]]:
    """Spans from an opener to the first closer after it (what `opener.*?closer` with re.S finds). Once no closer
    follows an opener, none follows a later one: the scan stops there."""
    pos = start
    while (o := opener.search(text, pos)) is not None:
        c = closer.search(text, o.end())
        if c is None:
            return
        yield o.start(), c.end()
        pos = c.end()


def tooltip_spans(text: str, opener: re.Pattern[str], start: int = 0) -> Iterator[tuple[int, int, str]]:
    """(start, end, attributes) of each `opener[^}]*?[>%]}}`: the attributes run to the first `}` after the
    opener, which must close the shortcode. The first `}` is found once for every opener before it."""
    pos, brace = start, -1
    while (o := opener.search(text, pos)) is not None:
        if brace < o.end():
            brace = text.find("}", o.end())
            if brace == -1:
                return
        if brace - 1 >= o.end() and text[brace - 1] in ">%" and text.startswith("}}", brace):
            yield o.start(), brace + 2, text[o.end():brace - 1]
            pos = brace + 2
        else:
            pos = o.start() + 1


def code_spans(text: str, start: int = 0) -> list[tuple[int, int]]:
    """Backtick code spans as ``(`+)[^`\\n][^\\n]*?\\1`` finds them: an opening run of backticks, a character that is
    neither a backtick nor a line end, and the first later run on the line at least as long (its first backticks
    close the span; a shorter opener is tried when no such run follows)."""
    runs = [m.span() for m in _TICKS.finditer(text, start)]
    longest_after = [0] * len(runs)  # the longest run after each one on its line
    for i in range(len(runs) - 2, -1, -1):
        if text.find("\n", runs[i][1], runs[i + 1][0]) == -1:
            longest_after[i] = max(longest_after[i + 1], runs[i + 1][1] - runs[i + 1][0])
    spans: list[tuple[int, int]] = []
    i, pos = 0, start
    while i < len(runs):
        run_start, run_end = runs[i]
        opener = max(pos, run_start)  # a span can close on the first backticks of a longer run
        width = min(run_end - opener, longest_after[i])
        if width <= 0 or run_end >= len(text) or text[run_end] == "\n":
            i += 1
            continue
        j = i + 1
        while runs[j][1] - runs[j][0] < width:  # every run passed lies inside the span: visited once
            j += 1
        spans.append((run_end - width, runs[j][0] + width))
        i, pos = j, runs[j][0] + width
    return spans


def unlink(text: str) -> str:
    """`text` with each Markdown link `[label](target)` replaced by its label (what
    `re.sub(r"\\[([^\\]]*)\\]\\([^)]*\\)", r"\\1", text)` gives)."""
    out: list[str] = []
    pos, bracket, paren = 0, -1, -1
    i = text.find("[")
    while i != -1:
        if bracket <= i:
            bracket = text.find("]", i + 1)
            if bracket == -1:
                break
        if not text.startswith("(", bracket + 1):
            i = text.find("[", i + 1)
            continue
        if paren < bracket + 2:
            paren = text.find(")", bracket + 2)
            if paren == -1:
                break
        out += [text[pos:i], text[i + 1:bracket]]
        pos = paren + 1
        i = text.find("[", pos)
    out.append(text[pos:])
    return "".join(out)
