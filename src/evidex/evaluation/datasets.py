"""Labelled questions for `evidex eval`, in two formats.

A questions file is JSON Lines, one question a line, with the evidence families its answer needs:

    {"id": "q1", "question": "How do I rotate the signing keys?",
     "families": [{"name": "key-rotation", "source_regex": "^security/keys", "rescue_query": "rotate keys"}]}

A family is met by any of its `doc_ids` or by a chunk whose source matches `source_regex`. A BEIR set is a
`queries.jsonl` with a `qrels.tsv` of graded relevance; each relevant document is then a family of its own.
"""

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
