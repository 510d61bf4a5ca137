"""The configuration schema: every key declares its type, default, allowed values and meaning once, on its field.

A section is a frozen dataclass whose fields are made with `setting(...)`. From those declarations alone come
the three things a configuration key needs: reading a TOML or environment value into the field's type
(`build_section`), the checks with errors that name the key, and the Markdown reference
(`evidex.config.reference`). Rules that tie two keys of a section together are `Check`s listed beside the
section. For example:

    @dataclass(frozen=True)
    class PoolConfig:
        size: int = setting(60, "Candidates kept for reranking.", ge=1)
        fusion: FusionMode = setting(FusionMode.WEIGHTED, "How the two rankings are merged.")

`build_section("pool", PoolConfig, {"size": "0"})` raises `ConfigError("config key 'pool.size' must be >= 1")`;
`{"fusion": "max"}` raises one that lists `rrf, weighted`.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from evidex.errors import ConfigError

T = TypeVar("T")
SCHEMA = "evidex"  # the field metadata entry that holds a key's `Key`


@dataclass(frozen=True)
class Key:
    """What one configuration key accepts and what it is for.

    `ge` / `gt` / `le` bound a number; `pattern` is a regex the whole string must match, `pattern_text` says it
    in words; `items` makes a string a comma-separated list of that Enum's values; `zero` says what 0 means.
    `in_hash=False` keeps a key out of `Config.hash()`: it cannot change a result (paths, caches, threads).
    """

    help: str
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    pattern: str | None = None
    pattern_text: str = ""
    items: type[enum.Enum] | None = None
    zero: str = ""
    in_hash: bool = True

    def bounds(self) -> str:
        """The allowed range in words ("between 0 and 1", ">= 1"), or ""."""
        if self.ge is not None and self.le is not None:
            return f"between {_number(self.ge)} and {_number(self.le)}"
        if self.ge is not None:
            return f">= {_number(self.ge)}"
        if self.gt is not None:
            return f"> {_number(self.gt)}"
        return f"<= {_number(self.le)}" if self.le is not None else ""


@dataclass(frozen=True)
class Check:
    """A rule over two keys of one section: `holds(section)` must be true, else `error(section)` is raised."""

    rule: str  # the rule in words, for the reference
    holds: Callable[[Any], bool]
    error: Callable[[Any], str]


def setting(default: T, help: str, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
            pattern: str | None = None, pattern_text: str = "", items: type[enum.Enum] | None = None,
            zero: str = "", in_hash: bool = True) -> T:
    """A dataclass field with its schema entry (see `Key`)."""
    key = Key(help, ge=ge, gt=gt, le=le, pattern=pattern, pattern_text=pattern_text, items=items, zero=zero,
              in_hash=in_hash)
    return dataclasses.field(default=default, metadata={SCHEMA: key})


def key_of(f: dataclasses.Field[Any]) -> Key:
    """The schema entry of a section's field."""
    key = f.metadata.get(SCHEMA)
    if not isinstance(key, Key):
        raise TypeError(f"field {f.name!r} is not declared with setting()")
    return key


def field_types(cls: type[Any]) -> dict[str, type[Any]]:
    """Each field's declared type, resolved (the sections use postponed annotations)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def build_section(name: str, cls: type[T], values: Mapping[str, Any], checks: tuple[Check, ...] = ()) -> T:
    """The section `cls` from raw values (TOML values, environment strings or a section's own values): unknown
    keys, ill-typed values and values outside their key's range are `ConfigError`s naming `name.key`."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    types = field_types(cls)
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(f"unknown config key '{name}.{key}'; valid keys: {', '.join(sorted(fields))}")
        kwargs[key] = coerce(f"{name}.{key}", value, types[key])
    section = cls(**kwargs)
    for f in fields.values():
        check_value(f"{name}.{f.name}", getattr(section, f.name), key_of(f))
    for check in checks:
        if not check.holds(section):
            raise ConfigError(check.error(section))
    return section


_TRUE, _FALSE = {"1", "true", "yes"}, {"0", "false", "no"}


def coerce(key: str, value: Any, expected: type[Any]) -> Any:
    """`value` as `expected` (bool, int, float, str or a mode Enum), accepting the strings the environment
    gives; anything else is a `ConfigError` naming `key`."""
    if isinstance(expected, type) and issubclass(expected, enum.Enum):
        if isinstance(value, str):
            try:
                return expected.from_str(value)  # type: ignore[attr-defined]
            except ValueError as exc:
                raise ConfigError(f"config key {key!r}: {exc}") from None
        expected = str  # named as the TOML type it is written in
    elif expected is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
    elif expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
    elif expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif expected is str and isinstance(value, str):
        return value
    raise ConfigError(f"config key {key!r}: expected {expected.__name__}, got {value!r}")


def check_value(key: str, value: Any, spec: Key) -> None:
    """Raise a `ConfigError` naming `key` when `value` is outside what `spec` allows."""
    if isinstance(value, (int, float)) and not _in_bounds(value, spec):
        note = f" ({spec.zero})" if spec.zero else ""
        raise ConfigError(f"config key {key!r} must be {spec.bounds()}{note}")
    if spec.pattern is not None and not re.match(spec.pattern, value):
        raise ConfigError(f"config key {key!r}: {value!r} is not {spec.pattern_text}")
    if spec.items is not None:
        list_of(key, value, spec.items)


def list_of(key: str, value: str, items: type[enum.Enum]) -> tuple[Any, ...]:
    """A comma-separated list of `items`' values, each once, at least one (case and spaces ignored)."""
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    if not names:
        raise ConfigError(f"config key {key!r} needs at least one of: {', '.join(m.value for m in items)}")
    chosen = tuple(coerce(key, name, items) for name in names)
    repeated = sorted({m.value for m in chosen if chosen.count(m) > 1})
    if repeated:
        raise ConfigError(f"config key {key!r} lists {', '.join(repeated)} more than once")
    return chosen


def _in_bounds(value: float, spec: Key) -> bool:
    return ((spec.ge is None or value >= spec.ge) and (spec.gt is None or value > spec.gt)
            and (spec.le is None or value <= spec.le))


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
