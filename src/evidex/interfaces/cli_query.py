"""The commands that ask an index: `search` and `show` (plain retrieval, ungated), `query` (the decision),
`replay` and `verify`, the reference agent loop `ask`, and the `demo`. `cli.py` adds them to the app."""

from __future__ import annotations

import json
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer

from evidex.admission.gate import Principal
from evidex.agent import ask
from evidex.config import load_config
from evidex.engine import Engine
from evidex.evidence.plan import plan_from_dict
from evidex.interfaces import tool
from evidex.interfaces.cli_runtime import (
    AtOpt,
    ConfigOpt,
    IndexOpt,
    JsonOpt,
    demo_hint,
    err,
    open_engine,
    out,
    parse_retrieved_at,
    plural,
    progress_bar,
    run,
)
from evidex.interfaces.cli_tables import emit
from evidex.interfaces.render import printable, printable_tree, render_result, safe_markup
from evidex.result import decision_json, first_difference
from evidex.timestamps import format_time
from evidex.types import Candidate, RetrievalMode


def _candidate_dict(c: Candidate) -> dict[str, Any]:
    ch = c.chunk
    p = ch.provenance
    return {
        "record_id": ch.record_id, "score": round(c.score, 6), "source": ch.source, "title": ch.title,
        "heading": ch.heading, "citation_anchor": ch.citation_anchor, "citation_uri": p.citation_uri,
        "evidence_family": p.evidence_family, "dense_score": c.dense_score, "sparse_score": c.sparse_score,
        "span": [ch.span_start, ch.span_end], "source_version": p.source_version,
        "published_at": format_time(p.published_at), "expires_at": format_time(p.expires_at),
        "access_labels": list(p.access_labels), "owner": p.owner, "superseded_by": p.superseded_by,
        "authority_tier": p.authority_tier, "batch_id": ch.batch_id, "text": ch.text,
    }


def search_cmd(
    query: Annotated[str, typer.Argument(help="the question")],
    k: Annotated[int, typer.Option("--k", "-k", min=1, max=200)] = 10,
    mode: Annotated[str, typer.Option(help="bm25 | dense | hybrid")] = "hybrid",
    config: ConfigOpt = None, index: IndexOpt = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Ranked chunks with source, anchor and provenance: plain retrieval for operators, with no admission gate
    (`evidex query` runs the decision)."""
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
    if not hits:
        out.print("no results: nothing in the index matches the query", highlight=False)
    for rank, c in enumerate(hits, start=1):
        ch = c.chunk
        anchor = f"#{ch.citation_anchor}" if ch.citation_anchor else ""
        out.print(f"[bold]{rank:>2}.[/] {c.score:.3f}  [cyan]{safe_markup(ch.source + anchor)}[/]  "
                  f"{safe_markup(ch.title)}{' — ' + safe_markup(ch.heading) if ch.heading else ''}", highlight=False)
        family = ch.provenance.evidence_family or "-"
        out.print(f"     family={safe_markup(family)} version={safe_markup(ch.provenance.source_version or '-')} "
                  f"id={ch.record_id}", style="dim", highlight=False)
        snippet = " ".join(printable(ch.text).split())[:200]
        out.print(f"     {snippet}", highlight=False, markup=False)


def show_cmd(record_id: str, config: ConfigOpt = None, index: IndexOpt = None, json_out: JsonOpt = False) -> None:
    """One record with its provenance and text."""
    with open_engine(config, index) as engine:
        chunk = run(lambda: engine.show(record_id))
    if chunk is None:
        err.print(f"[bold red]error:[/] no live record {record_id!r}")
        raise typer.Exit(1)
    data = _candidate_dict(Candidate(chunk=chunk, score=0.0))
    data.pop("score")
    emit(data if json_out else printable_tree(data), json_out=json_out, title=f"record {record_id}")


def _check_question(query: str, aspect_focus: str | None = None, k: int = tool.DEFAULT_K) -> None:
    """The tool's own checks, as HTTP and MCP apply them (an empty query had answered with ten arbitrary
    sources here, and with 400 there)."""
    try:
        tool.parse_arguments({"query": query, "aspect_focus": aspect_focus, "k": k})
    except tool.ToolInputError as exc:
        raise typer.BadParameter(str(exc)) from None


def _principal(name: str | None, labels: str | None, engine: Engine) -> Principal:
    if name is None and labels is None:
        return engine.default_principal()
    label_list = [x.strip() for x in (labels or "").split(",") if x.strip()]
    return Principal.of(name or engine.config.gate.default_principal, label_list)


def _unreadable_hint(engine: Engine, who: Principal) -> str | None:
    """Why nothing was admitted, when the principal could not have been admitted anything: the gate fails closed,
    and the searches the question steers see only what the principal may read, so nothing was even rejected."""
    if not who.labels:
        return (f"hint: principal {safe_markup(who.name)!r} holds no access labels, so no page can be admitted: pass "
                "--labels LABEL[,LABEL] (or set \\[gate] default_labels in evidex.toml)")
    held = run(engine.stats).get("access_labels")
    if held is None or set(who.labels) & set(held):
        return None
    unlabelled = f"; {held['-']} chunks carry no label at all and are never admitted" if held.get("-") else ""
    # The labels themselves are not listed: a query's output is no place for what else the index guards.
    return (f"hint: no indexed page carries any of the labels {safe_markup(', '.join(who.labels))}{unlabelled} (an "
            "operator sees every label in `evidex stats`; give access_labels in front matter, a --metadata "
            "overlay, or `evidex ingest --default-labels`)")


PrincipalOpt = Annotated[str | None, typer.Option("--principal", help="who asks (default: gate.default_principal)")]
LabelsOpt = Annotated[str | None, typer.Option("--labels", help="comma-separated access labels of the principal")]


def query_cmd(
    query: Annotated[str, typer.Argument(help="the question")],
    aspect_focus: Annotated[str | None, typer.Option("--aspect-focus", help="steer the plan to this aspect")] = None,
    k: Annotated[int, typer.Option("--k", "-k", min=1, max=50)] = 10,
    principal: PrincipalOpt = None, labels: LabelsOpt = None, retrieved_at: AtOpt = None,
    config: ConfigOpt = None, index: IndexOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the result JSON")] = False,
) -> None:
    """The decision for a question: evidence with citations, families, rejections, signals, recommendation."""
    _check_question(query, aspect_focus, k)
    at = parse_retrieved_at(retrieved_at)
    with open_engine(config, index) as engine:
        who = _principal(principal, labels, engine)
        result = run(lambda: engine.search_with_reasoning(query, aspect_focus, k=k, principal=who,
                                                          retrieved_at=at))
        hint = None if result["evidence"] else _unreadable_hint(engine, who)
    if json_out:
        sys.stdout.write(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        render_result(out, result)
    if hint:
        err.print(hint, highlight=False, soft_wrap=True)


def _other_snapshot(result: dict[str, Any]) -> dict[str, Any]:
    """`result` without its snapshot id, in both places it is kept (to compare decisions of two snapshots)."""
    out = {**result, "index": {k: v for k, v in result["index"].items() if k != "snapshot_id"}}
    if isinstance(result.get("retrieval_metadata"), dict):
        out["retrieval_metadata"] = {k: v for k, v in result["retrieval_metadata"].items() if k != "index_snapshot"}
    return out


_SNAPSHOT = re.compile(r"g(\d+)-(.+)")  # `Store.snapshot_id`: the generation and the last committed batch


def _was_snapshot(engine: Engine, snapshot_id: str, current: str) -> bool:
    """Whether this index ever had `snapshot_id`: a generation no later than now's, and its batch one of this
    index's batches (or none yet)."""
    saved, now = _SNAPSHOT.fullmatch(snapshot_id), _SNAPSHOT.fullmatch(current)
    if saved is None or now is None or int(saved.group(1)) > int(now.group(1)):
        return False
    return saved.group(2) == "empty" or saved.group(2) in {b.batch_id for b in engine.batches()}


def replay_cmd(result_file: Annotated[Path, typer.Argument(help="a result saved with `query --json`")],
               config: ConfigOpt = None, index: IndexOpt = None) -> None:
    """Re-run a saved result's request; report identical, or the first difference."""
    try:
        saved = json.loads(result_file.read_text(encoding="utf-8"))
        req = saved["request"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        err.print(f"[bold red]error:[/] {safe_markup(str(result_file))} is not a saved evidex result "
                  f"({safe_markup(str(exc))})")
        raise typer.Exit(4) from None
    with open_engine(config, index) as engine:
        who = Principal.of(req["principal"]["name"], req["principal"]["labels"]) if req["principal"] else None
        plan = plan_from_dict(req["plan"]) if req.get("plan") else None
        fresh = run(lambda: engine.search_with_reasoning(req["query"], req["aspect_focus"], k=req["k"],
                                                         principal=who,
                                                         retrieved_at=parse_retrieved_at(req["retrieved_at"]),
                                                         plan=plan))
        snapshot, cfg_hash = fresh["index"]["snapshot_id"], fresh["index"]["config_hash"]
        moved = saved["index"]["snapshot_id"] != snapshot
        known = not moved or _was_snapshot(engine, str(saved["index"]["snapshot_id"]), snapshot)
    if moved or saved["index"]["config_hash"] != cfg_hash:
        out.print(f"[yellow]note:[/] saved on snapshot {saved['index']['snapshot_id']} / config "
                  f"{saved['index']['config_hash']}; now {snapshot} / {cfg_hash}")
    if decision_json(saved) == decision_json(fresh):
        out.print("identical: the same request on this snapshot gives the same decision, byte for byte")
        return
    if not known:  # a forged or foreign snapshot id: nothing says the decision was ever made on this index
        out.print(f"[bold red]different[/]: snapshot {safe_markup(str(saved['index']['snapshot_id']))} was never "
                  "a snapshot of this index")
        raise typer.Exit(1)
    if moved and decision_json(_other_snapshot(saved)) == decision_json(_other_snapshot(fresh)):
        # A rollback, or a batch that changed nothing (re-ingested files), makes a new snapshot, not a new decision.
        # (A new document usually moves scores a little: BM25's word statistics cover every record.)
        out.print("identical but for the snapshot id: the index was written to since, but nothing this decision "
                  "reads changed")
        return
    without_cost = [{k: v for k, v in r.items() if k != "cost"} for r in (saved, fresh)]
    out.print(f"[bold red]different[/] at {safe_markup(first_difference(without_cost[0], without_cost[1]) or '?')}")
    raise typer.Exit(1)


def verify_cmd(record_id: str,
               claim: Annotated[str, typer.Option("--claim", help="what the person checked against the source")],
               by: Annotated[str, typer.Option("--by", help="who checked it")],
               config: ConfigOpt = None, index: IndexOpt = None) -> None:
    """Record a human verification of a claim against a record's current source version."""
    with open_engine(config, index) as engine:
        v = run(lambda: engine.verify(record_id, claim=claim, by=by))
    out.print(f"recorded: {v.record_id} verified by {safe_markup(v.verified_by)} at {format_time(v.verified_at)} "
              f"(source version {safe_markup(v.source_version)})")


DEMO_QUESTIONS = [
    ("A composite question (its aspects planned automatically)",
     "A new `checkout` service needs its Postgres password from Vaultline. How should the pod authenticate "
     "without a long-lived token, how does the secret get into the container and get renewed, and which role "
     "grant lets the team read only the secret path it needs?"),
    ("An expired page superseded by a fresh one",
     "What is the rollback procedure for a bad release that is already serving all production traffic?"),
    ("A question whose only evidence is restricted",
     "What is the break-glass procedure for the Vaultline root token?"),
]
DEMO_INSTANT = "2026-11-30T00:00:00Z"


def demo_cmd(index: Annotated[Path, typer.Option("--index", help="where the demo index lives")] = Path(".evidex/demo"),
             ) -> None:
    """Ingest the bundled handbook and answer three questions as an engineering-read principal."""
    sample = resources.files("evidex").joinpath("sample")
    with resources.as_file(sample) as sample_dir:
        cfg = run(lambda: load_config(sample_dir / "evidex.toml")).replace(index={"path": str(index.resolve())})
        engine = run(lambda: Engine.open(cfg))
        with engine, progress_bar(sys.stderr.isatty()) as bar:
            report = run(lambda: engine.ingest([sample_dir / "handbook"], label="demo", progress=bar))
            out.print(f"ingested the Northwind handbook into {index}: {report.documents} pages "
                      f"({report.unchanged_documents} unchanged), {report.added_chunks} chunks added")
            at = parse_retrieved_at(DEMO_INSTANT)
            for title, question in DEMO_QUESTIONS:
                out.rule(f"[bold]{title}")
                result = run(lambda q=question: engine.search_with_reasoning(q, retrieved_at=at))  # type: ignore[misc]
                render_result(out, result, show_text=False)
    out.print("\n" + demo_hint(index), highlight=False, soft_wrap=True, markup=False)


def ask_cmd(
    question: Annotated[str, typer.Argument(help="the question")],
    max_rounds: Annotated[int, typer.Option("--max-rounds", min=1, max=6)] = 3,
    principal: PrincipalOpt = None, labels: LabelsOpt = None, retrieved_at: AtOpt = None,
    config: ConfigOpt = None, index: IndexOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the transcript as JSON")] = False,
) -> None:
    """The reference agent loop: call the tool, follow its recommendation (re-query with an aspect focus,
    bounded), print the final evidence with citations and a log of each decision."""
    _check_question(question)
    at = parse_retrieved_at(retrieved_at)
    with open_engine(config, index) as engine:
        who = _principal(principal, labels, engine)
        transcript = run(lambda: ask(lambda q, f: engine.search_with_reasoning(q, f, principal=who, retrieved_at=at),
                                     question, max_rounds=max_rounds))
        hint = None if transcript.evidence else _unreadable_hint(engine, who)
    if hint:
        err.print(hint, highlight=False, soft_wrap=True)
    if json_out:
        sys.stdout.write(json.dumps(transcript.to_dict(), indent=2, sort_keys=True) + "\n")
        return
    for r in transcript.rounds:
        focus = f" (aspect_focus: {safe_markup(r['aspect_focus'])})" if r["aspect_focus"] else ""
        unheld = f"not in the index: {safe_markup(', '.join(r['aspects_not_in_index']))}; " \
            if r.get("aspects_not_in_index") else ""
        out.print(f"[bold]round {r['round']}[/]{focus}: {r['action']} — {safe_markup(r['reason'])}; "
                  f"missing aspects: {safe_markup(', '.join(r['aspects_missing']) or 'none')}; {unheld}"
                  f"+{len(r['new_evidence'])} evidence")
        if r.get("note"):
            out.print(f"  [green]{safe_markup(r['note'])}[/]")
    out.print(f"final: [bold]{transcript.final_action}[/] — {safe_markup(transcript.final_reason)}"
              f"{'; ask ' + safe_markup(transcript.owner) if transcript.owner else ''}")
    if not transcript.evidence:
        return
    # Evidence the loop did not accept is still shown, and said to be so: it is what an agent would cite.
    verdict = "" if transcript.final_action == "proceed" else f" (not enough to answer: {transcript.final_action})"
    out.print(f"evidence, {plural(len(transcript.evidence), 'chunk')}{verdict}:")
    for number, c in enumerate(transcript.evidence.values(), 1):
        # Unbroken: a citation URL cut by a line break can be neither clicked nor copied.
        out.print(f"  {number:>2}. {safe_markup(c['citation'] or c['source'])}  [dim](round {c['round']})[/]",
                  highlight=False, soft_wrap=True)
