"""Evaluation data in the formats of shared/data/README.md: questions.jsonl, or BEIR queries + qrels."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from evidex.errors import IngestError
from evidex.types import Chunk


@dataclass(frozen=True)
class FamilySpec:
    """A required evidence family: matched by any listed document, or by a regex over `source`."""

    name: str
    doc_ids: tuple[str, ...] = ()
    source_regex: str | None = None
    rescue_query: str | None = None

    def matches(self, chunk: Chunk) -> bool:
        if self.doc_ids and chunk.doc_id in self.doc_ids:
            return True
        return self.source_regex is not None and re.search(self.source_regex, chunk.source) is not None


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    families: tuple[FamilySpec, ...]
    aspects: tuple[str, ...] = ()
    shape: str | None = None
    qrels: dict[str, int] = field(default_factory=dict)  # doc_id -> grade (BEIR); empty for questions files

    def is_relevant(self, chunk: Chunk) -> int:
        """Graded relevance of a chunk's document (qrels), else 1 if it matches any required family."""
        if self.qrels:
            return self.qrels.get(chunk.doc_id, 0)
        return int(any(f.matches(chunk) for f in self.families))


def load_questions(path: Path) -> list[Question]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        location = f"{path}:{n}"
        try:
            item = json.loads(line)
            families = tuple(
                FamilySpec(name=str(f["name"]), doc_ids=tuple(str(d) for d in f.get("doc_ids", ())),
                           source_regex=f.get("source_regex"), rescue_query=f.get("rescue_query"))
                for f in item.get("families", ()))
            for f in families:
                if f.source_regex is not None:
                    re.compile(f.source_regex)
            out.append(Question(id=str(item["id"]), text=str(item["question"]), families=families,
                                aspects=tuple(item.get("aspects", ())), shape=item.get("shape")))
        except (json.JSONDecodeError, KeyError, TypeError, re.error) as exc:
            raise IngestError(f"invalid question: {exc}", location=location) from None
    return out


def load_beir(queries: Path, qrels: Path) -> list[Question]:
    """BEIR queries.jsonl + qrels.tsv; only queries with at least one positive judgement are kept."""
    judged: dict[str, dict[str, int]] = {}
    with qrels.open(encoding="utf-8") as handle:
        for n, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if n == 1 and row and not row[-1].strip().lstrip("-").isdigit():
                continue  # header
            if len(row) < 3:
                raise IngestError("expected 'query-id corpus-id score'", location=f"{qrels}:{n}")
            judged.setdefault(row[0], {})[row[1]] = int(row[2])
    out = []
    for n, line in enumerate(queries.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            qid = str(item.get("_id", item.get("id")))
            text = str(item["text"])
        except (json.JSONDecodeError, KeyError) as exc:
            raise IngestError(f"invalid query: {exc}", location=f"{queries}:{n}") from None
        rels = {d: g for d, g in judged.get(qid, {}).items() if g > 0}
        if rels:
            families = tuple(FamilySpec(name=d, doc_ids=(d,)) for d in sorted(rels))
            out.append(Question(id=qid, text=text, families=families, qrels=rels))
    return out


@dataclass(frozen=True)
class DevSet:
    """One development set of shared/data: its corpus paths and how to read its questions."""

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


BLIND_K8S_SETS = ("k8s-blind", "k8s-blind-2", "k8s-blind-3", "k8s-blind-4", "k8s-blind-5", "k8s-blind-6",
                  "k8s-blind-7", "k8s-blind-8", "k8s-blind-9", "k8s-blind-10", "k8s-blind-11",
                  "k8s-blind-12", "k8s-blind-13", "k8s-blind-14", "k8s-blind-15", "k8s-blind-16",
                  "k8s-blind-17", "k8s-blind-18", "k8s-blind-19")
"""Our k8s question sets written blind to evidex, in the order written: folders of the repository's `eval/`,
over the pages of shared/data/k8s (each folder's README says how and when)."""


def blind_k8s_sets(data: Path, repository: Path) -> list[DevSet]:
    """The blind k8s sets (`BLIND_K8S_SETS`) of `repository`, over the k8s pages of `data`."""
    return [DevSet(name, (data / "k8s" / "docs",), repository / "eval" / name / "questions.jsonl")
            for name in BLIND_K8S_SETS]


def dev_sets(data: Path) -> list[DevSet]:
    """The four development sets of shared/data, in the order the reports use."""
    return [
        DevSet("k8s", (data / "k8s" / "docs",), data / "k8s" / "questions.jsonl"),
        DevSet("hotpotqa", (data / "hotpotqa" / "corpus.jsonl",), data / "hotpotqa" / "questions.jsonl"),
        DevSet("musique", (data / "musique" / "corpus.jsonl",), data / "musique" / "questions.jsonl"),
        DevSet("scifact", (data / "scifact" / "corpus.jsonl",), data / "scifact" / "queries.jsonl",
               data / "scifact" / "qrels.tsv"),
    ]
