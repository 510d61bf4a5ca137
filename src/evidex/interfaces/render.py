"""Render a result for a person in the terminal (the JSON is for machines: `--json`)."""

from __future__ import annotations

import re
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Column, Table

from evidex.signals.compute import planned

# Terminal control from a document: escape sequences (CSI `ESC[2J`, OSC `ESC]0;title BEL`), the other C0 and C1
# controls, and the bidirectional overrides that reorder what a line appears to say. Newlines and tabs stay.
_ESCAPE_SEQUENCE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_]?)"
                              r"|\x9b[0-?]*[ -/]*[@-~]?|\x9d[^\x07\x1b\x9c]*[\x07\x9c]?")
_CONTROLS = dict.fromkeys([*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F),
                           *range(0x2066, 0x206A)])


def printable(text: str) -> str:
    """`text` without terminal control: a title or a page's text can neither clear the screen, recolour what
    follows, retitle the window nor reverse a line. Layout (newlines, tabs) is kept.

    >>> printable("Deploy\x1b[2J \x1b[31mguide\x1b[0m\x1b]0;pwned\x07 \u202eevil")
    'Deploy guide evil'
    """
    return _ESCAPE_SEQUENCE.sub("", text).translate(_CONTROLS)


def safe_markup(text: str) -> str:
    """`text` to put inside rich markup: `printable`, and its brackets escaped (a title "[bold]" stays a title)."""
    return escape(printable(text))


def printable_tree(value: Any) -> Any:
    """`value` (JSON-like data: a result, a record) with `printable` applied to every string, keys included."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_tree(k): printable_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_tree(v) for v in value]
    return value


_ACTION_STYLE = {"proceed": "bold green", "re-query": "bold yellow", "stop": "bold red"}
_FAMILY_STYLE = {"covered": "green", "missing": "yellow", "found-but-rejected": "red"}


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_result(console: Console, result: dict[str, Any], *, show_text: bool = True) -> None:
    """A result for a person: the request, the decision, the signals, the evidence (with the best chunk's text)
    and what the gate rejected. Every string passes `printable` first: titles and text come from documents."""
    result = printable_tree(result)
    _render_decision(console, result)
    _render_evidence(console, result, show_text=show_text)
    _render_rejected(console, result.get("rejected"))
    latency = result["cost"]["latency_ms"]
    stages = " ".join(f"{k} {v:.1f}" for k, v in latency.items() if k != "total")
    console.print(f"[dim]latency {latency['total']:.1f} ms ({stages})[/]")


def _render_decision(console: Console, result: dict[str, Any]) -> None:
    req = result["request"]
    rec = result["decision"]["recommendation"]
    principal = req["principal"] or {"name": "-", "labels": []}
    head = (f"[bold]{escape(req['query'])}[/]\n"
            f"principal {escape(principal['name'])} {principal['labels']} · retrieved_at {req['retrieved_at']} · "
            f"snapshot {result['index']['snapshot_id']} · config {result['index']['config_hash']}")
    console.print(Panel(head, title="evidex", expand=True))
    style = _ACTION_STYLE.get(rec["action"], "bold")
    line = f"[{style}]{rec['action'].upper()}[/] — {escape(rec['reason'])}"
    if rec["focus"]:  # a stop names the families a person must unblock; a re-query, what to search again
        line += f"  {'blocked' if rec['action'] == 'stop' else 'focus'}: {escape(', '.join(rec['focus']))}"
    if rec["owner"]:
        line += f"  owner of the next step: {escape(rec['owner'])}"
    console.print(f"decision: {line}")
    sig = result["signals"]
    cov = sig["coverage"]
    # A plan without aspects or families covers nothing to measure: its ratio of 1.00 beside an off-topic
    # re-query misled.
    ratio = f"{cov['ratio']:.2f}" if planned(cov, result["families"]) else "n/a (nothing planned)"
    console.print(f"confidence {sig['confidence']:.2f} · coverage {ratio} · "
                  f"{sig['source_diversity']['sources']} sources · plan: {result['plan']['source']}"
                  f"{' (' + result['plan']['shape'] + ')' if result['plan']['shape'] else ''}")
    verdicts = cov.get("aspects") if result["plan"]["source"] == "auto" else None
    if verdicts:
        # An automatic plan's obligations are the question's own aspects: shown as the coverage judged them (the
        # verdict the decision read), with what decided each.
        console.print("aspects: " + "  ".join(
            f"[{_FAMILY_STYLE.get(v['status'], 'white')}]{escape(_short(v['aspect']))}: {v['status']}"
            f"{' (' + v['by'].replace('-', ' ') + ')' if v['status'] == 'covered' and v['by'] != 'terms' else ''}[/]"
            for v in verdicts))
    elif result["families"]:
        fams = "  ".join(f"[{_FAMILY_STYLE.get(f['status'], 'white')}]{escape(_short(f['name']))}: {f['status']}"
                         f"{' (' + ', '.join(f['reasons']) + ')' if f['reasons'] else ''}[/]"
                         for f in result["families"])
        console.print(f"{'aspects' if result['plan']['source'] == 'auto' else 'families'}: {fams}")


def _render_evidence(console: Console, result: dict[str, Any], *, show_text: bool) -> None:
    if result["evidence"]:
        # The citation is what an answer quotes: folded onto a second line when narrow, never cut short.
        table = Table(Column("source#anchor", overflow="fold", ratio=1), Column("family", no_wrap=True), "status",
                      "score", show_lines=False, expand=True)
        for group in result["evidence"]:
            for c in group["chunks"]:
                table.add_row(escape(f"{group['source']}#{c['citation_anchor']}"),
                              escape(c["evidence_family"] or "-"), c["status"], f"{c['score']:.3f}")
        console.print(table)
    else:
        console.print("evidence: none admitted")
    # A page a newer one replaces still passes the gate until it expires: say so beside the evidence.
    superseded = {g["source"]: c["provenance"]["superseded_by"] for g in result["evidence"] for c in g["chunks"]
                  if c["provenance"].get("superseded_by")}
    for source, successor in superseded.items():
        console.print(f"[yellow]{escape(source)} is superseded by {escape(successor)}[/]")
    if show_text and result["evidence"]:
        # The first source holds the best chunk, but its chunks are in document order: pick by score.
        best = max(result["evidence"][0]["chunks"], key=lambda c: c["score"])
        snippet = " ".join(best["text"].split())[:400]
        console.print(Panel(escape(snippet), title=escape(best["citation"] or result["evidence"][0]["source"]),
                            expand=True))


def _render_rejected(console: Console, rejected: dict[str, Any] | None) -> None:
    if not rejected:
        return
    counts = {k: v for k, v in rejected["rejected_counts"].items() if v}
    if counts:
        console.print(f"rejected by the gate: {counts}")
    # One line per page and reason (a long expired page has many chunks); the JSON lists every record.
    pages: dict[tuple[str, str, str], int] = {}
    for r in rejected["rejected"]:
        key = (r.get("source") or r["record_id"], r["reason"], r.get("superseded_by") or "")
        pages[key] = pages.get(key, 0) + 1
    for (source, reason, successor), n in list(pages.items())[:8]:
        line = f"  {escape(source)} [dim]{reason}{f' ×{n} chunks' if n > 1 else ''}[/]"
        console.print(line + (f" (superseded by {escape(successor)})" if successor else ""))
    if len(pages) > 8:
        console.print(f"  [dim]… {len(pages) - 8} more (see --json)[/]")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _measured_on(machine: dict[str, Any] | None) -> str:
    if not machine:
        return ""
    dot = "with" if machine["int8_dot_product"] else "without"
    return f"\nlatency measured on {machine['cpus']} × {machine['cpu']} ({dot} int8 dot-product instructions)"


def _figures(headers: list[str], rows: list[list[str]], **options: Any) -> Table:
    """A table of figures that reads in an 80-column terminal (a log, `tee`): no vertical rules, a column with
    nothing to show ("-" in every row: nDCG for page families) left out, and neither a figure nor a header's word
    ever cut or split (a header wraps between its words)."""
    keep = [i for i in range(len(headers)) if i == 0 or any(row[i] != "-" for row in rows)]
    widths = {i: max([len(row[i]) for row in rows] + [len(w) for w in headers[i].split()]) for i in keep}
    columns = [Column(headers[i], min_width=widths[i]) if i == 0 else
               Column(headers[i], justify="right", width=widths[i]) for i in keep]
    table = Table(*columns, box=box.SIMPLE_HEAD, show_edge=False, **options)
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    return table


def render_misses(console: Console, report: dict[str, Any], pipeline: str) -> None:
    """The families one pipeline's answers missed, question by question, each with the document rank of its best
    member in the pipeline's deeper ranking ("not retrieved" when it holds none)."""
    rows = report["pipelines"][pipeline]["per_question"]
    missed = [(row["id"], m) for row in rows for m in row["missed"]]
    never = sum(1 for _, m in missed if m["document_rank"] is None)
    console.print(f"{pipeline} missed {len(missed)} families in {sum(1 for r in rows if r['missed'])} of "
                  f"{len(rows)} answers: {never} not retrieved at all, {len(missed) - never} ranked below the "
                  f"context", highlight=False)
    for qid, m in missed:
        where = "not retrieved" if m["document_rank"] is None else f"document rank {m['document_rank']}"
        console.print(f"  {qid}  {m['family']}: {where}", highlight=False, markup=False)


BUDGET_SHOWN = 2048  # the context budget in tokens the eval table shows (the report holds every budget)


def _budget_cell(row: dict[str, Any]) -> str:
    """Family recall / all found within `BUDGET_SHOWN` tokens, or '-' for a report without budgets."""
    budget = row.get("at_tokens", {}).get(str(BUDGET_SHOWN))
    return f"{_fmt(budget['family_recall'])} / {_fmt(budget['all_found'])}" if budget else "-"


def render_eval(console: Console, report: dict[str, Any]) -> None:
    """`evidex eval`'s report: quality and latency per pipeline; the gate audit and the agent-signal
    validation where the run has them."""
    k = report["k"]
    pipelines: dict[str, dict[str, Any]] = report["pipelines"]
    console.print(_figures(
        ["pipeline", f"family recall / all found @{k}", f"… in {k} distinct pages",
         f"@{BUDGET_SHOWN:,} tokens", "nDCG @10", "recall @100", "MRR", "p50 / p95 ms"],
        [[name, f"{_fmt(row['family_recall'])} / {_fmt(row['all_found'])}",
          f"{_fmt(row['family_recall_pages'])} / {_fmt(row['all_found_pages'])}", _budget_cell(row),
          _fmt(row["ndcg@10"]),
          _fmt(row["recall@100"]), _fmt(row["mrr"]),
          f"{row['latency_ms']['p50']:.1f} / {row['latency_ms']['p95']:.1f}"] for name, row in pipelines.items()],
        title=f"{report['questions']} questions, plan={report['plan']}"))
    console.print(f"… in {k} distinct pages: the same over the first {k} distinct pages (a plain retriever's first {k}"
                  f" chunks hold fewer); @{BUDGET_SHOWN:,} tokens: the same within that budget, the answer read in "
                  f"order until the next chunk would pass it (title and text, the default embedder's tokenizer)"
                  f"{_measured_on(report.get('machine'))}", style="dim")
    if report.get("gate"):
        console.print(_figures(
            ["pipeline", "leaks", "admissible family recall", "found but rejected", "access-only kept unseen"],
            [[name, str(row["leaks"]), _fmt(row["admissible_family_recall"]),
              f"{row['found_but_rejected']['reported']} / {row['found_but_rejected']['expected']}",
              f"{row['access_withheld']['withheld']} / {row['access_withheld']['expected']}"]
             for name, row in pipelines.items()],
            title=f"through the gate: labels {', '.join(report['gate']['principal_labels']) or '(none)'} at "
                  f"{report['gate']['retrieved_at']}"))
        console.print("found but rejected: families reported so / expected; access-only kept unseen: families only "
                      "access rejects, withheld from the requester / expected", style="dim")
        for name, row in pipelines.items():
            reasons = ", ".join(f"{reason} {n}" for reason, n in row["reject_reasons"].items())
            console.print(f"{name} rejected: {reasons or 'nothing'}", style="dim")
    with_signals = {name: row["signals"] for name, row in pipelines.items() if "signals" in row}
    if with_signals:
        console.print(_figures(
            ["pipeline", "Spearman", "ceiling", "AUROC", "coverage precision / recall", "ratio AUROC", "re-query",
             "ms"],
            [[name, _fmt(sig["confidence_spearman"]), _fmt(sig["confidence_spearman_ceiling"]),
              _fmt(sig["confidence_auroc"]), f"{_fmt(sig['coverage_precision'])} / {_fmt(sig['coverage_recall'])}",
              _fmt(sig.get("coverage_auroc")),  # reports written before it have none
              _fmt(sig["requery_when_incomplete"]), f"{sig['signals_ms']['p50']:.2f}"]
             for name, sig in with_signals.items()],
            title="agent signals against the truth", pad_edge=False))  # nine columns: 80 wide without the edges
        console.print("confidence against quality: Spearman, the ceiling of a score that never ties, AUROC; the "
                      "coverage detector's precision and recall, and the AUROC of its ratio; re-query when the "
                      "answer is incomplete; what the signals cost, p50 ms", style="dim")
        if any("confidence_ece" in sig for sig in with_signals.values()):  # reports written before have none
            console.print(_figures(
                ["pipeline", "ECE", "Brier", "proceed when complete", "not when incomplete", "balanced accuracy"],
                [[name, _fmt(sig.get("confidence_ece")), _fmt(sig.get("confidence_brier")),
                  _fmt(sig["proceed_when_complete"]), _fmt(sig["requery_when_incomplete"]),
                  _fmt(sig.get("decision_balanced_accuracy"))] for name, sig in with_signals.items()],
                title="confidence as the probability of a complete answer; the decision as an agent feels it"))
            console.print("ECE: 10 equal-width bins of the stated confidence; Brier: mean squared error against "
                          "complete (1) or not (0); balanced accuracy: the mean of the two decision rates",
                          style="dim")
