"""The audit log rotates by size and keeps a bounded number of old files; no entry is torn or lost to a
rotation, also with several writers; a line names each reason and page once."""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "admission"))

from admission_support import NOW, candidate, make_chunk

from evidex.admission import AdmissionGate, AuditLog, Principal
from evidex.admission.gate import GateDecision
from evidex.engine import Engine

READER = Principal.of("reader", ["public"])
EngineFactory = Callable[..., Engine]


def decision(chunks_per_page: int = 1) -> GateDecision:
    chunks = [make_chunk("ok")]
    for page in ("a", "b"):
        chunks += [dataclasses.replace(make_chunk(f"{page}{i}", labels=("secret",)), doc_id=f"doc-{page}")
                   for i in range(chunks_per_page)]
    return AdmissionGate().admit([candidate(c) for c in chunks], READER, NOW)


def lines_of(paths: list[Path]) -> list[dict[str, object]]:
    return [json.loads(line) for p in paths for line in p.read_text(encoding="utf-8").splitlines()]


def test_the_log_rotates_past_its_size_and_keeps_the_newest_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, max_bytes=1_000, keep=2)
    for i in range(40):
        log.append(decision(), request_id=f"r{i:02d}", principal=READER, retrieved_at=NOW, query="q")
    assert log.rotated() == [tmp_path / "audit.jsonl.1", tmp_path / "audit.jsonl.2"]
    assert not (tmp_path / "audit.jsonl.3").exists()
    files = [*reversed(log.rotated()), path]
    assert all(p.stat().st_size <= 1_000 for p in files)
    kept = [e["request_id"] for e in lines_of(files)]
    assert kept == [f"r{i:02d}" for i in range(40 - len(kept), 40)]  # the newest, in order, none missing
    assert [e.request_id for e in log.read()] == kept[-len(log.read()):]


def test_no_entry_is_lost_or_torn_when_writers_rotate_together(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"

    def write(worker: int) -> None:
        log = AuditLog(path, max_bytes=2_000, keep=1_000)  # each writer its own log object, as processes have
        for i in range(25):
            log.append(decision(), request_id=f"w{worker}-{i}", principal=READER, retrieved_at=NOW, query="q")

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    files = [path, *AuditLog(path, keep=1_000).rotated()]
    assert sorted(e["request_id"] for e in lines_of(files)) == sorted(f"w{w}-{i}" for w in range(4) for i in range(25))


def test_a_line_names_each_reason_and_page_once(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    entry = log.append(decision(chunks_per_page=20), request_id="r", principal=READER, retrieved_at=NOW, query="q")
    line = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    assert line.count("doc-a") == 1 and line.count("access-label-not-granted") == 1
    assert json.loads(line)["rejected"]["access-label-not-granted"]["doc-b"] == [f"b{i}" for i in range(20)]
    assert log.read() == [entry] and len(entry.rejected) == 40


def test_lines_written_before_grouping_still_read(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    old = {"request_id": "r", "principal": "p", "principal_labels": [], "retrieved_at": "2026-03-01T12:00:00Z",
           "query_sha256": "0" * 64, "admitted": [],
           "rejected": [{"record_id": "x", "doc_id": "d", "reason": "access-label-not-granted"}]}
    path.write_text(json.dumps(old) + "\n", encoding="utf-8")
    assert [(r.record_id, r.doc_id) for r in AuditLog(path).read()[0].rejected] == [("x", "d")]


def test_the_configuration_sets_the_rotation(make_engine: EngineFactory, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "page.md").write_text("---\naccess_labels: [eng]\ncitation_uri: https://docs.example.com/p\n---\n"
                                    "# Page\n\nRotate the signing keys every ninety days.\n", encoding="utf-8")
    engine = make_engine(gate={"audit_max_bytes": 400, "audit_keep": 1})
    engine.ingest([corpus])
    for i in range(6):
        engine.search_with_reasoning(f"rotate keys {i}", principal=Principal.of("p", ["eng"]))
    index = engine.config.index_dir
    assert (index / "audit.jsonl.1").exists() and not (index / "audit.jsonl.2").exists()
