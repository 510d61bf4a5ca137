"""Time hostile single-line pages through ingest: each must be ingested or dead-lettered in under 10 s.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_long_lines.py [--mb 10] [--skip-unbounded]
        [--no-size-bound] [--pages tags.html ...]

For each page (markdown, HTML text, HTML of many small elements; one line of `--mb` megabytes each) it prints:
- `ingest`: `Engine.ingest` of a folder holding the page beside a small good page, with the default `[ingest]`
  bounds (the outcome: the page's dead letter and reason, or its chunk count), and whether the good page landed
  (`--no-size-bound`: with `max_document_bytes = 0`, so only the time bound holds; a page that reads within it is
  embedded too, which takes minutes at 10 MiB);
- `read+chunk`: the loader and chunker alone with no bounds (no embedding), to show what the readers cost.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from evidex.config import ChunkingConfig, Config
from evidex.engine import Engine
from evidex.ingest.limits import NO_LIMITS
from evidex.ingest.loaders import LoadFailure, load_file
from evidex.ingest.run import chunk_document

GOOD = "# Restart a worker\n\nDrain it first, then restart it with `svc restart worker`.\n"

PAGES: dict[str, Callable[[int], str]] = {
    "line.md": lambda n: "word " * (n // 5),
    "line.html": lambda n: "<html><head><title>T</title></head><body><p>" + "word " * (n // 5) + "</p></body></html>",
    "tags.html": lambda n: "<html><body>" + "<p>a <b>b</b> c</p>" * (n // 20) + "</body></html>",
}


def ingest_once(name: str, text: str, workdir: Path, size_bound: bool) -> str:
    corpus = workdir / f"corpus-{name}"
    corpus.mkdir()
    (corpus / name).write_text(text, encoding="utf-8")
    (corpus / "good.md").write_text(GOOD, encoding="utf-8")
    config = Config().replace(index={"path": str(workdir / f"idx-{name}")})
    if not size_bound:
        config = config.replace(ingest={"max_document_bytes": 0})
    with Engine.open(config) as engine:
        started = time.perf_counter()
        report = engine.ingest([corpus])
        seconds = time.perf_counter() - started
        live = set(engine.store.ledger.document_hashes())
    letter = next((d.reason for d in report.dead_letters if d.source == name), None)
    outcome = f"dead letter: {letter}" if letter else f"ingested ({report.added_chunks} chunks in the batch)"
    return f"ingest      {seconds:7.2f} s  {outcome}; good page ingested: {'good.md' in live}"


def read_and_chunk(name: str, text: str, workdir: Path) -> str:
    path = workdir / f"unbounded-{name}"
    path.write_text(text, encoding="utf-8")
    started = time.perf_counter()
    doc = load_file(path, name, NO_LIMITS)
    read_s = time.perf_counter() - started
    if isinstance(doc, LoadFailure):
        return f"read+chunk  {read_s:7.2f} s  load failure: {doc.reason}"
    chunks = chunk_document(doc, ChunkingConfig(), datetime.now(UTC))
    total = time.perf_counter() - started
    return f"read+chunk  {total:7.2f} s  (read {read_s:.2f} s), {len(chunks)} chunks, no bounds, no embedding"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=10.0, help="size of each page in MiB (default 10)")
    parser.add_argument("--skip-unbounded", action="store_true", help="only the bounded ingest")
    parser.add_argument("--no-size-bound", action="store_true", help="ingest with the time bound alone")
    parser.add_argument("--pages", nargs="*", default=sorted(PAGES), choices=sorted(PAGES), help="pages to time")
    args = parser.parse_args()
    size = int(args.mb * 1024 * 1024)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.pages:
            text = PAGES[name](size)
            print(f"{name}: {len(text.encode()) / 2**20:.1f} MiB on one line", flush=True)
            print("  " + ingest_once(name, text, Path(tmp), not args.no_size_bound), flush=True)
            if not args.skip_unbounded:
                print("  " + read_and_chunk(name, text, Path(tmp)), flush=True)


if __name__ == "__main__":
    main()
