"""The embedding cache's row layout: file size, insert and look-up time, the table evidex writes (row ids)
beside the one it wrote before (WITHOUT ROWID, which `EmbeddingCache` rewrites on first open).

    python scripts/bench_cache.py [--vectors 20000] [--dim 384] [--repeat 3]

Random unit vectors under SHA-256 content hashes, one model, inserted in batches of 64 (an ingest's model
batch) and then looked up 500 hashes at a time (a re-ingest), every 7th hash. Prints MB and the best of
`repeat` runs per layout, alternated; wall-clock on a shared machine: compare the rows of one run.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np

LAYOUTS = {
    "row ids (now)": "",
    "WITHOUT ROWID (before)": " WITHOUT ROWID",
}


def run(path: Path, suffix: str, rows: list[tuple[str, bytes]]) -> tuple[float, float, float]:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE vectors (model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL, "
               f"PRIMARY KEY (model, hash)){suffix}")
    model = "onnx-int8:bench"
    started = time.perf_counter()
    for i in range(0, len(rows), 64):
        db.executemany("INSERT OR REPLACE INTO vectors VALUES (?,?,?)", [(model, h, v) for h, v in rows[i:i + 64]])
        db.commit()
    insert = time.perf_counter() - started
    wanted = [h for h, _ in rows[::7]]
    started = time.perf_counter()
    for i in range(0, len(wanted), 500):
        part = wanted[i:i + 500]
        db.execute(f"SELECT hash, vector FROM vectors WHERE model=? AND hash IN ({','.join('?' * len(part))})",
                   (model, *part)).fetchall()
    lookup = time.perf_counter() - started
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return path.stat().st_size / 1e6, insert, lookup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((args.vectors, args.dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    rows = [(hashlib.sha256(f"chunk {i}".encode()).hexdigest(), matrix[i].tobytes()) for i in range(args.vectors)]
    best: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            for name, suffix in LAYOUTS.items():
                path = Path(tmp) / f"{r}-{len(name)}.sqlite"
                mb, insert, lookup = run(path, suffix, rows)
                old = best.get(name, (mb, insert, lookup))
                best[name] = (mb, min(old[1], insert), min(old[2], lookup))
    print(f"{args.vectors} vectors of {args.dim} floats ({args.vectors * args.dim * 4 / 1e6:.1f} MB of floats), "
          f"best of {args.repeat}")
    print(f"{'layout':<24} {'MB':>7} {'insert s':>9} {'look-up ms':>11}")
    for name, (mb, insert, lookup) in best.items():
        print(f"{name:<24} {mb:>7.1f} {insert:>9.2f} {lookup * 1000:>11.1f}")


if __name__ == "__main__":
    main()
