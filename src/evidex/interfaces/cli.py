"""The `evidex` command line: a thin layer over `Engine`. Domain errors become one-line messages and
exit codes here, in one place."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from evidex.config import Config, load_config
from evidex.engine import Engine, configured_embedder
from evidex.errors import BackendUnavailable, ConfigError, EvidexError, IngestError, StoreError
from evidex.types import Candidate, RetrievalMode

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="evidex: evidence-aware retrieval for engineering knowledge bases.")
dead_letters_app = typer.Typer(invoke_without_command=True, help="Documents that failed to load, with reasons.")
app.add_typer(dead_letters_app, name="dead-letters")

out = Console()
err = Console(stderr=True)

EXIT_CODES: dict[type[EvidexError], int] = {ConfigError: 3, IngestError: 4, StoreError: 5, BackendUnavailable: 6}

T = TypeVar("T")

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="evidex.toml (default: ./evidex.toml)",
                                                envvar="EVIDEX_CONFIG")]
IndexOpt = Annotated[Path | None, typer.Option("--index", help="index directory (overrides index.path)")]


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


def open_engine(config: Path | None, index: Path | None) -> Engine:
    return run(lambda: Engine.open(build_config(config, index)))


@app.command("ingest")
def ingest_cmd(
    paths: Annotated[list[Path], typer.Argument(help="directories or files (markdown, text, HTML, JSONL)")],
    metadata: Annotated[Path | None, typer.Option("--metadata", help="provenance overlay (JSONL by source)")] = None,
    label: Annotated[str, typer.Option(help="a label for this batch")] = "",
    config: ConfigOpt = None, index: IndexOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Ingest documents as one batch (unchanged documents are skipped)."""
    with open_engine(config, index) as engine, progress_bar(sys.stderr.isatty() and not json_out) as bar:
        report = run(lambda: engine.ingest(paths, metadata=metadata, label=label, progress=bar))
    if json_out:
        out.print_json(data=report.to_dict())
        return
    out.print(f"batch [bold]{report.batch_id or '(none: nothing changed)'}[/]: {report.documents} documents, "
              f"{report.added_chunks} chunks added ({report.embedded} embedded, {report.cached} from cache), "
              f"{report.replaced_documents} replaced, {report.unchanged_documents} unchanged, "
              f"{report.empty_documents} empty, "
              f"{len(report.dead_letters)} dead letters, {report.seconds:.1f} s")
    for letter in report.dead_letters:
        out.print(f"  [yellow]dead letter[/] {escape(letter.location or letter.source)}: {escape(letter.reason)}",
                  highlight=False)


def _candidate_dict(c: Candidate) -> dict[str, Any]:
    ch = c.chunk
    p = ch.provenance
    return {
        "record_id": ch.record_id, "score": round(c.score, 6), "source": ch.source, "title": ch.title,
        "heading": ch.heading, "citation_anchor": ch.citation_anchor, "citation_uri": p.citation_uri,
        "evidence_family": p.evidence_family, "dense_score": c.dense_score, "sparse_score": c.sparse_score,
        "span": [ch.span_start, ch.span_end], "source_version": p.source_version,
        "published_at": p.published_at.isoformat() if p.published_at else None,
        "expires_at": p.expires_at.isoformat() if p.expires_at else None,
        "access_labels": list(p.access_labels), "batch_id": ch.batch_id, "text": ch.text,
    }


@app.command("search")
def search_cmd(
    query: Annotated[str, typer.Argument(help="the question")],
    k: Annotated[int, typer.Option("--k", "-k", min=1, max=200)] = 10,
    mode: Annotated[str, typer.Option(help="bm25 | dense | hybrid")] = "hybrid",
    config: ConfigOpt = None, index: IndexOpt = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Ranked chunks with source, anchor and provenance (plain retrieval; `evidex ask` runs the decision)."""
    try:
        retrieval_mode = RetrievalMode.from_str(mode)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--mode") from None
    with open_engine(config, index) as engine:
        hits = run(lambda: engine.search(query, k=k, mode=retrieval_mode))
        if json_out:
            out.print_json(data={"query": query, "mode": retrieval_mode.value, "k": k,
                                 "snapshot_id": engine.store.snapshot_id(), "config_hash": engine.config.hash(),
                                 "results": [_candidate_dict(c) for c in hits]})
            return
    for rank, c in enumerate(hits, start=1):
        ch = c.chunk
        anchor = f"#{ch.citation_anchor}" if ch.citation_anchor else ""
        out.print(f"[bold]{rank:>2}.[/] {c.score:.3f}  [cyan]{escape(ch.source + anchor)}[/]  {escape(ch.title)}"
                  f"{' — ' + escape(ch.heading) if ch.heading else ''}", highlight=False)
        family = ch.provenance.evidence_family or "-"
        out.print(f"     family={family} version={ch.provenance.source_version or '-'} id={ch.record_id}",
                  style="dim", highlight=False)
        snippet = " ".join(ch.text.split())[:200]
        out.print(f"     {snippet}", highlight=False, markup=False)


@app.command("show")
def show_cmd(record_id: str, config: ConfigOpt = None, index: IndexOpt = None) -> None:
    """One record with its provenance and text."""
    with open_engine(config, index) as engine:
        chunk = run(lambda: engine.show(record_id))
    if chunk is None:
        err.print(f"[bold red]error:[/] no live record {record_id!r}")
        raise typer.Exit(1)
    data = _candidate_dict(Candidate(chunk=chunk, score=0.0))
    data.pop("score")
    out.print_json(data=data)


@app.command("stats")
def stats_cmd(config: ConfigOpt = None, index: IndexOpt = None) -> None:
    """Documents, chunks, batches, dead letters and families in the index."""
    with open_engine(config, index) as engine:
        out.print_json(data=run(engine.stats))


@app.command("batches")
def batches_cmd(config: ConfigOpt = None, index: IndexOpt = None) -> None:
    """Every ingest batch with its status."""
    with open_engine(config, index) as engine:
        batches = run(engine.batches)
    table = Table("status", "added", "replaced", "unchanged", "dead letters", "finished", "label")
    table.add_column("batch", no_wrap=True, min_width=24)
    for b in batches:
        table.add_row(b.status, str(b.added), str(b.replaced), str(b.unchanged), str(b.dead_letters),
                      b.finished_at.isoformat() if b.finished_at else "-", b.label, b.batch_id)
    out.print(table)


@app.command("rollback")
def rollback_cmd(
    batch_id: Annotated[str | None, typer.Argument(help="batch to undo (default: the last one)")] = None,
    config: ConfigOpt = None, index: IndexOpt = None,
) -> None:
    """Undo the last batch (or a named one) atomically, restoring what it replaced."""
    with open_engine(config, index) as engine:
        info = run(lambda: engine.rollback(batch_id))
    out.print(f"rolled back batch [bold]{info.batch_id}[/] ({info.added} chunks removed, "
              f"{info.replaced} documents restored)")


@dead_letters_app.callback()
def dead_letters_cmd(ctx: typer.Context, config: ConfigOpt = None, index: IndexOpt = None) -> None:
    """List documents that failed to load, with the reason."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = (config, index)
        return
    with open_engine(config, index) as engine:
        letters = run(engine.dead_letters)
    if not letters:
        out.print("no dead letters")
        return
    table = Table("source", "where", "reason", "attempts", "batch")
    for d in letters:
        table.add_row(d.source, d.location, d.reason, str(d.attempts), d.batch_id)
    out.print(table)


@dead_letters_app.command("retry")
def dead_letters_retry_cmd(
    ctx: typer.Context,
    metadata: Annotated[Path | None, typer.Option("--metadata")] = None,
) -> None:
    """Load every dead letter again; those that now load land in a new batch."""
    config, index = ctx.obj or (None, None)
    with open_engine(config, index) as engine:
        report = run(lambda: engine.retry_dead_letters(metadata=metadata))
    fixed = report.documents
    out.print(f"retried: {fixed} now loaded (batch {report.batch_id or '-'}), "
              f"{len(report.dead_letters)} still failing")
    for letter in report.dead_letters:
        out.print(f"  [yellow]dead letter[/] {escape(letter.location or letter.source)}: {escape(letter.reason)}",
                  highlight=False)


@app.command("setup")
def setup_cmd(config: ConfigOpt = None) -> None:
    """Build the default embedding model (ONNX int8, from the packaged weights; no download)."""
    cfg = run(lambda: load_config(config))
    embedder = run(lambda: configured_embedder(cfg))
    out.print(f"embedder ready: {embedder.fingerprint} (dim {embedder.dim})")


def main() -> None:  # pragma: no cover
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    app()


@app.command("eval")
def eval_cmd(
    corpus: Annotated[list[Path], typer.Option("--corpus", help="corpus file or directory (repeatable)")],
    questions: Annotated[Path | None, typer.Option("--questions", help="questions.jsonl")] = None,
    queries: Annotated[Path | None, typer.Option("--queries", help="BEIR queries.jsonl")] = None,
    qrels: Annotated[Path | None, typer.Option("--qrels", help="BEIR qrels.tsv")] = None,
    metadata: Annotated[Path | None, typer.Option("--metadata", help="provenance overlay")] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=100)] = 10,
    plan: Annotated[str, typer.Option("--plan", help="auto | oracle")] = "auto",
    pipelines: Annotated[str, typer.Option("--pipelines", help="comma-separated")] = "bm25,dense,hybrid",
    limit: Annotated[int, typer.Option("--limit", help="first N questions only (0 = all)")] = 0,
    json_path: Annotated[Path | None, typer.Option("--json", help="write the report here")] = None,
    config: ConfigOpt = None,
) -> None:
    """Evaluate pipelines side by side: family recall, all-found, nDCG@10, recall@100, MRR, latency."""
    from evidex.evaluation.datasets import load_beir, load_questions
    from evidex.evaluation.runner import evaluate, open_eval_engine

    if (questions is None) == (queries is None) or (queries is not None and qrels is None):
        raise typer.BadParameter("give --questions, or --queries with --qrels")
    cfg = run(lambda: load_config(config))
    qs = run(lambda: load_questions(questions) if questions else load_beir(queries, qrels))  # type: ignore[arg-type]
    if limit:
        qs = qs[:limit]
    names = [p.strip() for p in pipelines.split(",") if p.strip()]
    with progress_bar(sys.stderr.isatty()) as bar:
        engine = run(lambda: open_eval_engine(cfg, corpus, metadata, progress=bar,
                                              log=lambda m: err.print(m, highlight=False)))
        try:
            report = run(lambda: evaluate(engine, qs, names, k=k, plan=plan, progress=bar))
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        finally:
            engine.close()
    table = Table("pipeline", f"family recall@{k}", f"all found@{k}", "nDCG@10", "recall@100", "MRR",
                  "p50 ms", "p95 ms", title=f"{len(qs)} questions, plan={plan}")
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    for name, row in report["pipelines"].items():
        table.add_row(name, fmt(row["family_recall"]), fmt(row["all_found"]), fmt(row["ndcg@10"]),
                      fmt(row["recall@100"]), fmt(row["mrr"]), f"{row['latency_ms']['p50']:.1f}",
                      f"{row['latency_ms']['p95']:.1f}")
    out.print(table)
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        out.print(f"wrote {json_path}")
