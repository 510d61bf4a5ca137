"""Markdown as engineering sites write it: front matter (YAML `---` or TOML `+++`), Hugo shortcodes,
HTML comments, inline HTML (tables and lists written as `<td>`, `<li><code>`), character references
(`&#x2713;`, `&mdash;`), and headings with optional custom ids (`## Title {#custom-id}`).

`clean` returns the readable text plus an offset map, so every chunk can still name its exact character
span in the original file.
"""

from __future__ import annotations

import bisect
import html
import itertools
import re
import tomllib
from dataclasses import dataclass
from typing import Any

import yaml

from evidex.errors import IngestError
from evidex.ingest.delimited import closed_spans, code_spans, tooltip_spans, unlink
from evidex.ingest.limits import MAX_NESTING

_FRONT_MATTER = {
    "---": re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S),
    "+++": re.compile(r"\A\+\+\+[ \t]*\r?\n(.*?)\r?\n\+\+\+[ \t]*(?:\r?\n|\Z)", re.S),
}
# {{< glossary_tooltip text="container image" term_id="image" >}} -> "container image"
_TOOLTIP = re.compile(r"\{\{[<%]\s*glossary_tooltip\b([^}]*?)[>%]\}\}")
_TOOLTIP_OPEN = re.compile(r"\{\{[<%]\s*glossary_tooltip\b")
_ATTR = re.compile(r'(?<!\w)(\w+)\s*=\s*"([^"]*)"')  # from a word's start: a word with no "=" is tried once
# Shortcodes `{{< ... >}}` and comments `<!-- ... -->`, found by `closed_spans` (linear, unlike `.*?`).
_SHORTCODE_OPEN, _SHORTCODE_CLOSE = re.compile(r"\{\{[<%]"), re.compile(r"[>%]\}\}")
_COMMENT_OPEN, _COMMENT_CLOSE = re.compile("<!--"), re.compile("-->")
# Inline HTML elements whose tags are markup, not text: `<td style="white-space: nowrap">Privileged</td>` reads
# "Privileged". Only these names, so a placeholder in prose (`<pod-name>`) stays; links (`<a href>`) stay, since
# they say which page is meant; nothing inside code (a fence or a backtick span) is touched.
_INLINE_TAGS = "abbr|b|code|em|font|i|kbd|mark|nobr|s|small|span|strong|sub|sup|tt|u"  # no space left where they were
_BLOCK_TAGS = ("blockquote|br|caption|center|col|colgroup|dd|del|details|div|dl|dt|figcaption|figure|h[1-6]|hr|img"
               "|ins|li|ol|p|pre|section|summary|table|tbody|td|tfoot|th|thead|tr|ul|wbr")
_HTML_TAG = re.compile(rf"</?(?:(?P<inline>{_INLINE_TAGS})|{_BLOCK_TAGS})(?:\s[^<>]*)?/?>", re.I)
# A character reference reads as its character ("&#x2713;" as "✓", "&mdash;" as "—"), outside code, where
# Markdown keeps it literal; a name HTML does not know stays as written.
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_LINE = re.compile(r"[^\n]*\n?")
_PARAGRAPH_END = re.compile(r"</(?:blockquote|details|div|dl|figure|ol|p|section|table|tr|ul)\s*>", re.I)
# An ATX heading: `## Title ##`. Its title is the rest of the line less a closing run of `#` and blanks
# (`_atx_title`): a lazy `(.+?)[ \t]*#*[ \t]*$` would retry the tail from every character of the line.
_HEADING = re.compile(r"^(#{1,6})([ \t]+)([^\n]*)", re.M)
# A setext heading: one line of text after a blank line (or at the start), underlined with = (level 1) or -
# (level 2). Not a list item, quote, table row, code fence or HTML line; "---" after a blank line is a rule.
# Both lines start at the margin: an indented pair is most often in a list's code block, whose fence this
# module does not see.
_SETEXT = re.compile(r"(?:\A|(?<=\n\n))(?P<title>(?![\s\-*+>|<#`~]|\d+[.)]\s)[^\n]+)\n"
                     r"(?P<line>=+|-+)[ \t]*$", re.M)
_CUSTOM_ID = re.compile(r"(?<![ \t])[ \t]*\{#([\w:.-]+)\}[ \t]*$")  # HTML5 ids may be any letters ("Überblick")
_FENCE = re.compile(r"^(```|~~~)", re.M)


def split_front_matter(text: str, location: str) -> tuple[dict[str, Any], int]:
    """Parse front matter; return (fields, offset where the body starts)."""
    for marker, pattern in _FRONT_MATTER.items():
        if not text.startswith(marker):
            continue
        match = pattern.match(text)
        if match is None:
            raise IngestError(f"front matter opened with {marker!r} is never closed", location=f"{location}:1")
        try:
            fields = _parse_front_matter(match.group(1), marker)
        except RecursionError:  # a backstop: the parsers are bounded before they could recurse this deep
            raise IngestError(f"front matter nested deeper than {MAX_NESTING} levels",
                              location=f"{location}:1") from None
        except (yaml.YAMLError, tomllib.TOMLDecodeError, ValueError, OverflowError) as exc:
            # ValueError / OverflowError: a date YAML cannot build ("2024-13-45")
            line = getattr(getattr(exc, "problem_mark", None), "line", None)
            where = f"{location}:{line + 2}" if line is not None else f"{location}:1"
            raise IngestError(f"invalid front matter: {_first_line(exc)}", location=where) from None
        if fields is None:
            fields = {}
        if not isinstance(fields, dict):
            raise IngestError("front matter is not a mapping", location=f"{location}:1")
        return fields, match.end()
    return {}, 0


def _parse_front_matter(text: str, marker: str) -> Any:
    """YAML (`---`) or TOML (`+++`) front matter, nested at most `MAX_NESTING` levels: deeper metadata is no
    page's, and the parsers recurse once per level (1,000 levels would end the whole ingest)."""
    if marker == "---":
        return yaml.load(text, Loader=_BoundedYamlLoader)  # a SafeLoader
    brackets = _BRACKETS.sub("", text)  # TOML nests only in arrays and inline tables
    depth = deepest = 0
    for ch in brackets:
        depth = depth + 1 if ch in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    if deepest > MAX_NESTING:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels")
    return tomllib.loads(text)


_BRACKETS = re.compile(r"[^\[\]{}]+")


class _BoundedYamlLoader(yaml.SafeLoader):
    """The safe YAML loader, refusing nodes nested deeper than `MAX_NESTING` (with the line they start on)."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_NESTING} levels",
                                                  self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


@dataclass(frozen=True)
class CleanText:
    """Readable text and, for each character of it, where it came from in the source."""

    text: str
    _out_starts: tuple[int, ...]
    _src_starts: tuple[int, ...]

    def source_offset(self, pos: int) -> int:
        i = bisect.bisect_right(self._out_starts, pos) - 1
        return self._src_starts[i] + (pos - self._out_starts[i])


def clean(source: str, start: int = 0) -> CleanText:
    """Strip comments, shortcodes and inline HTML tags from source[start:] and read its character references,
    keeping an offset map back to `source`."""
    code = _CodeRanges(source, start)
    pieces: list[str] = []
    out_starts: list[int] = []
    src_starts: list[int] = []
    out_len = 0
    edits = sorted(
        [(a, b, _tooltip_text(attrs)) for a, b, attrs in tooltip_spans(source, _TOOLTIP_OPEN, start)]
        + [(a, b, "") for a, b in closed_spans(source, _SHORTCODE_OPEN, _SHORTCODE_CLOSE, start)
           if not _TOOLTIP.match(source, a, b)]
        + [(a, b, "") for a, b in closed_spans(source, _COMMENT_OPEN, _COMMENT_CLOSE, start)]
        + _html_tags(source, start, code)
        + _entities(source, start, code)
    )
    pos = start
    for e_start, e_end, replacement in edits:
        if e_start < pos:  # overlapping edit (a shortcode inside a comment): the first one wins
            continue
        if e_start > pos:
            out_starts.append(out_len)
            src_starts.append(pos)
            pieces.append(source[pos:e_start])
            out_len += e_start - pos
        if replacement:
            out_starts.append(out_len)
            src_starts.append(e_start)
            pieces.append(replacement)
            out_len += len(replacement)
        pos = e_end
    out_starts.append(out_len)
    src_starts.append(pos)
    pieces.append(source[pos:])
    return CleanText("".join(pieces), tuple(out_starts), tuple(src_starts))


class _CodeRanges:
    """Where code is (fenced blocks and backtick spans), to leave it as written."""

    def __init__(self, source: str, start: int) -> None:
        spans = sorted(_fenced_ranges(source) + code_spans(source, start))
        self._starts = [a for a, _ in spans]
        self._ends = list(itertools.accumulate((b for _, b in spans), max))  # spans may nest (a span in a fence)

    def __contains__(self, pos: int) -> bool:
        i = bisect.bisect_right(self._starts, pos) - 1
        return i >= 0 and pos < self._ends[i]


def _entities(source: str, start: int, code: _CodeRanges) -> list[tuple[int, int, str]]:
    edits = []
    for m in _ENTITY.finditer(source, start):
        if m.start() not in code and (text := html.unescape(m.group())) != m.group():
            edits.append((m.start(), m.end(), text))
    return edits


def _html_tags(source: str, start: int, code: _CodeRanges) -> list[tuple[int, int, str]]:
    """Edits removing inline HTML tags outside code: an inline element's tag leaves nothing (`<code>x</code>`
    reads "x"), a block's a space between two words (so two cells' words do not run together); a line of tags
    alone goes with its newline (or leaves a blank line, if it ends a row, a list or a paragraph), and a line
    holding a tag loses its indentation (a table's tabs)."""
    edits: list[tuple[int, int, str]] = []
    for line in _LINE.finditer(source, start):
        tags = [m for m in _HTML_TAG.finditer(source, line.start(), line.end())
                if m.start() not in code]
        if not tags:
            continue
        kept = "".join(source[a:b] for a, b in zip([line.start(), *(m.end() for m in tags)],
                                                   [*(m.start() for m in tags), line.end()], strict=True))
        if not kept.strip():  # a row's or a table's end stays a paragraph break: chunks are cut there first
            ends = any(_PARAGRAPH_END.fullmatch(m.group()) for m in tags) and line.group().endswith("\n")
            edits.append((line.start(), line.end(), "\n" if ends else ""))
            continue
        text = line.group().rstrip("\n")
        indent = len(text) - len(text.lstrip())
        if indent:
            edits.append((line.start(), line.start() + indent, ""))
        runs: list[list[re.Match[str]]] = []  # tags written one after another ("</td><td>") act as one
        for m in tags:
            if runs and runs[-1][-1].end() == m.start():
                runs[-1].append(m)
            else:
                runs.append([m])
        for run in runs:
            a, b = run[0].start(), run[-1].end()
            between_words = (a > line.start() + indent and not source[a - 1].isspace()
                             and b < line.start() + len(text) and not source[b].isspace())
            spaced = between_words and any(not m.group("inline") for m in run)
            edits += [(m.start(), m.end(), " " if spaced and i == 0 else "") for i, m in enumerate(run)]
    return edits


def _tooltip_text(attributes: str) -> str:
    attrs: dict[str, str] = dict(_ATTR.findall(attributes))
    return attrs.get("text") or attrs.get("term_id", "")


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    anchor: str
    start: int  # offset of the heading line in the text it was found in
    id_marker: tuple[int, int] | None = None  # the span of its `{#id}` in that text: markup, not its title


def find_headings(text: str) -> list[Heading]:
    """ATX and setext headings outside fenced code, with the anchors a rendered site gives them."""
    fenced = _fenced_ranges(text)
    fence_starts = [a for a, _ in fenced]
    used: set[str] = set()
    last_suffix: dict[str, int] = {}  # the suffix a repeated id last took: every smaller one is taken
    headings = []
    # (line start, level, raw title, where the raw title starts)
    found = [(m.start(), len(m.group(1)), *atx) for m in _HEADING.finditer(text) if (atx := _atx_title(m))]
    found += [(m.start(), 1 if m.group("line")[0] == "=" else 2, m.group("title").rstrip(), m.start("title"))
              for m in _SETEXT.finditer(text)]
    for start, level, raw, raw_start in sorted(found):
        i = bisect.bisect_right(fence_starts, start) - 1
        if i >= 0 and start < fenced[i][1]:  # fenced ranges are disjoint and in order
            continue
        custom = _CUSTOM_ID.search(raw)
        title = _CUSTOM_ID.sub("", raw).strip()
        anchor = custom.group(1) if custom else slugify(title)
        if not custom:  # a repeated id gets -1, -2 ... (the first unused), as GitHub and Hugo do
            base, n = anchor, last_suffix.get(anchor, 0)
            if n:
                anchor = f"{base}-{n}"
            while anchor in used:
                n += 1
                anchor = f"{base}-{n}"
            last_suffix[base] = n
        used.add(anchor)
        marker = None
        if custom:  # with the blanks after it: the line ends there (a closing "##" keeps the marker in the text)
            end = text.find("\n", start)
            end = len(text) if end == -1 else end
            if not text[raw_start + custom.end():end].strip():
                marker = (raw_start + custom.start(), end)
        headings.append(Heading(level, _plain(title), anchor, start, marker))
    return headings


def _atx_title(m: re.Match[str]) -> tuple[str, int] | None:
    """(raw title, where it starts) of an ATX heading line: what follows the blanks after the `#`s, less a
    closing run of blanks, `#`s and blanks, but at least one character (`# #` is titled "#"). A line of `#`s
    and blanks alone is titled by its last blank, if two or more follow the `#`s."""
    rest, rest_start = m.group(3), m.start(3)
    if not rest:
        blanks = m.group(2)
        return (blanks[-1], rest_start - 1) if len(blanks) > 1 else None
    kept = len(rest.rstrip(" \t").rstrip("#").rstrip(" \t"))
    return rest[:max(kept, 1)], rest_start


def _fenced_ranges(text: str) -> list[tuple[int, int]]:
    marks = [m.start() for m in _FENCE.finditer(text)]
    return [(marks[i], marks[i + 1]) for i in range(0, len(marks) - 1, 2)]


def _plain(title: str) -> str:
    return unlink(title).replace("`", "").replace("*", "").strip()


def slugify(title: str) -> str:
    """The heading id GitHub and Hugo (goldmark, autoHeadingIDType=github) render."""
    text = _plain(title).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")
