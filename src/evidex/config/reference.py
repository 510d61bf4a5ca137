"""The configuration reference in Markdown, generated from the schema the loader checks against, so the two
cannot disagree. `python -m evidex.config --reference > docs/configuration.md` writes it;
`tests/test_config_reference.py` fails when the checked-in file is out of date.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any

from evidex.config.schema import Key, field_types, key_of
from evidex.config.sections import CHECKS
from evidex.config.settings import ENV_PREFIX, SECTIONS, TABLE_ARRAYS

REGENERATE = "python -m evidex.config --reference > docs/configuration.md"

_INTRO = f"""# Configuration reference

<!-- Generated from the schema in src/evidex/config/ by `{REGENERATE}`; do not edit by hand. -->

evidex reads `evidex.toml` from the working directory, or the file given with `--config` (or `EVIDEX_CONFIG`);
relative paths in it resolve against the file's folder. Every key of the sections below can also be set in the
environment as `{ENV_PREFIX}<SECTION>_<KEY>` (`EVIDEX_RETRIEVAL_FUSION=rrf`), which wins over the file. An
unknown section or key, a value of the wrong type or outside the allowed range is an error that names the key:
nothing falls back to a default silently. Mode names ignore case.

Every result records the configuration's hash (`config_hash`): the keys marked "no" under *hashed* (paths,
caches, thread counts) cannot change a result and are left out of it. See `src/evidex/sample/evidex.toml` for
a complete example.
"""


def reference() -> str:
    """The whole reference, one Markdown document."""
    parts = [_INTRO]
    for name, cls in SECTIONS.items():
        parts.append(_section(name, cls))
    for name, cls in TABLE_ARRAYS.items():
        parts.append(_table_array(name, cls))
    return "\n".join(parts)


def _section(name: str, cls: type[Any]) -> str:
    types = field_types(cls)
    lines = [f"## `[{name}]`", "", _first_line(cls), "",
             "| key | type | default | allowed | hashed | what it does |", "|---|---|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        key = key_of(f)
        tp = types[f.name]
        lines.append(f"| `{f.name}` | {_type_name(tp, key)} | {_default(f)} | {_allowed(tp, key)} "
                     f"| {'yes' if key.in_hash else 'no'} | {_escape(key.help)} |")
    lines += ["", f"Environment: `{ENV_PREFIX}{name.upper()}_<KEY>`, e.g. "
                  f"`{ENV_PREFIX}{name.upper()}_{dataclasses.fields(cls)[0].name.upper()}`."]
    checks = CHECKS.get(cls, ())
    if checks:
        lines += ["", "Rules across keys:", *[f"- {check.rule}" for check in checks]]
    return "\n".join(lines) + "\n"


def _table_array(name: str, cls: type[Any]) -> str:
    types = field_types(cls)
    lines = [f"## `[[{name}]]`", "", _first_line(cls), "", "| key | type | default | what it is |", "|---|---|---|---|"]
    nested: list[str] = []
    for f in dataclasses.fields(cls):
        lines.append(f"| `{f.name}` | {_toml_type(types[f.name])} | {_default(f)} | {_escape(key_of(f).help)} |")
        inner = _dataclass_in(types[f.name])
        if inner is not None:
            nested.append(_table_array(f"{name}.{f.name}", inner))
    lines += ["", "Not overridable from the environment."]
    return "\n".join(lines) + "\n" + "".join("\n" + n for n in nested)


def _first_line(cls: type[Any]) -> str:
    """The class docstring without its leading "`[name]`: " (the heading says it)."""
    doc = " ".join((cls.__doc__ or "").split())
    if doc.startswith("`[") and "`: " in doc:
        doc = doc.split("`: ", 1)[1]
    return doc[:1].upper() + doc[1:]


def _type_name(tp: Any, key: Key) -> str:
    if key.items is not None:
        return "list of names"
    return _toml_type(tp)


def _toml_type(tp: Any) -> str:
    """The TOML type a field is written as: a mode Enum is a name, a tuple an array, `X | None` is X."""
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "name"
    if tp in _TOML_NAMES:
        return _TOML_NAMES[tp]
    args = [a for a in typing.get_args(tp) if a is not type(None) and a is not Ellipsis]
    if typing.get_origin(tp) is tuple:
        return "array of tables" if dataclasses.is_dataclass(args[0]) else f"array of {_toml_type(args[0])}s"
    return _toml_type(args[0]) if args else str(tp)


_TOML_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _dataclass_in(tp: Any) -> type[Any] | None:
    for arg in getattr(tp, "__args__", ()):
        if dataclasses.is_dataclass(arg) and isinstance(arg, type):
            return arg
    return None


def _default(f: dataclasses.Field[Any]) -> str:
    if f.default is dataclasses.MISSING:
        return "required"
    value = f.default
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or value == ():
        return "none"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def _allowed(tp: Any, key: Key) -> str:
    if key.items is not None:
        return "comma-separated, each once: " + ", ".join(f"`{m.value}`" for m in key.items)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return ", ".join(f"`{m.value}`" for m in tp)
    parts = [text for text in (key.bounds(), key.pattern_text, key.zero) if text]
    return "; ".join(parts) if parts else "any"


def _escape(text: str) -> str:
    return text.replace("|", "\\|")
