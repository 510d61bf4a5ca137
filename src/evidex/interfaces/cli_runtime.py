"""What every `evidex` command runs in: the two consoles, evidex errors turned into a one-line message and an
exit code (`run`, the one place that does it), the options several commands share, and the config and engine
they open."""

from __future__ import annotations

import itertools
import shlex
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from typer.core import TyperGroup, TyperOption

from evidex.config import Config, load_config
from evidex.engine import Engine
from evidex.errors import BackendUnavailable, ConfigError, EvidexError, IngestError, StoreError
from evidex.ingest.provenance import parse_time
from evidex.stores.sqlite import INDEX_FILE
from evidex.types import IndexBackend

out = Console()
err = Console(stderr=True)

EXIT_CODES: dict[type[EvidexError], int] = {ConfigError: 3, IngestError: 4, StoreError: 5, BackendUnavailable: 6}

T = TypeVar("T")

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="evidex.toml (default: ./evidex.toml)",
                                                envvar="EVIDEX_CONFIG")]
IndexOpt = Annotated[Path | None, typer.Option("--index", help="index directory (overrides index.path)")]
AtOpt = Annotated[str | None, typer.Option("--retrieved-at", help="pinned instant, ISO 8601 (default: now)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON for programs instead of the table")]

HELP_OPTIONS = ["-h", "--help"]
_FLAG_VALUES = {"true", "false", "yes", "no", "on", "off"}


class EvidexGroup(TyperGroup):
    """The `evidex` app: boolean options show as flags in every command's help (`--json`, where typer prints
    `--json <bool>`), and a flag given a value (`--sync true`) is a usage error instead of an argument (a path
    named "true")."""

    _shown_as_flags = False

    def get_params(self, ctx: Any) -> Any:
        params = super().get_params(ctx)
        if not self._shown_as_flags:  # once, over the whole tree: every command's help then reads the same
            self._shown_as_flags = True
            for option in _flag_options(self, ctx):
                option.metavar = ""
        return params

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            _reject_flag_values(command, ctx, rest)
        return name, command, rest


def _flag_options(command: Any, ctx: Any) -> Iterator[TyperOption]:
    """Every boolean flag of `command` and the commands under it, their help options included."""
    for param in [*command.params, command.get_help_option(ctx)]:
        if isinstance(param, TyperOption) and param.is_flag:
            yield param
    for sub in getattr(command, "commands", {}).values():
        yield from _flag_options(sub, ctx)


def _reject_flag_values(command: Any, ctx: Any, args: Sequence[str]) -> None:
    flags = {name for option in _flag_options(command, ctx) for name in option.opts}
    for flag, value in itertools.pairwise(args):
        if flag == "--":
            return
        if flag in flags and value.lower() in _FLAG_VALUES:
            raise typer.BadParameter(f"{flag} is a flag and takes no value: write {flag} to turn it on, leave it out "
                                     f"to keep it off ({value!r} would have been read as an argument)",
                                     ctx=ctx, param_hint=flag)


def build_config(config: Path | None, index: Path | None) -> Config:
    cfg = load_config(config)
    if index is not None:
        cfg = cfg.replace(index={"path": str(index.resolve())})
    return cfg


def run(action: Callable[[], T]) -> T:
    """Run an action, turning evidex errors into a message and an exit code."""
    try:
        return action()
    except EvidexError as exc:
        code = next((c for cls, c in EXIT_CODES.items() if isinstance(exc, cls)), 1)
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
        raise typer.Exit(code) from None
    except sqlite3.OperationalError as exc:  # locked, disk full, read-only: the file itself is fine
        err.print(f"[bold red]error:[/] a database could not be used ({escape(str(exc))}): another process may "
                  "hold it (an ingest), or its disk is full or read-only", highlight=False, markup=True,
                  soft_wrap=True)
        raise typer.Exit(1) from None
    except sqlite3.DatabaseError as exc:  # a damaged index file, found wherever it is first read
        err.print(f"[bold red]error:[/] the index database is damaged or not an evidex index ({escape(str(exc))}): "
                  "restore it from a backup or an `evidex export`, or ingest into a new index",
                  highlight=False, markup=True, soft_wrap=True)
        raise typer.Exit(1) from None


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[str, int, int], None]]:
    if not enabled:
        yield lambda phase, done, total: None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False) as bar:
        tasks: dict[str, Any] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total or None)
            bar.update(tasks[phase], completed=done, total=total or None)

        yield update


def open_engine(config: Path | None, index: Path | None, *, create: bool = False) -> Engine:
    """The engine on the configured index. Only `create` (ingest, import) may start a new one: a mistyped
    --index or config would otherwise answer every question from an empty index."""
    cfg = run(lambda: build_config(config, index))
    if not create:
        require_index(cfg)
    return run(lambda: Engine.open(cfg))


def require_index(cfg: Config) -> None:
    path = cfg.index_dir / INDEX_FILE
    if cfg.index_dir.is_file():
        err.print(f"[bold red]error:[/] {escape(str(cfg.index_dir))} is a file, not an index folder: point --index / "
                  "the config at the folder ingest wrote", highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    missing: str | None = None  # what is missing ("": the index file)
    if cfg.index.backend is IndexBackend.SQLITE and not path.is_file():
        missing = ""
    elif cfg.index.backend is IndexBackend.MILVUS:  # the Lite file, or the collection (a moved folder: another name)
        from evidex.stores.milvus import missing_index

        missing = run(lambda: missing_index(cfg, token=cfg.milvus_token))
    if missing is not None:
        where = f"{cfg.index_dir} ({missing})" if missing else str(cfg.index_dir)
        err.print(f"[bold red]error:[/] no index at {escape(where)}: ingest documents first "
                  "(evidex ingest DIR) or point --index / the config at an existing index",
                  highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    if cfg.index.backend is IndexBackend.SQLITE and path.stat().st_size == 0:  # SQLite would read it as a new index
        err.print(f"[bold red]error:[/] {escape(str(path))} is empty (0 bytes): nothing was ever committed to it. "
                  "Ingest documents to start the index there, or point --index at another", highlight=False,
                  soft_wrap=True)
        raise typer.Exit(2)


def parse_retrieved_at(value: str | None) -> datetime | None:
    """The instant pinned by --retrieved-at (None: now); a malformed one is a usage error."""
    if value is None:
        return None
    try:
        return parse_time(value, "--retrieved-at", "command line")
    except IngestError as exc:
        raise typer.BadParameter(exc.reason, param_hint="--retrieved-at") from None


def plural(n: int, noun: str) -> str:
    """"1 chunk", "2 chunks"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def invoked_as() -> str:
    """How to run this evidex again from any folder: `evidex` when that name on PATH is this program, else the
    program's full path (a virtualenv's, say, that is not activated)."""
    program = Path(sys.argv[0])
    if program.name != "evidex" or not program.is_file():
        return "evidex"
    on_path = shutil.which("evidex")
    if on_path is not None and Path(on_path).resolve() == program.resolve():
        return "evidex"
    return shlex.quote(str(program.absolute()))


def demo_hint(index: Path) -> str:
    """The demo's closing suggestion, with absolute paths: it works from any folder, inside a checkout or not."""
    config = Path(str(resources.files("evidex").joinpath("sample", "evidex.toml")))
    where = shlex.quote(str(index.resolve()))
    return (f"Try: {invoked_as()} query \"how do I rotate the transit key?\" --index {where} "
            f"-c {shlex.quote(str(config))} --labels engineering-read")
