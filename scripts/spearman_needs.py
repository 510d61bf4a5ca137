"""What a confidence would need to reach a confidence-quality Spearman of 0.75, per data set of an `evidex eval`
JSON report (issue #5's target).

    .venv/bin/python scripts/spearman_needs.py /tmp/evidex-eval/k8s-auto.json /tmp/evidex-eval/hotpotqa.json ...

For a confidence that never ties, Spearman is about `ceiling x (2 x AUROC - 1)` (exactly so when quality takes
two values, 2 x AUROC - 1 being then the rank-biserial correlation), so the AUROC it needs is
`(0.75 / ceiling + 1) / 2`; above 1, no such confidence can get there. A confidence may tie, though: one that takes
two values (say "complete" and "incomplete") scores about the phi coefficient of its call against completeness
(all families found; for a BEIR set, every relevant document, a rougher guide since its quality is nDCG), so the
script also prints the fewest incomplete answers such a call must pick out, of those there are, when it flags
exactly as many answers as are incomplete. Reads the reports' `full` pipeline unless told otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

TARGET = 0.75


def phi(hits: int, flagged: int, incomplete: int, total: int) -> float:
    """Phi coefficient of a two-valued call that flags `flagged` answers, `hits` of them among the
    `incomplete` answers out of `total`."""
    fp, fn = flagged - hits, incomplete - hits
    tn = total - incomplete - fp
    denominator = math.sqrt(incomplete * (total - incomplete) * flagged * (total - flagged))
    return (hits * tn - fp * fn) / denominator if denominator else 0.0


def needs(report: dict, pipeline: str) -> dict[str, object]:
    run = report["pipelines"][pipeline]
    signals = run["signals"]
    total = int(run["questions"])
    complete = run.get("all_found")
    ceiling, auroc = signals["confidence_spearman_ceiling"], signals["confidence_auroc"]
    row: dict[str, object] = {
        "questions": total, "spearman": signals["confidence_spearman"], "ceiling": ceiling, "auroc": auroc,
        "ceiling_x_(2auroc-1)": round(ceiling * (2 * auroc - 1), 3),
        "auroc_needed_untied": round((TARGET / ceiling + 1) / 2, 3),
    }
    if complete is not None:
        incomplete = round((1 - complete) * total)
        enough = next((m for m in range(incomplete + 1) if phi(m, incomplete, incomplete, total) >= TARGET), None)
        row["incomplete"] = incomplete
        row["two_valued_must_pick"] = (f"{enough} of {incomplete}, <= {incomplete - enough} false"
                                      if enough is not None else "-")
        row["requery_when_incomplete"] = signals["requery_when_incomplete"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--pipeline", default="full")
    args = parser.parse_args()
    for path in args.reports:
        row = needs(json.loads(path.read_text(encoding="utf-8")), args.pipeline)
        print(path.stem, " ".join(f"{key}={value}" for key, value in row.items()))


if __name__ == "__main__":
    main()
