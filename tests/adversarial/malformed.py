"""A corpus of malformed and hostile inputs, generated, each with the outcome ingest must give it.

Each `Kind` writes one file (or one JSONL line) and names what must happen to it: a dead letter whose reason
holds `expect`, a warning holding it, a document ingested (`ingested`) or loaded with nothing to search
(`empty`). `REFUSALS` are inputs that stop the whole run before anything is written, naming the file and line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum


class Outcome(Enum):
    DEAD_LETTER = "dead letter"
    WARNING = "warning"
    INGESTED = "ingested"
    EMPTY = "empty"


@dataclass(frozen=True)
class Kind:
    name: str
    path: str  # under the corpus folder; "docs.jsonl:N" for a JSONL line
    content: str | bytes
    outcome: Outcome
    expect: str = ""  # what the reason or warning says
    doc_id: str = ""  # a JSONL line's document (a file's is its path)


DEAD, WARN, OK, EMPTY = Outcome.DEAD_LETTER, Outcome.WARNING, Outcome.INGESTED, Outcome.EMPTY
BODY = "# Page\n\nRestart the worker after draining it.\n"
SIZE_BOUND = 100_000  # [ingest] max_document_bytes for the corpus run


def _md(name: str, content: str | bytes, outcome: Outcome, expect: str = "") -> Kind:
    return Kind(name, f"{name}.md", content, outcome, expect)


FILES: list[Kind] = [
    _md("yaml-never-closed", "---\ntitle: x\n" + BODY, DEAD, "front matter opened with '---' is never closed"),
    _md("toml-never-closed", "+++\ntitle = 'x'\n" + BODY, DEAD, "front matter opened with '+++' is never closed"),
    _md("yaml-syntax", "---\ntitle: [unclosed\n---\n" + BODY, DEAD, "invalid front matter"),
    _md("toml-syntax", "+++\ntitle = \n+++\n" + BODY, DEAD, "invalid front matter"),
    _md("yaml-list", "---\n- a\n- b\n---\n" + BODY, DEAD, "front matter is not a mapping"),
    _md("yaml-scalar", "---\njust text\n---\n" + BODY, DEAD, "front matter is not a mapping"),
    _md("yaml-deep-block", "---\n" + "".join("  " * i + f"k{i}:\n" for i in range(200)) + "---\n" + BODY, DEAD,
        "nested deeper than 64 levels"),
    _md("yaml-deep-flow", "---\nx: " + "[" * 1000 + "]" * 1000 + "\n---\n" + BODY, DEAD, "nested deeper than 64"),
    _md("yaml-deep-map", "---\nx: " + "{a: " * 1000 + "1" + "}" * 1000 + "\n---\n" + BODY, DEAD, "nested deeper"),
    _md("toml-deep-table", "+++\nx = " + "{a = " * 1000 + "1" + "}" * 1000 + "\n+++\n" + BODY, DEAD, "nested deeper"),
    _md("toml-deep-array", "+++\nx = " + "[" * 1000 + "]" * 1000 + "\n+++\n" + BODY, DEAD, "nested deeper"),
    _md("impossible-date", "---\npublished_at: 2024-13-45\n---\n" + BODY, DEAD, "month must be in 1..12"),
    _md("date-not-a-date", "---\npublished_at: next tuesday\n---\n" + BODY, DEAD, "is not an ISO 8601 timestamp"),
    _md("date-a-number", "---\nexpires_at: 12\n---\n" + BODY, DEAD, "expected an ISO 8601 timestamp, got int"),
    _md("labels-a-number", "---\naccess_labels: 7\n---\n" + BODY, DEAD, "access_labels: expected a list"),
    _md("labels-empty-string", "---\naccess_labels: ['']\n---\n" + BODY, DEAD, "access_labels: expected a list"),
    _md("citation-a-list", "---\ncitation_uri: [a]\n---\n" + BODY, DEAD, "citation_uri: expected a string"),
    _md("not-utf8", b"# Caf\xe9\n\nbody\n", DEAD, "not UTF-8 text"),
    _md("nul-bytes", b"# Page\x00\n\nbody\n", DEAD, "binary content (NUL bytes)"),
    Kind("nul-text", "nul-text.txt", b"plain\x00text", DEAD, "binary content"),
    Kind("latin1-text", "latin1-text.txt", b"caf\xe9 au lait", DEAD, "not UTF-8 text"),
    _md("too-large", "# Big\n\n" + "word " * (SIZE_BOUND // 5 + 10), DEAD, "over [ingest] max_document_bytes"),
    _md("misspelled-key", "---\nacess_labels: [eng]\n---\n" + BODY, WARN, "did you mean access_labels?"),
    _md("camel-misspelled", "---\ncitationURL: https://x.example/a\n---\n" + BODY, WARN, "did you mean"),
    _md("expires-before-published", "---\npublished_at: 2024-02-01\nexpires_at: 2024-01-01\n---\n" + BODY, WARN,
        "the gate admits it at no instant"),
    _md("relative-citation", "---\ncitation_uri: docs/page\n---\n" + BODY, WARN, "is not an absolute URI"),
    _md("one-long-line", "word " * 15_000, OK),
    _md("long-heading-blanks", "# a" + " " * 50_000 + "b\n\ntext\n", OK),
    _md("backtick-storm", "`" * 20_000 + "a" * 20_000, OK),
    _md("unclosed-comments", "<!--" * 10_000 + "\ntext\n", OK),
    _md("unclosed-shortcodes", "{{<" * 10_000 + "\ntext\n", OK),
    _md("unclosed-tooltips", "{{< glossary_tooltip " * 2_000 + "\ntext\n", OK),
    _md("unclosed-links", "# " + "[a" * 20_000 + "\n\ntext\n", OK),
    _md("repeated-headings", "# Same\n\ntext\n\n" * 5_000, OK),
    _md("crlf-lines", BODY.replace("\n", "\r\n"), OK),
    _md("byte-order-mark", "\ufeff---\ntitle: Marked\n---\n" + BODY, OK),
    _md("terminal-escapes", "# Title\x1b[2J\x1b]0;owned\x07\n\nText \x1b[31mred\x1b[0m \u202eevil\n", OK),
    _md("yaml-anchors", "---\nbase: &b [x, y]\nother: *b\n---\n" + BODY, OK),
    _md("nested-60-ok", "---\n" + "".join("  " * i + f"k{i}:\n" for i in range(60)) + "  " * 60 + "v: 1\n---\n"
        + BODY, OK),
    _md("front-matter-only", "---\ntitle: Section index\n---\n", EMPTY),
    _md("empty-file", "", EMPTY),
    _md("blank-lines-only", "\n \n\t\n", EMPTY),
    # lxml asserts on a page without a body: the reader's failure is this file's dead letter, not the batch's end.
    Kind("html-no-body", "html-no-body.html", "<html><head><title>T</title></head></html>", DEAD, "reader failed"),
]


def _line(item: object) -> str:
    return item if isinstance(item, str) else json.dumps(item)


# JSONL lines, each one kind (line numbers follow the list order).
LINES: list[tuple[str, object, Outcome, str]] = [
    ("jsonl-invalid-json", "{not json", DEAD, "invalid JSON"),
    ("jsonl-array", [1, 2], DEAD, "a JSONL document must be an object"),
    ("jsonl-no-id", {"text": "t"}, DEAD, "missing 'doc_id'"),
    ("jsonl-empty-id", {"doc_id": "", "text": "t"}, DEAD, "missing 'doc_id'"),
    ("jsonl-null-id", {"doc_id": None, "text": "t"}, DEAD, "missing 'doc_id'"),
    ("jsonl-float-id", {"doc_id": 1.5, "text": "t"}, DEAD, "missing 'doc_id'"),
    ("jsonl-true-id", {"doc_id": True, "text": "t"}, DEAD, "must be a string or an integer, not true"),
    ("jsonl-no-text", {"doc_id": "a"}, DEAD, "missing or empty 'text'"),
    ("jsonl-blank-text", {"doc_id": "b", "text": "  "}, DEAD, "missing or empty 'text'"),
    ("jsonl-text-number", {"doc_id": "c", "text": 5}, DEAD, "missing or empty 'text'"),
    ("jsonl-title-list", {"doc_id": "d", "text": "t", "title": ["x"]}, DEAD, "'title' must be a string"),
    ("jsonl-source-number", {"doc_id": "e", "text": "t", "source": 3}, DEAD, "'source' must be a string"),
    ("jsonl-deep", '{"doc_id": "f", "text": "t", "m": ' + "[" * 2000 + "]" * 2000 + "}", DEAD, "nested deeper"),
    ("jsonl-bad-date", {"doc_id": "g", "text": "t", "published_at": "yesterday"}, DEAD, "not an ISO 8601"),
    ("jsonl-labels-string", {"doc_id": "h", "text": "t", "access_labels": "eng"}, OK, ""),  # one label
    ("jsonl-too-large", {"doc_id": "i", "text": "x" * (SIZE_BOUND + 10)}, DEAD, "max_document_bytes"),
    ("jsonl-ok", {"doc_id": "ok-1", "text": "A fine record about draining workers."}, OK, ""),
    ("jsonl-duplicate", {"doc_id": "ok-1", "text": "The same id again."}, DEAD, "duplicate doc_id 'ok-1'"),
    ("jsonl-misspelled", {"doc_id": "j", "text": "t", "acces_labels": ["x"]}, WARN, "did you mean access_labels?"),
]


def jsonl_text() -> bytes:
    lines = [_line(item).encode() for _, item, _, _ in LINES]
    lines.insert(len(lines) - 1, b"\xff\xfe not utf-8")  # a line of bytes that are no UTF-8, second to last
    return b"\n".join(lines) + b"\n"


def jsonl_kinds() -> list[Kind]:
    """The JSONL lines as kinds, with the line each sits on."""
    bad = len(LINES)  # the inserted line's number: the lines from it on move down one
    kinds = [Kind(name, f"docs.jsonl:{n if n < bad else n + 1}", "", outcome, expect,
                  str(item.get("doc_id", "")) if isinstance(item, dict) else "")
             for n, (name, item, outcome, expect) in enumerate(LINES, start=1)]
    return [*kinds, Kind("jsonl-not-utf8", f"docs.jsonl:{bad}", "", DEAD, "not UTF-8 text")]


# Inputs that stop the run before anything is written, naming the file and line: (name, overlay text, line, says).
REFUSALS: list[tuple[str, str, int, str]] = [
    ("overlay-invalid-json", '{"source": "a.md"}\n\n{oops\n', 3, "invalid JSON"),
    ("overlay-not-an-object", '[1]\n', 1, "each overlay line must be an object"),
    ("overlay-duplicate", '{"source": "a.md"}\n{"source": "a.md"}\n', 2, "duplicate overlay entry"),
    ("overlay-bad-date", '{"source": "a.md", "published_at": "soon"}\n', 1, "not an ISO 8601 timestamp"),
]
