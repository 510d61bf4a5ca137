"""The commands that keep an index: `ingest`, `stats`, `batches`, `rollback`, `dead-letters [retry]`, and
`export` / `import` of a portable copy. `cli.py` adds them to the app."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from evidex.admission.gate import AccessRule, CitationRule, GatePolicy
from evidex.engine import Engine
from evidex.interfaces.cli_runtime import (
    ConfigOpt,
    IndexOpt,
    JsonOpt,
    err,
    open_engine,
    out,
    plural,
    progress_bar,
    run,
)
from evidex.interfaces.cli_tables import emit, emit_records
from evidex.interfaces.render import printable_tree, safe_markup
from evidex.types import IngestReport


def ingest_cmd(
    paths: Annotated[list[Path], typer.Argument(help="directories or files (markdown, text, HTML, JSONL)")],
    metadata: Annotated[Path | None, typer.Option("--metadata", help="provenance overlay (JSONL by source)")] = None,
    label: Annotated[str, typer.Option(help="a label for this batch")] = "",
    sync: Annotated[bool, typer.Option("--sync", help="PATHS are the whole corpus: retire indexed documents "
                                       "no longer in them (deleted files); rollback restores them")] = False,
    default_labels: Annotated[str | None, typer.Option("--default-labels", metavar="L1,L2", help="access labels "
                              "for documents with none (default: [ingest] default_labels)")] = None,
    citation_base: Annotated[str | None, typer.Option("--citation-base", metavar="TEMPLATE", help="citation URI "
                             "for documents with none, e.g. 'https://docs.example.com/{path}' (fields: {source} "
                             "{path} {route} {dir} {name} {stem}; default: [ingest] citation_base)")] = None,
    include: Annotated[list[str] | None, typer.Option("--include", metavar="GLOB", help="read only files whose "
                       "path under the folder matches (repeatable; '**' spans folders)")] = None,
    exclude: Annotated[list[str] | None, typer.Option("--exclude", metavar="GLOB", help="skip files whose path "
                       "under the folder matches (repeatable; wins over --include)")] = None,
    config: ConfigOpt = None, index: IndexOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Ingest documents as one batch (unchanged documents are skipped)."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:  # a typo, not a document that failed to load: nothing is written
        err.print(f"[bold red]error:[/] no such file or directory: {safe_markup(', '.join(missing))}",
                  highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    with open_engine(config, index, create=True) as engine, progress_bar(sys.stderr.isatty() and not json_out) as bar:
        report = run(lambda: engine.ingest(paths, metadata=metadata, label=label, progress=bar, sync=sync,
                                           default_labels=default_labels, citation_base=citation_base,
                                           include=include or None, exclude=exclude or None))
        gated = _gated(engine)
        live = set(engine.store.ledger.document_hashes()) if report.dead_letters else set()
    if json_out:
        out.print_json(data=report.to_dict())
        return
    out.print(f"batch [bold]{report.batch_id or '(none: nothing changed)'}[/]: {report.documents} documents, "
              f"{report.added_chunks} chunks added ({report.embedded} embedded, {report.cached} from cache), "
              f"{report.replaced_documents} replaced, {report.unchanged_documents} unchanged, "
              f"{report.empty_documents} empty, "
              + (f"{len(report.retired_documents)} retired (gone), " if sync else "")
              + f"{len(report.dead_letters)} dead letters, {report.seconds:.1f} s")
    _print_problems(report, gated, live)
    if report.retired_documents:
        out.print(f"  retired: {safe_markup(_first_five(report.retired_documents))} ('evidex rollback' restores "
                  "them)", highlight=False)
    if report.sync_skipped:
        out.print(f"  [yellow]nothing retired[/]: {safe_markup(report.sync_skipped)}", highlight=False)
    if report.skipped_paths:
        reasons = Counter(reason for _, reason in report.skipped_paths)
        out.print(f"  {len(report.skipped_paths)} path(s) not read: "
                  + "; ".join(f"{n} {safe_markup(reason)}" for reason, n in reasons.most_common())
                  + f" ({safe_markup(_first_five([p for p, _ in report.skipped_paths]))})", highlight=False)


def _gated(engine: Engine) -> bool:
    """Whether the gate checks access labels or citations (what a page needs to be admitted at all)."""
    policy = GatePolicy.from_config(engine.config.gate.rules, engine.config.gate.visibility,
                                    engine.config.gate.citation_schemes)
    return bool({AccessRule.name, CitationRule.name} & set(policy.rules))


def _print_problems(report: IngestReport, gated: bool, live: set[str]) -> None:
    """Dead letters (saying when the document's previous version still answers), and written documents the
    gate will never admit (a page without access labels is otherwise silently never returned)."""
    for letter in report.dead_letters:
        kept = " (its previous version stays live)" if letter.source in live else ""
        out.print(f"  [yellow]dead letter[/] {safe_markup(letter.location or letter.source)}: "
                  f"{safe_markup(letter.reason)}{kept}", highlight=False)
    if report.resolved_dead_letters:
        names = report.resolved_dead_letters
        out.print(f"  {len(names)} dead letter(s) resolved (loaded now, or the file or JSONL line is gone): "
                  f"{safe_markup(_first_five(names))}", highlight=False)
    for warning in report.warnings:
        out.print(f"  [yellow]warning[/] {safe_markup(warning.source)}: {safe_markup(warning.reason)}", highlight=False)
    if report.unmatched_overlay_sources:
        names = report.unmatched_overlay_sources
        out.print(f"  [yellow]{len(names)} metadata overlay source(s) match no document of this ingest[/] (not "
                  "applied: a source is the document's path under the folder ingested, or its JSONL 'source'): "
                  f"{safe_markup(_first_five(names))}", highlight=False)
    unadmittable = report.without_labels_or_citation
    if unadmittable and gated:
        out.print(f"  [yellow]{len(unadmittable)} document(s) the gate will never admit[/] (no access_labels or "
                  "no citation_uri; add them in front matter, a --metadata overlay (source_glob entries cover "
                  f"many), or --default-labels / --citation-base): "
                  f"{safe_markup(_first_five(unadmittable))}",
                  highlight=False)


def _first_five(names: Sequence[str]) -> str:
    """A list of names for one line: the first five, and "..." when there are more."""
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")


def stats_cmd(config: ConfigOpt = None, index: IndexOpt = None, json_out: JsonOpt = False) -> None:
    """Documents, chunks, batches, dead letters and families in the index."""
    with open_engine(config, index) as engine:
        stats = run(engine.stats)
    emit(stats if json_out else printable_tree(stats), json_out=json_out, title="index")


def batches_cmd(config: ConfigOpt = None, index: IndexOpt = None, json_out: JsonOpt = False) -> None:
    """Every ingest batch with its status."""
    with open_engine(config, index) as engine:
        batches = run(engine.batches)
    if json_out:
        emit_records(batches)
        return
    if not batches:
        out.print("no batches yet: `evidex ingest PATH` writes the first")
    for b in batches:  # two lines each: a table of nine columns is unreadable in 80 columns
        finished = b.finished_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if b.finished_at else "-"
        out.print(f"[bold]{b.batch_id}[/]  {b.status:<11}  {finished}  {safe_markup(b.label)}")
        out.print(f"  +{b.added} chunks · documents {b.replaced} replaced, {b.retired} retired, "
                  f"{b.unchanged} unchanged · {b.dead_letters} dead letters", highlight=False)


def rollback_cmd(
    batch_id: Annotated[str | None, typer.Argument(help="batch to undo (default: the last one)")] = None,
    config: ConfigOpt = None, index: IndexOpt = None,
) -> None:
    """Undo the last batch (or a named one) atomically, restoring what it replaced."""
    with open_engine(config, index) as engine:
        info = run(lambda: engine.rollback(batch_id))
        finished = list(engine.store.ledger.finished_rollbacks)
    for done in finished:
        out.print(f"finished the interrupted rollback of batch [bold]{done}[/]")
    counts = f"{info.added} chunks removed, {plural(info.replaced + info.retired, 'document')} restored"
    if info.batch_id in finished:
        out.print(f"no other batch was rolled back ({info.batch_id}: {counts}); run `evidex rollback` again "
                  "to undo the batch before it", highlight=False)
        return
    out.print(f"rolled back batch [bold]{info.batch_id}[/] ({counts})")


dead_letters_app = typer.Typer(invoke_without_command=True, help="Documents that failed to load, with reasons.")


@dead_letters_app.callback()
def dead_letters_cmd(ctx: typer.Context, config: ConfigOpt = None, index: IndexOpt = None,
                     json_out: JsonOpt = False) -> None:
    """List documents that failed to load, with the reason."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = (config, index)
        return
    with open_engine(config, index) as engine:
        letters = run(engine.dead_letters)
    if json_out:
        emit_records(letters)
        return
    if not letters:
        out.print("no dead letters")
        return
    table = Table("source", "where", "reason", "attempts", "batch")
    for d in letters:
        table.add_row(safe_markup(d.source), safe_markup(d.location), safe_markup(d.reason), str(d.attempts),
                      d.batch_id)
    out.print(table)


@dead_letters_app.command("retry")
def dead_letters_retry_cmd(
    ctx: typer.Context,
    metadata: Annotated[Path | None, typer.Option("--metadata")] = None,
    config: ConfigOpt = None, index: IndexOpt = None,
) -> None:
    """Load every dead letter again; those that now load land in a new batch."""
    given_config, given_index = ctx.obj or (None, None)  # `dead-letters --index X retry` works too
    with open_engine(config or given_config, index or given_index) as engine:
        report = run(lambda: engine.retry_dead_letters(metadata=metadata))
        gated = _gated(engine)
        live = set(engine.store.ledger.document_hashes()) if report.dead_letters else set()
    fixed = report.documents
    out.print(f"retried: {fixed} now loaded (batch {report.batch_id or '-'}), "
              f"{len(report.dead_letters)} still failing")
    _print_problems(report, gated, live)


def export_cmd(directory: Annotated[Path, typer.Argument(help="where to write the portable index")],
               config: ConfigOpt = None, index: IndexOpt = None, json_out: JsonOpt = False) -> None:
    """Write the index (chunks, vectors, provenance, batches, dead letters) to a portable directory."""
    from evidex.stores.transfer import export_index

    with open_engine(config, index) as engine:
        manifest = run(lambda: export_index(engine.store, directory))
    emit(manifest, json_out=json_out, title=f"exported to {directory}")


def import_cmd(directory: Annotated[Path, typer.Argument(help="a directory written by `evidex export`")],
               config: ConfigOpt = None, index: IndexOpt = None, json_out: JsonOpt = False) -> None:
    """Load an exported index into this configuration's (empty) store, without re-embedding."""
    from evidex.stores.transfer import import_index

    with open_engine(config, index, create=True) as engine:
        manifest = run(lambda: import_index(directory, engine.store))
    emit(manifest, json_out=json_out, title=f"imported from {directory}")
