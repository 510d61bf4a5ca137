"""The benchmark report as text: every figure next to its goal and a PASS / MISS verdict."""

from __future__ import annotations

from typing import Any

GOALS: dict[str, Any] = {
    "ingest_over_raw_min": 0.80,
    "hybrid_100k_p50_ms_max": 30.0,
    "hybrid_100k_p95_ms_max": 80.0,
    "peak_memory_mb_max": 1536.0,
}


def check_goals(report: dict[str, Any]) -> dict[str, Any]:
    """Each measured figure that has a goal: its value, the goal, and whether it passes."""
    checks: dict[str, Any] = {}
    emb = report.get("embedding", {})
    if "ratio" in emb:
        checks["ingest_over_raw"] = {"value": emb["ratio"], "goal": f">= {GOALS['ingest_over_raw_min']}",
                                     "pass": emb["ratio"] >= GOALS["ingest_over_raw_min"]}
    syn = report.get("synthetic", {})
    hybrid = syn.get("modes", {}).get("hybrid")
    if hybrid:
        n = syn["chunks"]
        checks[f"hybrid_p50_at_{n}"] = {"value": hybrid["p50_ms"],
                                         "goal": f"<= {GOALS['hybrid_100k_p50_ms_max']} ms",
                                         "pass": hybrid["p50_ms"] <= GOALS["hybrid_100k_p50_ms_max"]}
        checks[f"hybrid_p95_at_{n}"] = {"value": hybrid["p95_ms"],
                                         "goal": f"<= {GOALS['hybrid_100k_p95_ms_max']} ms",
                                         "pass": hybrid["p95_ms"] <= GOALS["hybrid_100k_p95_ms_max"]}
    mem = report.get("memory", {})
    if "ru_maxrss_mb" in mem:
        checks["peak_memory"] = {"value": mem["ru_maxrss_mb"],
                                 "goal": f"<= {GOALS['peak_memory_mb_max']:.0f} MB",
                                 "pass": mem["ru_maxrss_mb"] <= GOALS["peak_memory_mb_max"]}
    return checks


# ---- the table -------------------------------------------------------------------------------------------
def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


_HEAD = f"{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}{'cpu p50':>9}{'cpu p95':>9}"


def _row(label: str, s: dict[str, Any], width: int = 22) -> str:
    cpu = f"{s['cpu_p50_ms']:>9.2f}{s['cpu_p95_ms']:>9.2f}" if "cpu_p50_ms" in s else " " * 18
    return f"{label:<{width}}{s['p50_ms']:>9.2f}{s['p95_ms']:>9.2f}{s['mean_ms']:>9.2f}{cpu}"


def format_bench(report: dict[str, Any]) -> str:
    """The report as a plain-text table, goals and verdicts next to the figures."""
    checks = report.get("checks", {})
    syn = report.get("synthetic", {})
    lines = [*_header(report), *_embedding(report.get("embedding", {}), checks),
             *_docs_latency(report.get("docs_latency", {})), *_synthetic(syn),
             *_memory(report.get("memory", {}), checks), *_bm25s(report.get("bm25s", {}), syn),
             *_scale(report.get("sizes", {}))]
    if checks:
        lines.append("Goals")
        for name, c in checks.items():
            lines.append(f"   {name:<28}{c['value']!s:>10}   {c['goal']:<14} {_verdict(c['pass'])}")
    return "\n".join(lines)


def _header(report: dict[str, Any]) -> list[str]:
    env = report.get("environment", {})
    return [f"evidex benchmark  (total {report.get('total_s', '?')} s)",
            f"NOTE: {env.get('note', '')}; load average {env.get('loadavg_start')} at start, "
            f"{env.get('loadavg_end')} at end.",
            "      latency 'cpu' columns: CPU time of the calling thread for the same calls; waiting for a "
            "core does not inflate them (work in BLAS worker threads is not counted).",
            f"BLAS threads: {env.get('blas_threads')}",
            f"python {env.get('python')}, numpy {env.get('numpy')}, sqlite {env.get('sqlite')}", ""]


def _embedding(emb: dict[str, Any], checks: dict[str, Any]) -> list[str]:
    lines = ["1. Embedding throughput: raw embedder vs Engine.ingest (same pages)"]
    if "skipped" in emb:
        return [*lines, f"   skipped: {emb['skipped']}", ""]
    verdict = _verdict(checks["ingest_over_raw"]["pass"]) if "ingest_over_raw" in checks else ""
    return [
        *lines,
        f"   {emb['documents']} pages, {emb['chunks']} chunks, batch {emb['batch_size']}, "
        f"threads {emb['threads']}; {emb['note']}",
        f"   {'raw embed_documents, batches of ' + str(emb['batch_size']) + ', no cache':<50}"
        f"{emb['raw_chunks_per_s']:>8.1f} chunks/s  {emb['raw_cpu_ms_per_chunk']:>6.1f} cpu ms/chunk"
        f"   rounds {emb['raw_rounds_chunks_per_s']}",
        f"   {'Engine.ingest, fresh index + empty cache':<50}"
        f"{emb['ingest_chunks_per_s']:>8.1f} chunks/s  "
        f"{emb['ingest_cpu_ms_per_chunk']:>6.1f} cpu ms/chunk"
        f"   rounds {emb['ingest_rounds_chunks_per_s']}",
        f"   {'raw, all chunks in one length-sorted call':<50}"
        f"{emb['raw_one_sorted_call_chunks_per_s']:>8.1f} chunks/s  "
        f"{emb['raw_one_sorted_call_cpu_ms_per_chunk']:>6.1f} cpu ms/chunk",
        "   (cpu ms/chunk: CPU time of all threads of this process, per chunk)",
        f"   {'ingest / raw (wall-clock throughput)':<50}{emb['ratio']:>8.3f}"
        f"   goal >= {GOALS['ingest_over_raw_min']:.2f}  {verdict}   per round {emb['ratio_per_round']}",
        f"   {'ingest / raw (CPU per chunk)':<50}{emb['cpu_ratio']:>8.3f}",
        "",
    ]


def _docs_latency(lat: dict[str, Any]) -> list[str]:
    lines = ["2. Query latency on the documents' index (Engine.search k=10, query encoding included)"]
    if "skipped" in lat:
        return [*lines, f"   skipped: {lat['skipped']}", ""]
    lines += [f"   {lat['index_chunks']} chunks; {lat['queries']} queries ({lat['distinct_queries']} distinct, "
              f"from {lat['query_source']})",
              f"   {'mode':<22}{_HEAD}"]
    lines += ["   " + _row(mode, s) for mode, s in lat["modes"].items()]
    return [*lines, "   " + _row("(query encoding only)", lat["query_encoding"]), ""]


def _synthetic(syn: dict[str, Any]) -> list[str]:
    if not syn:
        return []
    lines = [
        f"3. Synthetic corpus: {syn['chunks']:,} chunks in {syn['documents']:,} documents, {syn['dim']}-dim "
        f"vectors ({syn['clusters']} clusters), {syn['vocabulary']:,}-word Zipfian vocabulary",
        f"   build via SqliteStore.commit_batch ({syn['commit_batches']} batches): {syn['build_s']:.1f} s = "
        f"{syn['build_chunks_per_s']:,.0f} chunks/s   (generating the data: {syn['generate_s']:.1f} s, "
        "not counted)",
        f"   index on disk {syn['index_mb']:.0f} MB; first bm25 query "
        f"{syn['cold_first_query_s']['bm25'] * 1000:.0f} ms, "
        f"first dense query (loads the matrix) {syn['cold_first_query_s']['dense']:.2f} s",
        f"   {syn['queries']} queries, {syn['query_words']}",
        f"   chunks matched by a query's OR-ed terms (FTS5 scores all of them): "
        f"{syn['fts_matching_chunks_per_query']}",
        f"   filter: access_labels {syn['filter']['access_labels']} + valid_at now "
        f"(passes {syn['filter']['passing_share']:.0%} of chunks)",
        f"   NOTE: {syn['note']}",
        f"   {'mode (k=10)':<22}{_HEAD}   goal",
    ]
    for mode, s in syn["modes"].items():
        goal = ""
        if mode == "hybrid":
            ok = s["p50_ms"] <= GOALS["hybrid_100k_p50_ms_max"] and s["p95_ms"] <= GOALS["hybrid_100k_p95_ms_max"]
            goal = (f"   p50 <= {GOALS['hybrid_100k_p50_ms_max']:.0f}, p95 <= "
                    f"{GOALS['hybrid_100k_p95_ms_max']:.0f}  {_verdict(ok)}")
        lines.append("   " + _row(mode, s) + goal)
    for name, stages in syn["hybrid_stages_ms"].items():
        lines.append(f"   where {name} spends its time (stage by stage, pool {syn['candidate_pool']}, "
                     f"{syn['fusion']} fusion):")
        lines += ["     " + _row(stage, s, 20) for stage, s in stages.items()]
    return [*lines, ""]


def _memory(mem: dict[str, Any], checks: dict[str, Any]) -> list[str]:
    if not mem:
        return []
    ok = checks.get("peak_memory", {}).get("pass", False)
    return [
        "4. Memory",
        f"   peak RSS (ru_maxrss, whole process, before the bm25s baseline) {mem['ru_maxrss_mb']:>8.0f} MB"
        f"   goal <= {GOALS['peak_memory_mb_max']:.0f} MB  {_verdict(ok)}",
        f"   synthetic part: RSS {mem['rss_before_synthetic_mb']:.0f} -> "
        f"{mem['rss_after_synthetic_mb']:.0f} MB (growth {mem['rss_growth_synthetic_mb']:.0f} MB, "
        f"sampled peak {mem['rss_peak_synthetic_sampled_mb']:.0f} MB)",
        f"   ru_maxrss after the bm25s baseline: {mem.get('ru_maxrss_after_bm25s_mb', float('nan')):.0f} MB",
        "",
    ]


def _bm25s(b: dict[str, Any], syn: dict[str, Any]) -> list[str]:
    lines = ["5. bm25s baseline on the same synthetic texts and queries (k=10)"]
    if not b:
        return [*lines, "   not run", ""]
    if "skipped" in b:
        return [*lines, f"   skipped: {b['skipped']}", ""]
    lines += [
        f"   bm25s {b['version']} ({b['method']}); {b['note']}",
        f"   build (tokenize + index) {b['build_s']:.1f} s = {b['build_chunks_per_s']:,.0f} chunks/s "
        f"(tokenize {b['tokenize_s']:.1f} s), RSS +{b['rss_growth_mb']:.0f} MB",
        f"   {'':<22}{_HEAD}",
        "   " + _row("bm25s", b["latency"]),
    ]
    ours = syn.get("modes", {}).get("bm25", {})
    if ours:
        lines.append("   " + _row("evidex FTS5 bm25", ours) + "   (Engine.search, chunk rows included)")
    return [*lines, ""]


def dominant_stage(figures: dict[str, Any]) -> str:
    """Which part of a full search costs most at one size: the sparse search, the dense search (each alone, p50),
    or what the full pipeline adds to hybrid retrieval (rerank, rescue, gate, signals)."""
    lat = figures["latency_ms"]
    parts = {"bm25 search": lat["bm25"]["p50"], "dense search": lat["dense"]["p50"],
             "pipeline stages after retrieval": lat["full"]["p50"] - lat["hybrid"]["p50"]}
    return max(parts, key=lambda name: parts[name])


def _scale(sizes: dict[str, Any]) -> list[str]:
    if not sizes:
        return []
    ns = sorted(sizes, key=int)
    width = 12
    lines = ["6. Cost as the index grows (each size built and served in its own processes)",
             "   " + f"{'':<34}" + "".join(f"{int(n):>{width},}" for n in ns)]

    def row(label: str, values: list[Any]) -> None:
        lines.append("   " + f"{label:<34}" + "".join(f"{v:>{width}}" for v in values))

    row("dense search", ["approximate" if sizes[n]["approximate"] else "exact" for n in ns])
    for key, label in (("ingest_chunks_per_s", "ingest chunks/s (commit_batch)"), ("build_s", "ingest s"),
                       ("dense_index_build_s", "dense index load/build s"), ("disk_mb", "disk MB"),
                       ("build_peak_rss_mb", "build peak RSS MB"), ("serve_open_s", "serving: open s"),
                       ("peak_rss_mb", "serving peak RSS MB")):
        row(label, [sizes[n][key] for n in ns])
    for mode in sizes[ns[0]]["latency_ms"]:
        row(f"{mode} p50 / p95 ms", [f"{sizes[n]['latency_ms'][mode]['p50']:.1f}/"
                                     f"{sizes[n]['latency_ms'][mode]['p95']:.0f}" for n in ns])
    for key in sorted(k for k in sizes[ns[0]] if k.endswith("recall_at_10")):
        row(key, [sizes[n][key] for n in ns])
    row("costs most", [dominant_stage(sizes[n]).split()[0] for n in ns])
    lines.append("   (costs most: bm25 / dense search alone, or the pipeline stages after retrieval; see "
                 "dominant_stage)")
    return [*lines, ""]
