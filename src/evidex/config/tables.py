"""The arrays of tables of `evidex.toml`: `[[families]]` (a source pattern names a chunk's evidence family) and
`[[shapes]]` (a question shape as data: detectors and the families it requires).

Each array item is checked whole and an error names the item (`shapes[2].keywords`). A detector must be an
array of non-empty strings: a single string read letter by letter would make every question match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from evidex.config.schema import SCHEMA, Key
from evidex.errors import ConfigError
from evidex.lexical import tokens


def _doc(help: str) -> Any:
    """Field metadata for the reference (these keys are checked by the parsers below)."""
    return {SCHEMA: Key(help)}


@dataclass(frozen=True)
class FamilyRule:
    """`[[families]]`: chunks whose source matches `pattern` belong to family `name` (set at ingest)."""

    pattern: str = field(metadata=_doc("Python regex, searched in the chunk's source path."))
    name: str = field(metadata=_doc("The evidence family."))


@dataclass(frozen=True)
class ShapeFamily:
    """`[[shapes.families]]`: a family a shape requires, and how to find it when the pool lacks it."""

    name: str = field(metadata=_doc("The family's name in plans and results."))
    rescue_query: str = field(metadata=_doc("The one sparse search run when no candidate is of the family."))
    label: str | None = field(default=None, metadata=_doc("A member's stored `evidence_family`."))
    source_regex: str | None = field(default=None, metadata=_doc("Or: a Python regex over the member's source."))


@dataclass(frozen=True)
class ShapeRule:
    """`[[shapes]]`: a question shape as data. Detectors (keywords, patterns, similarity to example questions)
    -> required families."""

    name: str = field(metadata=_doc("The shape's name, recorded in the plan."))
    families: tuple[ShapeFamily, ...] = field(metadata=_doc("The required families (`[[shapes.families]]`)."))
    keywords: tuple[str, ...] = field(default=(), metadata=_doc("Phrases; a question holding `min_keywords` of "
                                                                 "them matches."))
    min_keywords: int = field(default=2, metadata=_doc("Keywords a question must hold (>= 1, at most as many as "
                                                       "given)."))
    patterns: tuple[str, ...] = field(default=(), metadata=_doc("Python regexes; a question one matches has the "
                                                                 "shape."))
    examples: tuple[str, ...] = field(default=(), metadata=_doc("Questions of this shape: a question this close "
                                                                 "to one of them matches."))
    min_similarity: float = field(default=0.7, metadata=_doc("Cosine between the question's and an example's "
                                                             "embedding, in (0, 1]."))


_SHAPE_KEYS = {"name", "keywords", "min_keywords", "patterns", "examples", "min_similarity", "families"}


def family_rules(raw: Any, where: str) -> tuple[FamilyRule, ...]:
    """The `[[families]]` array of the file `where`."""
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: 'families' must be an array of tables [[families]]")
    rules = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) != {"pattern", "name"}:
            raise ConfigError(f"{where}: families[{i}] needs exactly the keys 'pattern' and 'name'")
        try:
            re.compile(item["pattern"])
        except re.error as exc:
            raise ConfigError(f"{where}: families[{i}].pattern is not a valid regex: {exc}") from None
        rules.append(FamilyRule(pattern=str(item["pattern"]), name=str(item["name"])))
    return tuple(rules)


def shape_rules(raw: Any, where: str) -> tuple[ShapeRule, ...]:
    """The `[[shapes]]` array of the file `where`."""
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: 'shapes' must be an array of tables [[shapes]]")
    return tuple(_shape(item, where, f"shapes[{i}]") for i, item in enumerate(raw))


def _shape(item: Any, where: str, key: str) -> ShapeRule:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: {key} must be a table")
    unknown = set(item) - _SHAPE_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)} in {key}")
    if not isinstance(item.get("name"), str) or not isinstance(item.get("families"), list):
        raise ConfigError(f"{where}: {key} needs 'name' and a 'families' array")
    keywords, patterns, examples = (_strings(item, name, f"{where}: {key}")
                                    for name in ("keywords", "patterns", "examples"))
    _check_detectors(keywords, patterns, where, key)
    min_keywords = _min_keywords(item.get("min_keywords", 2), len(keywords), where, key)
    if not (keywords or patterns or examples):
        raise ConfigError(f"{where}: {key} needs a detector: 'keywords', 'patterns' or 'examples'")
    min_similarity = item.get("min_similarity", 0.7)
    if not isinstance(min_similarity, (int, float)) or not 0 < min_similarity <= 1:
        raise ConfigError(f"{where}: {key}.min_similarity must be a number in (0, 1], not {min_similarity!r}")
    families = tuple(_shape_family(f, where, f"{key}.families[{j}]") for j, f in enumerate(item["families"]))
    return ShapeRule(name=item["name"], families=families, keywords=keywords, min_keywords=min_keywords,
                     patterns=patterns, examples=examples, min_similarity=float(min_similarity))


def _check_detectors(keywords: tuple[str, ...], patterns: tuple[str, ...], where: str, key: str) -> None:
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise ConfigError(f"{where}: {key}.patterns: invalid regex {p!r}: {exc}") from None
    for keyword in keywords:
        if not tokens(keyword):
            raise ConfigError(f"{where}: {key}.keywords: {keyword!r} has no searchable word (only stopwords "
                              "or punctuation), so every question would hold it")


def _min_keywords(value: Any, given: int, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: {key}.min_keywords must be a whole number >= 1, not {value!r}")
    if given and value > given:
        raise ConfigError(f"{where}: {key}.min_keywords is {value} but only {given} keyword(s) "
                          "are given: the shape could never match by its keywords")
    return value


def _shape_family(f: Any, where: str, key: str) -> ShapeFamily:
    if not isinstance(f, dict) or not isinstance(f.get("name"), str) or \
            not isinstance(f.get("rescue_query"), str) or not (f.get("label") or f.get("source_regex")):
        raise ConfigError(f"{where}: {key} needs 'name', 'rescue_query' and 'label' or 'source_regex'")
    if f.get("source_regex") is not None:
        try:
            re.compile(f["source_regex"])
        except (re.error, TypeError) as exc:
            raise ConfigError(f"{where}: {key}.source_regex is not a valid regex: {exc}") from None
    return ShapeFamily(f["name"], f["rescue_query"], f.get("label"), f.get("source_regex"))


def _strings(item: dict[str, Any], name: str, where: str) -> tuple[str, ...]:
    """`item[name]` as an array of non-empty strings (absent: none)."""
    value = item.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}.{name} must be an array of non-empty strings, not {value!r}")
    return tuple(value)
