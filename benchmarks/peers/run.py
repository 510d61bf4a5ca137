"""evidex against LlamaIndex's and Haystack's hybrid retrievers, interleaved in one run on the corpora and questions
`evidex eval` reads (see README.md here). For each system: family recall @10 and within 2,048 tokens
(`evidex.evaluation.budget`: the default embedder's tokenizer, a ranking read in order until the next chunk
would pass the budget; evidex full's order is its context, then its deeper ranking),
latency p50 / p95 of one question (query embedding included, each system's own), peak RSS (each system alone in
a child process answering the same questions), and the ratios to evidex full.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/peers/run.py --set ../shared/data/k8s --set ../shared/data/fastapi
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from peers import PEERS, offline

from evidex.config import load_config
from evidex.engine import ready_to_serve
from evidex.evaluation import metrics
from evidex.evaluation.answers import EvalSettings, Ranked
from evidex.evaluation.budget import TokenCounter, within_budget
from evidex.evaluation.datasets import Question, load_questions
from evidex.evaluation.measure import peak_rss_mb
from evidex.evaluation.runner import PIPELINES, open_eval_engine
from evidex.types import Chunk

BUDGET_TOKENS = 2048
K = 10
SYSTEMS = ("evidex full", "evidex hybrid", "llamaindex", "haystack")
CHUNKS_FILE = Path(tempfile.gettempdir()) / "evidex-peers-chunks.pickle"


class Systems:
    """Every system over one evidex index's chunks: `ask(name, question)` -> (top k, ranking read for the budget)."""

    def __init__(self, corpus: Path, names: tuple[str, ...], chunks: list[Chunk] | None = None) -> None:
        self.engine = None
        if chunks is None or any(n.startswith("evidex") for n in names):
            self.engine = open_eval_engine(load_config(None), [corpus], None)
            ready_to_serve(self.engine)
            chunks = self.engine.store.all_chunks()
        self.chunks = chunks
        self.by_id = {c.record_id: c for c in self.chunks}
        self.settings = EvalSettings(k=K)
        self.peers = {}
        for name in names:
            if name in PEERS:
                started = time.perf_counter()
                self.peers[name] = PEERS[name](self.chunks)
                print(f"  {name}: built over {len(self.chunks)} chunks in {time.perf_counter() - started:.0f} s",
                      file=sys.stderr)

    def ask(self, name: str, question: Question) -> tuple[list[Chunk], list[Chunk]]:
        if name.startswith("evidex"):
            assert self.engine is not None
            ranked: Ranked = PIPELINES[name.split()[1]](self.engine, question, self.settings)
            top = list(ranked.top_k(K))
            seen = {c.record_id for c in top}
            return top, top + [c for c in ranked.chunks if c.record_id not in seen]
        ranking = [self.by_id[i] for i in self.peers[name].search(question.text) if i in self.by_id]
        return ranking[:K], ranking


def measure(corpus: Path, questions: list[Question], names: tuple[str, ...],
            chunks: list[Chunk] | None = None) -> dict[str, Any]:
    """Every system on every question, the systems' order rotated per question (load falls on all alike)."""
    systems = Systems(corpus, names, chunks)
    if chunks is None and systems.engine is not None:
        CHUNKS_FILE.write_bytes(pickle.dumps(systems.chunks))  # what each peer's child process indexes
    counter = TokenCounter()
    for name in names:  # warm-up: models loaded, caches as a serving process's
        systems.ask(name, questions[0])
    rows: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
    for i, q in enumerate(questions):
        for j in range(len(names)):
            name = names[(i + j) % len(names)]
            started = time.perf_counter()
            top, ranking = systems.ask(name, q)
            ms = (time.perf_counter() - started) * 1000
            budgeted = within_budget(ranking, BUDGET_TOKENS, counter)
            rows[name].append((metrics.family_recall(q, top), metrics.family_recall(q, budgeted), ms))
    out = {}
    for name, values in rows.items():
        latencies = [v[2] for v in values]
        out[name] = {"family_recall_at_10": round(sum(v[0] for v in values) / len(values), 4),
                     "family_recall_at_2048_tokens": round(sum(v[1] for v in values) / len(values), 4),
                     "p50_ms": round(metrics.percentile(latencies, 50), 2),
                     "p95_ms": round(metrics.percentile(latencies, 95), 2)}
    return out


def alone(corpus: Path, questions_path: Path, name: str) -> dict[str, float]:
    """Peak RSS (MB) of a process that builds `name` alone and answers every question, and its p50 there."""
    done = subprocess.run([sys.executable, __file__, "--rss-of", name, "--set", str(corpus.parent),
                           "--questions-file", str(questions_path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{name} alone failed: {done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| set | system | family recall @10 | @2,048 tokens | p50 ms | p95 ms | p50 ms alone | peak RSS MB "
             "| p50 / evidex full | alone / evidex full | RSS / evidex full |", "|---" * 11 + "|"]
    for set_name, systems in results.items():
        ref = systems["evidex full"]
        for name, r in systems.items():
            lines.append(f"| {set_name} | {name} | {r['family_recall_at_10']:.3f} | "
                         f"{r['family_recall_at_2048_tokens']:.3f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                         f"{r['p50_ms_alone']:.1f} | {r['peak_rss_mb']:.0f} | {r['p50_ms'] / ref['p50_ms']:.2f} | "
                         f"{r['p50_ms_alone'] / ref['p50_ms_alone']:.2f} | "
                         f"{r['peak_rss_mb'] / ref['peak_rss_mb']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", action="append", required=True, type=Path,
                        help="a development set folder: docs/ and questions.jsonl (repeatable)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--limit", type=int, default=0, help="first N questions only")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--rss-of", help=argparse.SUPPRESS)
    parser.add_argument("--questions-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    offline()
    if args.rss_of:  # a child: one system alone (a peer reads evidex's chunks from the parent's file)
        corpus = args.set[0] / "docs"
        chunks = None if args.rss_of.startswith("evidex") else pickle.loads(CHUNKS_FILE.read_bytes())
        alone_figures = measure(corpus, load_questions(args.questions_file), (args.rss_of,), chunks)[args.rss_of]
        print(json.dumps({"peak_rss_mb": peak_rss_mb(), "p50_ms_alone": alone_figures["p50_ms"]}))
        return
    names = tuple(n.strip() for n in args.systems.split(","))
    results: dict[str, dict[str, Any]] = {}
    for folder in args.set:
        questions = load_questions(folder / "questions.jsonl")
        questions = questions[: args.limit] if args.limit else questions
        print(f"{folder.name}: {len(questions)} questions", file=sys.stderr)
        results[folder.name] = measure(folder / "docs", questions, names)
        for name in names:
            results[folder.name][name].update(alone(folder / "docs", folder / "questions.jsonl", name))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "peers.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "peers.md").write_text(table(results) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
