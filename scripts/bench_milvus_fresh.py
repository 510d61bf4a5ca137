"""How Milvus Lite searches rows in the server that wrote them, against a server that opened them afterwards.

    python scripts/bench_milvus_fresh.py [--data ../shared/data] [--questions 16]

One Milvus Lite index in a temporary directory, ingested (vectors from the embedding cache), then the
questions' dense and BM25 searches and full pipeline runs twice: on the engine that ingested, and on one
opened after it closed. Milvus Lite (3.x: a server in the opening process) searches the rows its running
server wrote without their index; closing a process's last store on the file stops that server
(`MilvusStore.close`), and the next open starts one that indexes them. A flush would seal them too, but sealed
rows keep the statistics of every row version a replacement or a rollback deleted, so BM25 scores would
then depend on the write history (docs/milvus.md). The k8s pages and questions by default; the bundled
handbook when ../shared/data is absent. The phases run one after the other on a shared, noisy machine: read
their ratio, not their milliseconds.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from evidex.config import load_config
from evidex.engine import Engine
from evidex.evaluation.measure import p50_ms
from evidex.pipeline import SearchRequest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "src" / "evidex" / "sample"


def measure(engine: Engine, questions: list[str], label: str) -> None:
    store = engine.store
    vectors = {q: engine.encode_query(q) for q in questions}
    dense = p50_ms(lambda q: store.search_dense(vectors[q], 60), questions)
    sparse = p50_ms(lambda q: store.search_sparse(q, 60), questions)
    full = p50_ms(lambda q: engine.result_of(engine.run(SearchRequest(query=q))), questions)
    print(f"{label:>16}: dense p50 {dense:7.1f} ms   BM25 p50 {sparse:7.1f} ms   full pipeline p50 {full:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--questions", type=int, default=16)
    args = parser.parse_args()
    k8s = args.data / "k8s"
    corpus, qfile = ((k8s / "docs", k8s / "questions.jsonl") if k8s.is_dir()
                     else (SAMPLE / "handbook", SAMPLE / "handbook-questions.jsonl"))
    questions = [json.loads(line)["question"] for line in qfile.read_text().splitlines() if line.strip()]
    questions = questions[: args.questions]
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(None).replace(index={"backend": "milvus", "path": str(Path(tmp) / "index")})
        engine = Engine.open(config)
        started = time.perf_counter()
        report = engine.ingest([corpus], label="bench")
        print(f"{corpus}: {report.added_chunks} chunks ingested in {time.perf_counter() - started:.1f} s "
              f"({report.embedded} embedded); {len(questions)} questions")
        measure(engine, questions, "as written")
        started = time.perf_counter()
        engine.close()
        engine = Engine.open(config)
        print(f"closed and opened again in {time.perf_counter() - started:.1f} s")
        measure(engine, questions, "reopened")
        engine.close()


if __name__ == "__main__":
    main()
