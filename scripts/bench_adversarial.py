"""Time the whole pipeline on adversarial queries: whitespace runs, one long token, repeated separators,
nested descriptions. Every case must stay linear; a regression shows here as seconds instead of
milliseconds (the plan's split once took 40 s on 2,000 spaces, the exact-token scan 8 s on one 20,000-letter
word).

    .venv/bin/python scripts/bench_adversarial.py [--index DIR]

Uses the sample handbook (ingested into a temporary index unless --index names one). Prints the total time
and the slowest stage per case; the machine is shared and noisy, so read orders of magnitude.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from evidex.admission.gate import Principal
from evidex.config import load_config
from evidex.engine import Engine
from evidex.pipeline import SearchRequest

SAMPLE = Path(__file__).resolve().parents[1] / "src" / "evidex" / "sample"
CASES = {
    "spaces": "rotate the transit key" + " " * 1960 + "thanks",
    "tabs-newlines": "rotate\t\n" * 250,
    "backticks": "`ab` " * 400,
    "one-token-2k": "a" * 2000,
    "one-token-20k": "a" * 20000,
    "commas": "key," * 500,
    "and-and": "and " * 500,
    "full-stops": "a. " * 660,
    "question-marks": "why? " * 400,
    "quotes": '"abc" ' * 330,
    "capitalised": "Alpha Beta " * 180,
    "flags": "--flag-x " * 220,
    "nested": "the composer of " * 125,
    "dotted": "a.b." * 500,
    "mixed-20k": ("How do I rotate the `transit` key, and what is the Dublin policy?  " * 300)[:20000],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="an index of the sample handbook (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        index = args.index or Path(tmp) / "idx"
        config = load_config(SAMPLE / "evidex.toml", env={}).replace(index={"path": str(index)})
        with Engine.open(config) as engine:
            if args.index is None:
                engine.ingest([SAMPLE / "handbook"])
            who = Principal.of("bench", ["engineering-read"])
            at = datetime(2026, 11, 30, tzinfo=UTC)
            engine.run(SearchRequest("warm up", principal=who, retrieved_at=at))
            for name, query in CASES.items():
                started = time.perf_counter()
                out = engine.run(SearchRequest(query, k=5, principal=who, retrieved_at=at))
                ms = (time.perf_counter() - started) * 1000
                slow = max(out.trace.stages, key=lambda s: s.ms)
                print(f"{name:15s} {len(query):6d} chars {ms:9.1f} ms   slowest stage: {slow.name} {slow.ms:.1f} ms")


if __name__ == "__main__":
    main()
