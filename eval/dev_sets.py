"""The evaluation sets the project measures itself on, for the scripts in scripts/ (not part of the package).

The five development sets live in a data folder outside this repository (`--data`, by default
`../shared/data`: k8s, FastAPI, HotpotQA, MuSiQue, SciFact); our own blind k8s sets are folders of `eval/`, listed in
`eval/blind_sets.txt`. A script puts this folder on `sys.path` and imports from here:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
    from dev_sets import blind_k8s_sets, dev_sets
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evidex.evaluation.datasets import Question, load_beir, load_questions

EVAL_DIR = Path(__file__).resolve().parent
BLIND_LIST = EVAL_DIR / "blind_sets.txt"


@dataclass(frozen=True)
class DevSet:
    """One evaluation set: its corpus paths and how to read its questions."""

    name: str
    corpus: tuple[Path, ...]
    questions_file: Path
    qrels_file: Path | None = None  # BEIR sets: queries in `questions_file`, relevance here

    def exists(self) -> bool:
        return all(p.exists() for p in self.corpus)

    def questions(self) -> list[Question]:
        if self.qrels_file is not None:
            return load_beir(self.questions_file, self.qrels_file)
        return load_questions(self.questions_file)


def blind_set_names() -> list[str]:
    """The blind k8s sets of `eval/`, in the order written (`eval/blind_sets.txt`, # starts a comment)."""
    lines = (line.split("#", 1)[0].strip() for line in BLIND_LIST.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line]


def blind_k8s_sets(data: Path) -> list[DevSet]:
    """The blind k8s sets, over the k8s pages of the data folder `data`."""
    return [DevSet(name, (data / "k8s" / "docs",), EVAL_DIR / name / "questions.jsonl")
            for name in blind_set_names()]


def dev_sets(data: Path) -> list[DevSet]:
    """The five development sets of the data folder `data`, in the order the reports use."""
    return [
        DevSet("k8s", (data / "k8s" / "docs",), data / "k8s" / "questions.jsonl"),
        DevSet("fastapi", (data / "fastapi" / "docs",), data / "fastapi" / "questions.jsonl"),
        DevSet("hotpotqa", (data / "hotpotqa" / "corpus.jsonl",), data / "hotpotqa" / "questions.jsonl"),
        DevSet("musique", (data / "musique" / "corpus.jsonl",), data / "musique" / "questions.jsonl"),
        DevSet("scifact", (data / "scifact" / "corpus.jsonl",), data / "scifact" / "queries.jsonl",
               data / "scifact" / "qrels.tsv"),
    ]


if __name__ == "__main__":  # `python eval/dev_sets.py`: the blind set names, one a line (for shell scripts)
    print("\n".join(blind_set_names()))
