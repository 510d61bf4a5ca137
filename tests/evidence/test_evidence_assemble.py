"""Assembly: a selected chunk brings the neighbour that continues it (one section split in two, a numbered
step list that goes on), within the budget, and the result says which pairs were joined."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

from evidence_support import build_store, cand, constant_encoder, ids, make_chunk

from evidex.admission.gate import AdmissionGate, Principal
from evidex.config import ChunkingConfig, Config
from evidex.evidence.assemble import continues, expand_neighbours, group_by_source
from evidex.ingest.run import chunk_document
from evidex.pipeline import PipelineParts, SearchRequest, run_search
from evidex.types import Chunk, Document, RetrievalMode

STEPS_1_2 = "1. Drain the node.\n2. Snapshot the volume.\n"
STEPS_3_4 = "3. Restore the snapshot.\n4. Uncordon the node.\n"


def _pair(first_text: str, second_text: str, *, anchors: tuple[str | None, str | None] = ("restore", "restore"),
          headings: tuple[str, str] = ("Restore", "Restore")) -> tuple[Chunk, Chunk]:
    first = make_chunk("p0", first_text, doc_id="D", chunk_index=0, anchor=anchors[0], heading=headings[0])
    second = make_chunk("p1", second_text, doc_id="D", chunk_index=1, anchor=anchors[1], heading=headings[1])
    return first, second


def test_same_section_split_continues() -> None:
    assert continues(*_pair("first half of the section", "second half of the section"))


def test_different_sections_do_not_continue() -> None:
    assert not continues(*_pair("about backups", "about restores", anchors=("backups", "restores"),
                                headings=("Backups", "Restores")))


def test_headingless_pieces_with_the_same_anchor_do_not_continue_by_section() -> None:
    assert not continues(*_pair("preamble one", "preamble two", anchors=("char=0,10", "char=0,10"), headings=("", "")))


def test_numbered_steps_continue_across_sections() -> None:
    first, second = _pair(STEPS_1_2, STEPS_3_4, anchors=("a", "b"), headings=("A", "B"))
    assert continues(first, second)
    first, gap = _pair(STEPS_1_2, "5. Close the ticket.\n", anchors=("a", "b"), headings=("A", "B"))
    assert not continues(first, gap)


def test_only_the_next_chunk_of_the_same_document_continues() -> None:
    first, second = _pair("first half", "second half")
    other_doc = make_chunk("x1", "second half", doc_id="E", chunk_index=1, anchor="restore", heading="Restore")
    skipped = make_chunk("p2", "later", doc_id="D", chunk_index=2, anchor="restore", heading="Restore")
    assert not continues(first, other_doc)
    assert not continues(first, skipped)
    assert not continues(second, first)  # order matters


def test_expand_adds_the_following_and_the_preceding_neighbour() -> None:
    c0 = make_chunk("c0", "part one", doc_id="D", chunk_index=0, anchor="s", heading="S")
    c1 = make_chunk("c1", "part two", doc_id="D", chunk_index=1, anchor="s", heading="S")
    c2 = make_chunk("c2", "part three", doc_id="D", chunk_index=2, anchor="s", heading="S")
    unrelated = make_chunk("u", "elsewhere", doc_id="D", chunk_index=3, anchor="t", heading="T")
    pool = [cand(c0, 0.3), cand(c1, 0.9), cand(c2, 0.2), cand(unrelated, 0.1)]
    assembly = expand_neighbours([cand(c1, 0.9)], pool, budget=5)
    assert ids(assembly.chunks) == ["c1", "c2", "c0"]
    assert assembly.expanded == (("c1", "c2"), ("c1", "c0"))


def test_expand_respects_the_budget() -> None:
    c0 = make_chunk("c0", "part one", doc_id="D", chunk_index=0, anchor="s", heading="S")
    c1 = make_chunk("c1", "part two", doc_id="D", chunk_index=1, anchor="s", heading="S")
    c2 = make_chunk("c2", "part three", doc_id="D", chunk_index=2, anchor="s", heading="S")
    pool = [cand(c0, 0.3), cand(c1, 0.9), cand(c2, 0.2)]
    assert ids(expand_neighbours([cand(c1, 0.9)], pool, budget=1).chunks) == ["c1"]
    two = expand_neighbours([cand(c1, 0.9)], pool, budget=2)
    assert ids(two.chunks) == ["c1", "c2"] and two.expanded == (("c1", "c2"),)


def test_expand_never_adds_what_is_not_in_the_pool_or_already_chosen() -> None:
    c0 = make_chunk("c0", "part one", doc_id="D", chunk_index=0, anchor="s", heading="S")
    c1 = make_chunk("c1", "part two", doc_id="D", chunk_index=1, anchor="s", heading="S")
    assert expand_neighbours([cand(c0, 0.5)], [cand(c0, 0.5)], budget=5).expanded == ()  # c1 not admitted
    both = expand_neighbours([cand(c0, 0.5), cand(c1, 0.4)], [cand(c0, 0.5), cand(c1, 0.4)], budget=5)
    assert ids(both.chunks) == ["c0", "c1"] and both.expanded == ()


def test_real_chunker_pieces_of_one_long_section_are_joined() -> None:
    body = " ".join(f"Sentence {i} explains one more detail of restoring a volume." for i in range(40))
    doc = Document(doc_id="ops/restore.md", source="ops/restore.md", title="Restore",
                   text=f"# Restore\n\n## Restoring a volume\n\n{body}\n\n## Afterwards\n\nClose the ticket.\n",
                   fmt="markdown")
    chunks = chunk_document(doc, ChunkingConfig(max_chars=400, overlap_chars=50, min_chars=100), datetime.now(UTC))
    section = [c for c in chunks if c.citation_anchor == "restoring-a-volume"]
    assert len(section) >= 3
    assert all(continues(a, b) for a, b in itertools.pairwise(section))
    last = chunks[-1]
    assert last.citation_anchor == "afterwards" and not continues(section[-1], last)
    pool = [cand(c, 0.5) for c in chunks]
    assembly = expand_neighbours([cand(section[1], 0.5)], pool, budget=3)
    assert ids(assembly.chunks) == [section[1].record_id, section[2].record_id, section[0].record_id]


def test_group_by_source_keeps_document_order_within_a_source() -> None:
    a1 = cand(make_chunk("a1", doc_id="A", chunk_index=1, source="a.md"), 0.9)
    b0 = cand(make_chunk("b0", doc_id="B", chunk_index=0, source="b.md"), 0.8)
    a0 = cand(make_chunk("a0", doc_id="A", chunk_index=0, source="a.md"), 0.1)
    groups = group_by_source([a1, b0, a0])
    assert [ids(g) for g in groups] == [["a0", "a1"], ["b0"]]


def test_the_pipeline_never_expands_back_what_grading_removed(tmp_path: Path) -> None:
    """'notes' continues the section of the best chunk ('rotate') but is noise for the question: grading
    removes it from the selection, and expansion must not put it back as the best chunk's neighbour."""
    chunks = [make_chunk("rotate", "rotate the transit key with the rotate command then rewrap rows",
                         doc_id="keys", chunk_index=0, heading="Rotation", anchor="rotation"),
              make_chunk("notes", "lunch menu soup salad and the transit bus timetable",
                         doc_id="keys", chunk_index=1, heading="Rotation", anchor="rotation"),
              *(make_chunk(f"other-{i}", f"rotate key schedule number {i} for the transit service")
                for i in range(4))]
    store = build_store(tmp_path / "idx", chunks)
    try:
        parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate())
        outcome = run_search(parts, SearchRequest("how do I rotate the transit key and rewrap rows?", k=6,
                                                  principal=Principal.of("p", ["public"]),
                                                  retrieved_at=datetime(2026, 1, 1, tzinfo=UTC),
                                                  mode=RetrievalMode.BM25))
        assert outcome.graded is not None and "notes" in outcome.graded.removed  # the case is live
        assert "notes" not in [c.chunk.record_id for c in outcome.context]
        assert ("rotate", "notes") not in outcome.expanded
        assert all(c.chunk.record_id in outcome.graded.grades for c in outcome.context)  # every chunk graded
    finally:
        store.close()
