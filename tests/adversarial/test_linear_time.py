"""The markdown reader and the chunker take time linear in their input, and find what they found before.

Each linear scanner is compared with the backtracking pattern it replaced (kept here as the reference) on text
drawn from the characters those patterns care about; then every hostile shape the patterns were slow on is timed
at 1x and 8x its size: a linear reader takes about 8 times as long, a quadratic one 64 times.
"""

from __future__ import annotations

import gc
import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evidex.ingest.chunking import chunk_text
from evidex.ingest.delimited import closed_spans, code_spans, tooltip_spans, unlink
from evidex.ingest.markdown import _ATTR, _CUSTOM_ID, _HEADING, _SETEXT, _TOOLTIP_OPEN, _atx_title, clean, find_headings

# The patterns as they were, before they were made linear: the reference for what must be found.
OLD_SHORTCODE = re.compile(r"\{\{[<%].*?[>%]\}\}", re.S)
OLD_COMMENT = re.compile(r"<!--.*?-->", re.S)
OLD_TOOLTIP = re.compile(r"\{\{[<%]\s*glossary_tooltip\b([^}]*?)[>%]\}\}")
OLD_CODE_SPAN = re.compile(r"(`+)[^`\n][^\n]*?\1")
OLD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
OLD_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
OLD_SETEXT = re.compile(r"(?:\A|(?<=\n\n))(?P<title>(?![\s\-*+>|<#`~]|\d+[.)]\s)[^\n]*\S[^\n]*)\n"
                        r"(?P<line>=+|-+)[ \t]*$", re.M)
OLD_CUSTOM_ID = re.compile(r"[ \t]*\{#([\w:.-]+)\}[ \t]*$")
OLD_ATTR = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def markup(alphabet: str) -> st.SearchStrategy[str]:
    """Text made of `alphabet` and the short tokens that open and close markup."""
    tokens = ["{{<", "{{%", ">}}", "%}}", "<!--", "-->", "glossary_tooltip", " text=\"x\"", "]", "[", "](",
              ")", "```", "``", "`", "\n", "\n\n", "# ", "## ", "===", "---", "{#a}", " ", "\t", "#"]
    return st.lists(st.sampled_from(tokens) | st.text(alphabet, max_size=3), max_size=40).map("".join)


TEXT = markup("ab-=#{}<>%`[]() \t\n")


@given(TEXT, st.integers(0, 5))
def test_closed_spans_find_what_lazy_patterns_found(text: str, start: int) -> None:
    start = min(start, len(text))
    for old, opener, closer in ((OLD_SHORTCODE, r"\{\{[<%]", r"[>%]\}\}"), (OLD_COMMENT, "<!--", "-->")):
        expected = [m.span() for m in old.finditer(text, start)]
        assert list(closed_spans(text, re.compile(opener), re.compile(closer), start)) == expected


@given(TEXT)
def test_tooltip_spans_find_what_the_pattern_found(text: str) -> None:
    expected = [(m.start(), m.end(), m.group(1)) for m in OLD_TOOLTIP.finditer(text)]
    assert list(tooltip_spans(text, _TOOLTIP_OPEN)) == expected


@given(TEXT, st.integers(0, 5))
def test_code_spans_find_what_the_pattern_found(text: str, start: int) -> None:
    start = min(start, len(text))
    assert code_spans(text, start) == [m.span() for m in OLD_CODE_SPAN.finditer(text, start)]


@given(TEXT)
def test_unlink_gives_what_the_substitution_gave(text: str) -> None:
    assert unlink(text) == OLD_LINK.sub(r"\1", text)


@given(TEXT)
def test_atx_titles_are_what_the_lazy_pattern_read(text: str) -> None:
    expected = [(m.start(), m.group(2), m.start(2)) for m in OLD_HEADING.finditer(text)]
    found = [(m.start(), *atx) for m in _HEADING.finditer(text) if (atx := _atx_title(m))]
    assert found == expected


@given(TEXT)
def test_setext_and_id_patterns_match_what_they_matched(text: str) -> None:
    assert [m.span() for m in _SETEXT.finditer(text)] == [m.span() for m in OLD_SETEXT.finditer(text)]
    for line in text.split("\n"):
        old, new = OLD_CUSTOM_ID.search(line), _CUSTOM_ID.search(line)
        assert (old and old.span()) == (new and new.span())
        assert _CUSTOM_ID.sub("", line) == OLD_CUSTOM_ID.sub("", line)


@given(st.lists(st.sampled_from(["Setup", "Setup", "setup-1", "Run", "Setup {#setup-2}"]), max_size=30))
def test_repeated_headings_take_the_first_unused_suffix(titles: list[str]) -> None:
    used: set[str] = set()
    expected = []
    for title in titles:  # the rule, written out: a custom id as given, else the slug with the first free -N
        custom = re.search(r"\{#([\w:.-]+)\}$", title)
        anchor = custom.group(1) if custom else title.lower()
        base, n = anchor, 0
        while not custom and anchor in used:
            n += 1
            anchor = f"{base}-{n}"
        used.add(anchor)
        expected.append(anchor)
    assert [h.anchor for h in find_headings("".join(f"# {t}\n\n" for t in titles))] == expected


def test_attribute_pattern_reads_what_it_read() -> None:
    for text in ('text="a" term_id="b"', 'x text = "a"', 'ab="c"d="e"', "aaa", 'a= "b', '_="1"'):
        assert _ATTR.findall(text) == OLD_ATTR.findall(text)


HOSTILE: dict[str, Callable[[int], str]] = {
    "one long line": lambda n: "a" * n,
    "heading with a long blank run": lambda n: "# a" + " " * n + "b",
    "heading id after blanks": lambda n: "# a" + " " * n + "{#b}x",
    "backtick runs of falling length": lambda n: "".join("`" * k + "a" for k in range(int((2 * n) ** 0.5), 0, -1)),
    "a backtick run before a long line": lambda n: "`" * (n // 2) + "a" * (n // 2),
    "unclosed shortcodes": lambda n: "{{<" * (n // 3),
    "unclosed comments": lambda n: "<!--" * (n // 4),
    "unclosed tooltips": lambda n: "{{< glossary_tooltip " * (n // 21),
    "a tooltip's one long word": lambda n: "{{< glossary_tooltip " + "a" * n + " >}}",
    "unclosed link labels in a heading": lambda n: "# " + "[a" * (n // 2),
    "one heading repeated": lambda n: "# a\n\n" * (n // 5),
    "headings between fences": lambda n: "```\nx\n```\n# a\n" * (n // 16),
    "headings with ids": lambda n: "# a {#x}\ntext\n" * (n // 14),
}


def _read(text: str) -> float:
    """CPU seconds of this thread reading `text`: other work on a shared machine does not count."""
    started = time.thread_time()
    chunk_text(clean(text), max_chars=1200, overlap_chars=100, min_chars=200)
    return time.thread_time() - started


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_reading_hostile_markdown_grows_linearly(shape: str) -> None:
    """8x the text takes < 24x the CPU time (a quadratic reader: 64x). The best of 5 runs, taken in turns with
    the garbage collector paused, measures the reader and not a busy machine; the sizes keep each shape well under
    a second (the old patterns took 1-25 s on the larger text)."""
    make = HOSTILE[shape]
    small, large = make(4_000), make(32_000)
    t_small = t_large = float("inf")
    gc.disable()
    try:
        for _ in range(5):
            t_small, t_large = min(t_small, _read(small)), min(t_large, _read(large))
    finally:
        gc.enable()
    assert t_large < 24 * max(t_small, 2e-4), f"{shape}: {t_small * 1e3:.1f} ms -> {t_large * 1e3:.1f} ms at 8x"
