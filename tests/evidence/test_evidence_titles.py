"""Title conventions read from the corpus (a name and its qualifier only where the titles are written so), and
the deeper ranking an evidence answer is read on with past its context (new pages first)."""

from __future__ import annotations

from pathlib import Path

from evidence_support import build_store, cand, ids, make_chunk

from evidex.evidence.titles import PLAIN, QUALIFIED, TitleConventions, qualified_share, read_convention
from evidex.pipeline.search import deeper_ranking

ENCYCLOPAEDIA = ["Mercury (planet)", "Mercury (element)", "Mercury, Nevada", "Venus", "Mars", "Jupiter"]
HANDBOOK = ["Configure Health Checks, Retries and Timeouts", "Message Queue Protocol (MQP)", "Deploy a Service",
            "Rotate Keys", "Scale Workers", "Back Up a Database", "Restore a Database", "Read Logs", "Trace Calls",
            "Write Alerts", "Page Someone", "Close an Incident", "Rotate Keys"]


def test_the_share_counts_distinct_titles_ending_in_a_qualifier() -> None:
    assert qualified_share(ENCYCLOPAEDIA) == 2 / 6  # "Mercury, Nevada" is qualified too, but not by this form
    assert qualified_share(HANDBOOK) == 1 / 12  # "Rotate Keys" counts once
    assert qualified_share(["", "Title (with) more"]) == 0.0
    assert qualified_share([]) == 0.0


def test_the_convention_is_read_from_the_share() -> None:
    assert read_convention(ENCYCLOPAEDIA, 0.1) is QUALIFIED
    assert read_convention(HANDBOOK, 0.1) is PLAIN
    assert read_convention(HANDBOOK, 0.05) is QUALIFIED  # 1 in 12 passes a lower bar
    assert read_convention(HANDBOOK, 0) is QUALIFIED and read_convention(ENCYCLOPAEDIA, 1.5) is PLAIN


def test_a_bare_title_is_cut_only_where_titles_are_qualified() -> None:
    assert QUALIFIED.bare("Mercury (planet)") == "Mercury" and QUALIFIED.bare("Mercury, Nevada") == "Mercury"
    assert PLAIN.bare("Configure Health Checks, Retries and Timeouts") == \
        "Configure Health Checks, Retries and Timeouts"


def test_the_convention_of_a_store_follows_its_snapshot(tmp_path: Path) -> None:
    store = build_store(tmp_path / "idx", [make_chunk(t.lower().replace(" ", "-"), "text", title=t)
                                           for t in HANDBOOK[:4]])
    try:
        conventions = TitleConventions()
        assert conventions.of(store, 0.2) is QUALIFIED  # 1 of 4 distinct titles
        assert conventions.of(store, 0.3) is PLAIN
    finally:
        store.close()


def test_past_the_context_each_new_page_comes_before_more_of_a_page_read() -> None:
    a0, a1 = make_chunk("a0", doc_id="a"), make_chunk("a1", doc_id="a", chunk_index=1)
    b0, b1 = make_chunk("b0", doc_id="b"), make_chunk("b1", doc_id="b", chunk_index=1)
    c0 = make_chunk("c0", doc_id="c")
    admitted = [cand(a0, 0.9), cand(a1, 0.8), cand(b0, 0.7), cand(b1, 0.6), cand(c0, 0.5)]
    assert ids(deeper_ranking([cand(a0, 0.9)], admitted)) == ["b0", "c0", "a1", "b1"]
    assert ids(deeper_ranking([], admitted)) == ["a0", "b0", "c0", "a1", "b1"]
