"""Provenance for many pages at once: metadata overlays with glob and prefix entries, default access labels,
a citation URL template, and include / exclude patterns over the files of an ingest.

A first run over a folder of one's own docs should not need a line per file before anything is admitted. Three
layers give a document its provenance, each only where the one above it says nothing:

1. the overlay's entry for its exact ``source``;
2. the overlay's pattern entries that match it (``source_glob`` or ``source_prefix``), in the order of the file:
   a later entry's fields override an earlier one's (write broad entries first, narrow ones after them);
3. the document's own front matter (or JSONL fields);
4. the defaults of the ingest (``--default-labels``, ``--citation-base`` or ``[ingest]`` in the configuration):
   labels for a document with none, and a citation URI for one without.

Example overlay (JSONL, one entry a line)::

    {"source_glob": "**", "access_labels": ["staff"]}
    {"source_prefix": "internal/", "access_labels": ["engineering"]}
    {"source": "internal/oncall.md", "owner": "sre@example.com"}

Globs match a document's source (its path under the folder ingested): ``*`` and ``?`` stay within one path
segment, ``**`` spans any number of segments (``guides/**`` holds ``guides/a.md`` and ``guides/x/b.md``; ``**/*.md``
also holds ``top.md``), ``[abc]`` is a character class.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol
from urllib.parse import quote

from evidex.errors import ConfigError, IngestError
from evidex.ingest.provenance import is_absolute_uri, merge, misspelled_keys, provenance_fields
from evidex.types import Provenance


class OverlayMatch(enum.Enum):
    """How an overlay entry names the documents it describes."""

    SOURCE = "source"  # exactly one source
    GLOB = "source_glob"  # every source the glob matches
    PREFIX = "source_prefix"  # every source that starts with the prefix

    @classmethod
    def of_entry(cls, item: Mapping[str, Any]) -> OverlayMatch:
        """The one match key an overlay line carries; anything else is an error listing the choices."""
        present = [m for m in cls if m.value in item]
        if len(present) != 1 or not isinstance(item[present[0].value], str) or not item[present[0].value]:
            raise ValueError("each overlay line must be an object with exactly one non-empty string key of "
                             + ", ".join(repr(m.value) for m in cls))
        return present[0]


def glob_regex(glob: str) -> re.Pattern[str]:
    """A compiled regex for a path glob: `*` and `?` within a segment, `**` across segments, `[...]` a class.

    >>> bool(glob_regex("guides/**").fullmatch("guides/a/b.md"))
    True
    >>> bool(glob_regex("*.md").fullmatch("guides/a.md"))
    False
    """
    out: list[str] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and _class_end(glob, i) > 0:
            end = _class_end(glob, i)
            body = glob[i + 1:end].replace("\\", "\\\\")
            out.append("[" + ("^" + body[1:] if body.startswith("!") else "\\" + body if body.startswith("^")
                              else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _class_end(glob: str, start: int) -> int:
    """Where the character class opened at `start` closes (its first `]` after an optional `!` and a leading
    `]`), or -1 when it never does (the `[` is then a literal)."""
    j = start + 1
    if glob.startswith("!", j):
        j += 1
    if glob.startswith("]", j):
        j += 1
    return glob.find("]", j)


@dataclass(frozen=True)
class PatternEntry:
    """One overlay line that names many sources: a glob or a prefix, with the provenance fields it sets."""

    match: OverlayMatch
    pattern: str
    fields: Mapping[str, Any]
    regex: re.Pattern[str] | None = None  # for a glob

    def matches(self, source: str) -> bool:
        if self.match is OverlayMatch.PREFIX:
            return source.startswith(self.pattern)
        return self.regex is not None and self.regex.fullmatch(source) is not None

    @property
    def name(self) -> str:
        """How a report names the entry: `guides/** (source_glob)`."""
        return f"{self.pattern} ({self.match.value})"


@dataclass(frozen=True)
class Overlay:
    """A metadata overlay: entries by exact source, and pattern entries in the order of the file."""

    exact: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    patterns: tuple[PatternEntry, ...] = ()

    def fields_for(self, source: str) -> dict[str, Any]:
        """The provenance fields the overlay sets for `source`: matching patterns in file order, the exact entry
        last (so it wins)."""
        fields: dict[str, Any] = {}
        for entry in self.patterns:
            if entry.matches(source):
                fields.update(entry.fields)
        fields.update(self.exact.get(source, {}))
        return fields

    def unmatched(self, named: Iterable[str], unlisted: Sequence[str] = ()) -> tuple[str, ...]:
        """Entries that no source in `named` meets (a typo drops their provenance silently otherwise). An exact
        source under a directory that could not be listed (`unlisted`, "sub/") is not reported: it was unseen."""
        names = set(named)
        exact = [s for s in self.exact if s not in names and not s.startswith(tuple(unlisted))]
        patterns = [e.name for e in self.patterns if not any(e.matches(s) for s in names)]
        return (*exact, *patterns)


def read_overlay(path: Path) -> Overlay:
    """Read a metadata overlay file (JSONL, one entry a line; see the module docstring). Errors name file and
    line: an overlay exists to set provenance, so a misspelled field or a bad date is an error, not a warning."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise IngestError(f"cannot read metadata overlay: {exc}", location=str(path)) from None
    exact: dict[str, dict[str, Any]] = {}
    patterns: list[PatternEntry] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        location = f"{path}:{n}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise IngestError(f"invalid JSON: {exc.msg} (column {exc.colno})", location=location) from None
        try:
            match = OverlayMatch.of_entry(item if isinstance(item, dict) else {})
        except ValueError as exc:
            raise IngestError(str(exc), location=location) from None
        rest = {k: v for k, v in item.items() if k != match.value}
        misspelled = misspelled_keys(rest)
        if misspelled:
            raise IngestError("; ".join(misspelled), location=location)
        fields = provenance_fields(rest, location)
        key = item[match.value]
        if match is OverlayMatch.SOURCE:
            if key in exact:
                raise IngestError(f"duplicate overlay entry for source {key!r}", location=location)
            exact[key] = fields
        else:
            regex = glob_regex(key) if match is OverlayMatch.GLOB else None
            patterns.append(PatternEntry(match, key, fields, regex))
    return Overlay(exact, tuple(patterns))


class CitationField(enum.Enum):
    """The fields a citation URL template may name, for the source `guides/setup/install.md`."""

    SOURCE = "source"  # guides/setup/install.md
    PATH = "path"  # guides/setup/install (the suffix removed)
    ROUTE = "route"  # guides/setup/install/ (an index, _index or README page: its folder, guides/setup/)
    DIR = "dir"  # guides/setup ("" at the top)
    NAME = "name"  # install.md
    STEM = "stem"  # install


INDEX_STEMS = frozenset({"index", "_index", "readme"})


def citation_fields(source: str) -> dict[str, str]:
    """The template fields of `source`, each percent-encoded for a URL path (slashes kept)."""
    p = PurePosixPath(source)
    path = str(p.with_suffix("")) if p.suffix and p.stem else source
    folder = "" if str(p.parent) == "." else str(p.parent)
    is_index = p.stem.lower() in INDEX_STEMS  # published as its folder's page
    route = (f"{folder}/" if folder else "") if is_index else f"{path}/"
    raw = {CitationField.SOURCE: source, CitationField.PATH: path, CitationField.ROUTE: route,
           CitationField.DIR: folder, CitationField.NAME: p.name, CitationField.STEM: p.stem}
    return {f.value: quote(v, safe="/") for f, v in raw.items()}


def citation_template_problem(template: str) -> str:
    """What is wrong with a citation URL template ("" when nothing is): an unknown field, no field at all (every
    page would cite one URL), or a result that is not an absolute URI."""
    known = {f.value for f in CitationField}
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        return f"citation base {template!r}: {exc} (write a literal brace as {{{{ or }}}})"
    unknown = sorted({n for n in names if n not in known})
    if unknown:
        return (f"citation base {template!r}: unknown field(s) {', '.join('{' + n + '}' for n in unknown)}; "
                f"known: {', '.join('{' + f.value + '}' for f in CitationField)}")
    if not names:
        return (f"citation base {template!r} names no field, so every page would cite one URL: add {{path}}, "
                "{route} or {source} (e.g. https://docs.example.com/{path})")
    sample = render_citation(template, "guides/install.md")
    if not is_absolute_uri(sample):
        return (f"citation base {template!r} does not give an absolute URI ({sample!r}); start it with a scheme, "
                "e.g. https://docs.example.com/{path}")
    return ""


def check_citation_template(template: str) -> None:
    """Raise ConfigError when `citation_template_problem` finds one."""
    problem = citation_template_problem(template)
    if problem:
        raise ConfigError(problem)


def render_citation(template: str, source: str) -> str:
    """The citation URI of `source` under `template`.

    >>> render_citation("https://docs.example.com/{route}", "guides/install.md")
    'https://docs.example.com/guides/install/'
    >>> render_citation("https://docs.example.com/{source}", "library/os path.html")
    'https://docs.example.com/library/os%20path.html'
    """
    return template.format_map(citation_fields(source))


def split_labels(labels: str | Sequence[str]) -> tuple[str, ...]:
    """Labels from "a, b" or ["a", "b"]: stripped, empty ones dropped, sorted, unique."""
    items = labels.split(",") if isinstance(labels, str) else labels
    return tuple(sorted({x.strip() for x in items if x.strip()}))


@dataclass(frozen=True)
class ProvenanceDefaults:
    """What an ingest gives a document that says nothing itself: access labels and a citation URI template."""

    access_labels: tuple[str, ...] = ()
    citation_base: str = ""

    def __post_init__(self) -> None:
        if self.citation_base:
            check_citation_template(self.citation_base)

    @classmethod
    def of(cls, labels: str | Sequence[str] = (), citation_base: str = "") -> ProvenanceDefaults:
        """ProvenanceDefaults.of("staff, engineering", "https://docs.example.com/{path}")."""
        return cls(split_labels(labels), citation_base.strip())

    def __bool__(self) -> bool:
        return bool(self.access_labels or self.citation_base)

    def apply(self, provenance: Provenance, source: str) -> Provenance:
        """`provenance` with the defaults filled in where it has no labels or no citation URI."""
        fields: dict[str, Any] = {}
        if self.access_labels and not provenance.access_labels:
            fields["access_labels"] = self.access_labels
        if self.citation_base and not provenance.citation_uri:
            fields["citation_uri"] = render_citation(self.citation_base, source)
        return merge(provenance, fields) if fields else provenance


def with_overlay(provenance: Provenance, source: str, overlay: Overlay | None,
                 defaults: ProvenanceDefaults | None) -> Provenance:
    """A document's provenance with the overlay's fields for `source` on top and the defaults underneath."""
    if overlay is not None:
        fields = overlay.fields_for(source)
        if fields:
            provenance = merge(provenance, fields)
    return defaults.apply(provenance, source) if defaults else provenance


@dataclass(frozen=True)
class SourceSelection:
    """Which files of a folder an ingest reads: a file is read when its path under the folder matches an
    `include` glob (or none are given) and no `exclude` glob. Exclusion wins.

    >>> SourceSelection.of(include=["**/*.md"], exclude=["drafts/**"]).admits("guide/a.md")
    True
    >>> SourceSelection.of(include=["**/*.md"], exclude=["drafts/**"]).admits("drafts/a.md")
    False
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(cls, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> SourceSelection:
        return cls(tuple(p for p in include if p.strip()), tuple(p for p in exclude if p.strip()))

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude)

    def admits(self, path: str) -> bool:
        if any(_compiled(p).fullmatch(path) for p in self.exclude):
            return False
        return not self.include or any(_compiled(p).fullmatch(path) for p in self.include)


@functools.lru_cache(maxsize=256)
def _compiled(glob: str) -> re.Pattern[str]:
    return glob_regex(glob)


class IngestSettings(Protocol):
    """The `[ingest]` configuration keys these rules read (comma-separated strings)."""

    @property
    def default_labels(self) -> str: ...
    @property
    def citation_base(self) -> str: ...
    @property
    def include(self) -> str: ...
    @property
    def exclude(self) -> str: ...


@dataclass(frozen=True)
class IngestRules:
    """The defaults and the file selection of one ingest: the caller's values where given, else the
    configuration's `[ingest]` keys."""

    defaults: ProvenanceDefaults = ProvenanceDefaults()
    selection: SourceSelection = SourceSelection()

    @classmethod
    def resolve(cls, settings: IngestSettings | None, *, default_labels: str | Sequence[str] | None = None,
                citation_base: str | None = None, include: Sequence[str] | None = None,
                exclude: Sequence[str] | None = None) -> IngestRules:
        """IngestRules.resolve(config.ingest, default_labels=["staff"]): a value given replaces the configured
        one (an empty list or string turns it off); None keeps the configuration's."""
        def configured(name: str) -> str:
            return str(getattr(settings, name, "") or "")

        labels = configured("default_labels") if default_labels is None else default_labels
        base = configured("citation_base") if citation_base is None else citation_base
        inc = _globs(configured("include")) if include is None else tuple(include)
        exc = _globs(configured("exclude")) if exclude is None else tuple(exclude)
        return cls(ProvenanceDefaults.of(labels, base), SourceSelection.of(inc, exc))


def _globs(text: str) -> tuple[str, ...]:
    return tuple(g.strip() for g in text.split(",") if g.strip())
