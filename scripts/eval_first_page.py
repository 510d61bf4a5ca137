"""How much of the gap between the k8s development set and our blind sets is how their families are written?

    .venv/bin/python scripts/eval_first_page.py [--data ../shared/data] [--sets k8s k8s-blind ...]

A development family lists every page that holds its evidence (`source_regex` alternatives: 1.6 pages a family
on average); most of our blind sets name one page a family. This scores each k8s question set twice, as written
and with every family cut to the first page its regex lists (the stricter blind-set way), for the full pipeline
(auto plan) and for plain hybrid read to its tenth distinct page: family recall and all-found @10.
"""

from __future__ import annotations

import argparse
import re
import statistics
from dataclasses import replace
from pathlib import Path

from evidex.config import load_config
from evidex.evaluation import metrics
from evidex.evaluation.datasets import FamilySpec, Question, blind_k8s_sets, dev_sets
from evidex.evaluation.runner import PIPELINES, EvalSettings, open_eval_engine

REPOSITORY = Path(__file__).resolve().parents[1]


def top_level_alternatives(pattern: str) -> list[str]:
    """`a|b(c|d)|e` -> ['a', 'b(c|d)', 'e']: the alternatives outside any group."""
    parts, depth, start, escaped = [], 0, 0, False
    for i, ch in enumerate(pattern):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
    return [*parts, pattern[start:]]


def first_page(family: FamilySpec, pages: list[str]) -> FamilySpec:
    """The family cut to the first page of the corpus its first alternative matches."""
    if family.source_regex is None:
        return family
    first = top_level_alternatives(family.source_regex)[0]
    match = next((p for p in pages if re.search(first, p)), None)
    return replace(family, source_regex=f"^{re.escape(match)}$" if match else first)


def score(questions: list[Question], contexts: list[list], k: int = 10) -> tuple[float, float]:
    recalls = [metrics.family_recall(q, c[:k]) for q, c in zip(questions, contexts, strict=True)]
    return statistics.fmean(recalls), statistics.fmean(1.0 if r == 1.0 else 0.0 for r in recalls)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--sets", nargs="*", default=["k8s", "k8s-blind", "k8s-blind-2", "k8s-blind-3", "k8s-blind-4",
                                                  "k8s-blind-5"])
    args = ap.parse_args()
    sets = {d.name: d for d in [*dev_sets(args.data), *blind_k8s_sets(args.data, REPOSITORY)]}
    engine = open_eval_engine(load_config(), [args.data / "k8s" / "docs"], None)
    pages = sorted({c.source for c in engine.store.all_chunks()})
    settings = EvalSettings(10, "auto", None, None)
    for name in args.sets:
        questions = sets[name].questions()
        strict = [replace(q, families=tuple(first_page(f, pages) for f in q.families)) for q in questions]
        pages_per_family = statistics.fmean(sum(1 for p in pages if f.source_regex and re.search(f.source_regex, p))
                                            for q in questions for f in q.families)
        full = [list(PIPELINES["full"](engine, q, settings).info["context"]) for q in questions]
        hybrid = [metrics.doc_ranking(PIPELINES["hybrid"](engine, q, settings).chunks) for q in questions]
        row = [f"{name}: {pages_per_family:.2f} pages a family"]
        for label, contexts in (("full", full), ("hybrid 10 pages", hybrid)):
            (r, a), (rs, as_) = score(questions, contexts), score(strict, contexts)
            row.append(f"{label} {r:.3f} / {a:.3f} as written, {rs:.3f} / {as_:.3f} first page only")
        print("; ".join(row))
    engine.close()


if __name__ == "__main__":
    main()
