"""Compare two folders of `evidex eval --json` reports, file by file: every key but timings, the machine and the
index snapshot must be equal. Run it before and after a change that must not change behaviour:

    OUT=/tmp/before scripts/eval_all.sh      # on the old commit (e.g. a `git worktree`)
    OUT=/tmp/after scripts/eval_all.sh       # on the new one
    .venv/bin/python scripts/compare_eval.py /tmp/before /tmp/after

Prints IDENTICAL or the first differences per report; exits 1 when any report differs or is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# Measured, not decided: wall-clock timings, where they ran, and the snapshot id (it names the ingest's batch).
SKIPPED = {"latency_ms", "machine", "snapshot_id", "signals_ms"}


def differences(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key in SKIPPED or key.endswith("_ms"):
                continue
            if key not in a or key not in b:
                out.append(f"{path}.{key}: in one report only")
            else:
                differences(a[key], b[key], f"{path}.{key}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            differences(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} != {b!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    failed = False
    for report in sorted(args.before.glob("*.json")):
        other = args.after / report.name
        if not other.exists():
            print(f"{report.name}: missing in {args.after}")
            failed = True
            continue
        found: list[str] = []
        differences(json.loads(report.read_text()), json.loads(other.read_text()), report.stem, found)
        print(f"{report.name}: " + ("IDENTICAL" if not found else f"{len(found)} differences"))
        for line in found[:15]:
            print(f"    {line}")
        failed = failed or bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
