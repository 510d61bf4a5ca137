"""Tables for the commands that report a record of facts (`stats`, `show`, `export`, `import`): a person reads a
table, a program passes `--json` and reads the same data as JSON, exactly as before.

    emit({"documents": 36, "families": {"tls": 13}}, json_out=False, title="index")

prints a two-column table of the scalar fields, then one table per nested mapping (name and value), so counts
by family or label line up instead of scrolling past as JSON.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rich.markup import escape
from rich.table import Table

from evidex.interfaces.cli_runtime import out
from evidex.timestamps import format_time

# Fields printed after the tables, as they are: a chunk's text is prose, not a cell.
_PROSE_FIELDS = ("text",)
# Control characters other than newline and tab: an indexed page must not move the cursor or recolour the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def emit(data: Mapping[str, Any], *, json_out: bool, title: str) -> None:
    """`data` as JSON (`--json`) or as tables; nothing is left out of either."""
    if json_out:
        out.print_json(data=dict(data))
        return
    out.print(f"[bold]{escape(_printable(title))}[/]", highlight=False, soft_wrap=True)  # a path is never cut
    scalars = Table(show_header=False)
    scalars.add_column("field", style="bold")
    scalars.add_column("value", overflow="fold")
    nested: list[tuple[str, Mapping[str, Any]]] = []
    for key, value in data.items():
        if key in _PROSE_FIELDS:
            continue
        if isinstance(value, Mapping) and value:
            nested.append((key, value))
        else:
            scalars.add_row(escape(key), escape(_printable(_cell(value))))
    out.print(scalars)
    for key, mapping in nested:
        table = Table(escape(key.replace("_", " ")), "value")
        for name, value in mapping.items():
            table.add_row(escape(_printable(str(name))), escape(_printable(_cell(value))))
        out.print(table)
    for key in _PROSE_FIELDS:
        if isinstance(data.get(key), str):
            out.print(f"\n[bold]{key}[/]")
            out.print(_printable(data[key]), markup=False, highlight=False, soft_wrap=True)


def emit_records(records: Sequence[Any]) -> None:
    """Records (frozen dataclasses such as `BatchInfo`) as a JSON list for `--json`: times in evidex's one format
    (UTC, trailing Z), modes by their value."""
    out.print_json(data=[_jsonable(dataclasses.asdict(r)) for r in records])


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v) for v in value) or "-"
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True) if value else "-"
    return str(value)


def _printable(text: str) -> str:
    """`text` with control characters shown as escapes (`\\x1b`), never sent to the terminal."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), text)
