"""The commands that measure evidex: `eval` (pipelines side by side on a labelled question set) and `bench`
(throughput, latency, memory). `cli.py` adds them to the app."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from evidex.admission.gate import Principal
from evidex.config import load_config
from evidex.engine import ready_to_serve
from evidex.interfaces.cli_runtime import AtOpt, ConfigOpt, err, out, parse_retrieved_at, progress_bar, run
from evidex.interfaces.render import render_eval, render_misses
from evidex.types import EvalPlan

if TYPE_CHECKING:
    from evidex.evaluation.datasets import Question


def report_file(path: Path | None) -> Path | None:
    """Where `--json` writes a report, checked before a run that may take minutes: its folder is made if missing,
    and a path that cannot be written is a usage error now, not a traceback once the run is over."""
    if path is not None and (why := _unwritable(path)):
        raise typer.BadParameter(f"cannot write the report to {path}: {why}", param_hint="'--json'")
    return path


def _unwritable(path: Path) -> str | None:
    """Why a file cannot be written at `path` (its folder made first), or None."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        return f"{blocking} is a file, not a folder" if blocking else exc.strerror or str(exc)
    if path.is_dir():
        return "a directory"
    return None if os.access(path if path.exists() else path.parent, os.W_OK) else "permission denied"


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
    principal_labels: Annotated[str | None, typer.Option("--principal-labels",
                                help="evaluate through the gate as a principal with these labels")] = None,
    retrieved_at: AtOpt = None,
    backend: Annotated[str | None, typer.Option("--backend", help="sqlite (default) | milvus")] = None,
    misses: Annotated[str | None, typer.Option("--misses", help="list the families this pipeline missed, "
                                               "question by question, with where each ranked")] = None,
    plots: Annotated[Path | None, typer.Option("--plots", file_okay=False, help="write a reliability diagram "
                                               "(PNG) per pipeline here (needs evidex[plots])")] = None,
    config: ConfigOpt = None,
) -> None:
    """Evaluate pipelines side by side: family recall, all-found, nDCG@10, recall@100, MRR, latency."""
    from evidex.evaluation.runner import evaluate, open_eval_engine

    if (questions is None) == (queries is None) or (queries is not None and qrels is None):
        raise typer.BadParameter("give --questions, or --queries with --qrels")
    try:
        chosen_plan = EvalPlan.from_str(plan)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--plan'") from None
    json_path = report_file(json_path)
    if plots is not None:
        from evidex.evaluation.plots import require_plots

        run(require_plots)  # before a run that may take minutes
    cfg = run(lambda: load_config(config))
    if backend is not None:
        cfg = run(lambda: cfg.replace(index={"backend": backend}))
    who, at = _principal(principal_labels, retrieved_at)
    qs = _eval_questions(questions, queries, qrels, limit)
    names = [p.strip() for p in pipelines.split(",") if p.strip()]
    if misses is not None and misses not in names:
        raise typer.BadParameter(f"{misses!r} is not among the pipelines run ({', '.join(names)})",
                                 param_hint="'--misses'")
    with progress_bar(sys.stderr.isatty()) as bar:
        engine = run(lambda: open_eval_engine(cfg, corpus, metadata, progress=bar,
                                              log=lambda m: err.print(m, highlight=False)))
        try:
            ready_to_serve(engine)  # latencies as the servers' settled processes see them
            report = run(lambda: evaluate(engine, qs, names, k=k, plan=chosen_plan, principal=who, retrieved_at=at,
                                          progress=bar))
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        finally:
            engine.close()
    _show_report(report, misses, json_path, plots)


def _eval_questions(questions: Path | None, queries: Path | None, qrels: Path | None, limit: int) -> list[Question]:
    """The questions of an evaluation: a questions.jsonl, or BEIR queries with their qrels; the first `limit`."""
    from evidex.evaluation.datasets import load_beir, load_questions

    qs = run(lambda: load_questions(questions) if questions else load_beir(queries, qrels))  # type: ignore[arg-type]
    return qs[:limit] if limit else qs


def _show_report(report: dict[str, Any], misses: str | None, json_path: Path | None, plots: Path | None) -> None:
    """The evaluation's tables, the misses of one pipeline, and the JSON report and diagrams asked for."""
    render_eval(out, report)
    if misses is not None:
        render_misses(out, report, misses)
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        out.print(f"wrote {json_path}")
    if plots is not None:
        from evidex.evaluation.plots import write_reliability_diagrams

        for path in run(lambda: write_reliability_diagrams(report, plots)):
            out.print(f"wrote {path}")


def calibrate_cmd(
    out_path: Annotated[Path, typer.Option("--out", help="write the fitted model here (JSON)")],
    corpus: Annotated[list[Path] | None, typer.Option("--corpus", help="corpus file or directory (repeatable)")]
    = None,
    questions: Annotated[Path | None, typer.Option("--questions", help="labelled questions.jsonl")] = None,
    queries: Annotated[Path | None, typer.Option("--queries", help="BEIR queries.jsonl")] = None,
    qrels: Annotated[Path | None, typer.Option("--qrels", help="BEIR qrels.tsv")] = None,
    metadata: Annotated[Path | None, typer.Option("--metadata", help="provenance overlay")] = None,
    name: Annotated[str, typer.Option("--name", help="what these questions are called in the model file")]
    = "questions",
    rows: Annotated[list[Path] | None, typer.Option("--rows", help="labelled features saved by an earlier "
                                                    "--save-rows (repeatable): fit on several sets together")] = None,
    save_rows: Annotated[Path | None, typer.Option("--save-rows", help="also write these questions' labelled "
                                                   "features here")] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=100)] = 10,
    config: ConfigOpt = None,
) -> None:
    """Fit the confidence on labelled questions: the probability that the context holds every required family.
    Point `[signals] confidence_model` at the file written to use it."""
    from evidex.evaluation.datasets import load_beir, load_questions
    from evidex.evaluation.runner import open_eval_engine
    from evidex.signals.calibration import collect, fit_model, read_rows, write_model, write_rows

    if (questions is not None and queries is not None) or (queries is not None and qrels is None):
        raise typer.BadParameter("give --questions, or --queries with --qrels")
    if (questions or queries) and not corpus:
        raise typer.BadParameter("the questions are asked of --corpus: give it", param_hint="'--corpus'")
    if not (questions or queries or rows):
        raise typer.BadParameter("give --questions (or --queries with --qrels) and --corpus, or --rows")
    report_file(out_path)  # checked before a run that may take minutes
    fitted = [row for path in rows or () for row in run(lambda p=path: read_rows(p))]  # type: ignore[misc]
    if questions or queries:
        cfg = run(lambda: load_config(config))
        qs = run(lambda: load_questions(questions) if questions else load_beir(queries, qrels))  # type: ignore[arg-type]
        with progress_bar(sys.stderr.isatty()) as bar:
            engine = run(lambda: open_eval_engine(cfg, corpus or [], metadata, progress=bar,
                                                  log=lambda m: err.print(m, highlight=False)))
            try:
                mine = collect(engine.run, qs, name=name, k=k,
                               progress=lambda i, n: bar(name, i, n))
            finally:
                engine.close()
        if save_rows is not None:
            write_rows(save_rows, mine)
        fitted += mine
    from evidex import __version__

    try:
        model = fit_model(fitted, version=__version__)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    write_model(out_path, model)
    counts = ", ".join(f"{n}: {v['complete']} of {v['questions']} complete" for n, v in model["fitted_on"].items())
    out.print(f"fitted on {len(fitted)} answers ({counts}); wrote {out_path}", highlight=False)


def _principal(labels: str | None, retrieved_at: str | None) -> tuple[Principal | None, datetime | None]:
    """Who an evaluation through the gate asks as (`--principal-labels`), and at which instant (now unless
    `--retrieved-at`); (None, None) evaluates without the gate."""
    if labels is None:
        return None, None
    who = Principal.of("eval", [x.strip() for x in labels.split(",") if x.strip()])
    return who, parse_retrieved_at(retrieved_at) or datetime.now(UTC).replace(microsecond=0)


def bench_cmd(
    docs: Annotated[Path | None, typer.Option("--docs", exists=True, file_okay=False, help="a folder of documents "
                                              "for the embedding and query-latency parts (skipped without it)")]
    = None,
    questions: Annotated[Path | None, typer.Option("--questions", exists=True, dir_okay=False,
                                                   help="questions.jsonl to ask of --docs (default: the pages' "
                                                   "titles)")] = None,
    chunks: Annotated[str, typer.Option("--chunks", help="size of the generated corpus; several, comma-separated "
                                        "(10000,100000,1000000), measure each in its own processes")] = "100000",
    queries: Annotated[int, typer.Option("--queries")] = 200,
    json_path: Annotated[Path | None, typer.Option("--json", help="write the report here")] = None,
    plots: Annotated[Path | None, typer.Option("--plots", file_okay=False, help="write a PNG of cost vs size "
                                               "here (the plots extra)")] = None,
    config: ConfigOpt = None,
) -> None:
    """Ingest throughput vs the raw embedder, query latency per mode, peak memory, a bm25s baseline."""
    from evidex.evaluation.bench import run_bench
    from evidex.evaluation.bench_report import format_bench

    if questions is not None and docs is None:
        raise typer.BadParameter("the questions are asked of --docs: give both", param_hint="'--questions'")
    try:
        sizes = sorted({int(n) for n in chunks.split(",") if n.strip()})
    except ValueError:
        raise typer.BadParameter(f"{chunks!r} is not a number or a comma-separated list",
                                 param_hint="'--chunks'") from None
    if not sizes or sizes[0] < 1:
        raise typer.BadParameter("give at least one size >= 1", param_hint="'--chunks'")
    json_path = report_file(json_path)
    cfg = run(lambda: load_config(config))
    report = run(lambda: run_bench(cfg, docs=docs, questions=questions, synthetic_chunks=sizes[0], queries=queries,
                                   log=lambda m: err.print(m, highlight=False, markup=False), scale_sizes=sizes,
                                   config_path=config))
    out.print(format_bench(report), markup=False, highlight=False)
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    if plots is not None:
        from evidex.evaluation.bench_plots import write_plots

        out.print(f"wrote {run(lambda: write_plots(report['sizes'], plots))}")
