"""Bad input: documents that cannot load become dead letters (and can be retried), a bad overlay stops the
run before anything is written, and configuration mistakes are errors naming the key."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evidex.config import Config, FamilyRule, load_config
from evidex.engine import Engine
from evidex.errors import ConfigError, IngestError
from evidex.types import FusionMode, RetrievalMode

EngineFactory = Callable[..., Engine]
CorpusWriter = Callable[..., Path]

JSONL_GOOD = '{"doc_id": "ok1", "text": "jsonl line with quokkaword"}'
JSONL_BAD_JSON = '{"doc_id": "bad-json", "text": '
JSONL_NO_TEXT = '{"doc_id": "no-text", "title": "Only a title"}'


def jsonl(*lines: str) -> str:
    return "".join(f"{line}\n" for line in lines)


BAD_FILES: dict[str, str | bytes] = {
    "good.md": "# Good\n\nA good document about wombatword.\n",
    "broken.md": "---\ntitle: Broken\nlabels: [unclosed\nowner: x\n---\nBroken body with koalaword.\n",
    "unclosed.md": "---\ntitle: never closed\n\nBody.\n",
    "latin.md": "caf\xe9 latin-1 text with emuword\n".encode("latin-1"),
    "blob.txt": b"binary\x00\x01\x02 data",
    "corpus.jsonl": jsonl(JSONL_GOOD, JSONL_BAD_JSON, JSONL_NO_TEXT),
}


def bm25(engine: Engine, query: str) -> list[str]:
    return [c.chunk.source for c in engine.search(query, k=10, mode=RetrievalMode.BM25)]


def letters_by_source(engine: Engine) -> dict[str, tuple[str, str, int]]:
    return {d.source: (d.location, d.reason, d.attempts) for d in engine.dead_letters()}


# ---- dead letters ----------------------------------------------------------------------------------------
def test_each_bad_document_becomes_a_dead_letter_and_the_good_ones_land(
        make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    corpus = write_corpus(BAD_FILES)
    engine = make_engine()
    report = engine.ingest([corpus])
    assert report.documents == 2  # good.md and the good JSONL line
    got = letters_by_source(engine)
    assert set(got) == {"broken.md", "unclosed.md", "latin.md", "blob.txt", "corpus.jsonl:2", "corpus.jsonl:3"}
    assert got["broken.md"][0] == f"{corpus}/broken.md:4"  # the YAML error is noticed on file line 4
    assert got["broken.md"][1].startswith("invalid front matter")
    assert got["unclosed.md"][:2] == (f"{corpus}/unclosed.md:1", "front matter opened with '---' is never closed")
    assert got["latin.md"][:2] == (f"{corpus}/latin.md", "not UTF-8 text (byte 3)")
    assert got["blob.txt"][:2] == (f"{corpus}/blob.txt", "binary content (NUL bytes)")
    assert got["corpus.jsonl:2"][0] == f"{corpus}/corpus.jsonl:2"
    assert got["corpus.jsonl:2"][1].startswith("invalid JSON")
    assert got["corpus.jsonl:3"][:2] == (f"{corpus}/corpus.jsonl:3", "missing or empty 'text'")
    assert all(attempts == 1 for _, _, attempts in got.values())
    assert {d.source for d in report.dead_letters} == set(got)
    assert {d.batch_id for d in engine.dead_letters()} == {report.batch_id}
    assert bm25(engine, "wombatword") == ["good.md"]
    assert bm25(engine, "quokkaword") == ["ok1"]
    assert bm25(engine, "koalaword emuword") == []
    (info,) = engine.batches()
    assert (info.status, info.dead_letters) == ("committed", 6)


def test_retry_loads_the_fixed_files_and_keeps_the_broken_ones(make_engine: EngineFactory,
                                                               write_corpus: CorpusWriter) -> None:
    corpus = write_corpus(BAD_FILES)
    engine = make_engine()
    engine.ingest([corpus])
    # Fix three of them; the JSONL file keeps its line numbers.
    (corpus / "broken.md").write_text("---\ntitle: Broken\nowner: x\n---\nFixed body with koalaword.\n",
                                      encoding="utf-8")
    (corpus / "latin.md").write_text("café now UTF-8 with emuword\n", encoding="utf-8")
    fixed_line = '{"doc_id": "bad-json", "text": "repaired line with dingoword"}'
    (corpus / "corpus.jsonl").write_text(jsonl(JSONL_GOOD, fixed_line, JSONL_NO_TEXT), encoding="utf-8")
    report = engine.retry_dead_letters()
    assert report.documents == 3
    assert {d.source for d in report.dead_letters} == {"unclosed.md", "blob.txt", "corpus.jsonl:3"}
    got = letters_by_source(engine)
    assert {s: a for s, (_, _, a) in got.items()} == {"unclosed.md": 2, "blob.txt": 2, "corpus.jsonl:3": 2}
    assert bm25(engine, "koalaword") == ["broken.md"]
    assert bm25(engine, "emuword") == ["latin.md"]
    assert bm25(engine, "dingoword") == ["bad-json"]
    assert bm25(engine, "wombatword") == ["good.md"]  # the good documents are untouched
    assert engine.stats()["documents"] == 5
    # Fix the rest: the next retry clears every letter.
    (corpus / "unclosed.md").write_text("---\ntitle: closed\n---\nBody.\n", encoding="utf-8")
    (corpus / "blob.txt").write_text("now text", encoding="utf-8")
    (corpus / "corpus.jsonl").write_text(
        jsonl(JSONL_GOOD, fixed_line, '{"doc_id": "no-text", "text": "has text now"}'), encoding="utf-8")
    report = engine.retry_dead_letters()
    assert (report.documents, report.dead_letters) == (3, ())
    assert engine.dead_letters() == []
    assert engine.stats()["documents"] == 8


def test_reingesting_a_fixed_file_resolves_its_dead_letter(make_engine: EngineFactory,
                                                           write_corpus: CorpusWriter) -> None:
    corpus = write_corpus(BAD_FILES)
    engine = make_engine()
    engine.ingest([corpus])
    (corpus / "latin.md").write_text("café now UTF-8 with emuword\n", encoding="utf-8")
    report = engine.ingest([corpus])
    assert report.unchanged_documents == 2
    assert "latin.md" not in letters_by_source(engine)
    assert letters_by_source(engine)["blob.txt"][2] == 2


def test_retry_with_nothing_to_retry_writes_nothing(make_engine: EngineFactory,
                                                    write_corpus: CorpusWriter) -> None:
    engine = make_engine()
    engine.ingest([write_corpus({"good.md": "# Good\n\nFine.\n"})])
    report = engine.retry_dead_letters()
    assert (report.batch_id, report.documents) == ("", 0)
    assert len(engine.batches()) == 1


def test_reingesting_a_fixed_jsonl_line_resolves_its_dead_letter(make_engine: EngineFactory,
                                                                 write_corpus: CorpusWriter) -> None:
    corpus = write_corpus({"corpus.jsonl": jsonl(JSONL_GOOD, JSONL_NO_TEXT)})
    engine = make_engine()
    engine.ingest([corpus])
    assert list(letters_by_source(engine)) == ["corpus.jsonl:2"]
    (corpus / "corpus.jsonl").write_text(JSONL_GOOD + '\n{"doc_id": "no-text", "text": "now text"}\n',
                                         encoding="utf-8")
    engine.ingest([corpus])
    assert engine.dead_letters() == []


@pytest.mark.parametrize("how", ["ingest", "sync", "retry"])
@pytest.mark.parametrize("left", ["", "\n"], ids=["line deleted", "line blanked"])
def test_a_removed_jsonl_line_resolves_its_dead_letter(make_engine: EngineFactory, write_corpus: CorpusWriter,
                                                       how: str, left: str) -> None:
    """Its letter had stayed for good: a retry recorded it again ("the line is gone from its file", one more
    attempt each time) and an ingest of the file never settled it. Nothing is left to load, as for a deleted file."""
    corpus = write_corpus({"c.jsonl": jsonl(JSONL_GOOD, JSONL_BAD_JSON)})
    engine = make_engine()
    engine.ingest([corpus])
    assert list(letters_by_source(engine)) == ["c.jsonl:2"]
    (corpus / "c.jsonl").write_text(jsonl(JSONL_GOOD) + left, encoding="utf-8")
    report = engine.retry_dead_letters() if how == "retry" else engine.ingest([corpus], sync=how == "sync")
    assert report.resolved_dead_letters == ("c.jsonl:2",) and report.dead_letters == ()
    assert engine.dead_letters() == [] and bm25(engine, "quokkaword") == ["ok1"]


def test_a_jsonl_line_letter_stays_while_its_folder_cannot_be_listed(
        make_engine: EngineFactory, write_corpus: CorpusWriter, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ingest settles the letters of a JSONL file's lines only when it read the file."""
    corpus = write_corpus({"good.md": BAD_FILES["good.md"], "sub/c.jsonl": jsonl(JSONL_GOOD, JSONL_BAD_JSON)})
    engine = make_engine()
    engine.ingest([corpus])
    listing = os.scandir

    def refuse(path: Any = ".") -> Any:  # the test runs as root, which may list anything
        if Path(path) == corpus / "sub":
            raise PermissionError(13, "Permission denied", str(path))
        return listing(path)

    monkeypatch.setattr(os, "scandir", refuse)
    report = engine.ingest([corpus])
    assert report.resolved_dead_letters == ()
    assert set(letters_by_source(engine)) == {"sub/", "sub/c.jsonl:2"}


def test_a_duplicate_doc_id_dead_letter_names_its_file_and_line(make_engine: EngineFactory,
                                                               write_corpus: CorpusWriter) -> None:
    corpus = write_corpus({"x.jsonl": '{"doc_id": "z", "text": "one"}\n{"doc_id": "z", "text": "two"}\n'})
    engine = make_engine()
    engine.ingest([corpus])
    (letter,) = engine.dead_letters()
    assert letter.reason == "duplicate doc_id 'z' in this batch"
    assert letter.location == f"{corpus}/x.jsonl:2"



def test_retrying_a_duplicate_never_replaces_the_document_that_was_kept(make_engine: EngineFactory,
                                                                        write_corpus: CorpusWriter) -> None:
    """On retry the duplicate is alone in its batch, so it is no longer a duplicate *there*: it had replaced
    the kept document. It stays a dead letter while a live document has its id."""
    corpus = write_corpus({"x.jsonl": '{"doc_id": "z", "text": "kept quollword"}\n{"doc_id": "z", "text": "dup"}\n',
                           "a/p.md": "# P\n\nfrom a numbatword\n", "b/p.md": "# P\n\nfrom b\n"})
    engine = make_engine()
    engine.ingest([corpus / "x.jsonl"])
    engine.ingest([corpus / "a", corpus / "b"])  # the same relative path twice in one batch
    assert len(engine.dead_letters()) == 2
    engine.retry_dead_letters()
    assert bm25(engine, "quollword") == ["z"] and bm25(engine, "numbatword") == ["p.md"]
    letters = engine.dead_letters()
    assert len(letters) == 2 and all("a live document already has this id" in d.reason for d in letters)
    assert all(d.attempts == 2 for d in letters)


def test_jsonl_files_of_the_same_name_in_two_folders_keep_their_own_dead_letters(
        make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    corpus = write_corpus({"a/docs.jsonl": "[1]\n", "b/docs.jsonl": "{bad\n"})
    engine = make_engine()
    engine.ingest([corpus])
    assert set(letters_by_source(engine)) == {"a/docs.jsonl:1", "b/docs.jsonl:1"}


def test_a_bad_utf8_line_fails_alone(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    good = b'{"doc_id": "g", "text": "wallabyword"}\n'
    corpus = write_corpus({"c.jsonl": good + b'{"doc_id": "b", "text": "\xff"}\n' + good.replace(b'"g"', b'"h"')})
    engine = make_engine()
    report = engine.ingest([corpus])
    assert report.documents == 2 and sorted(bm25(engine, "wallabyword")) == ["g", "h"]
    assert letters_by_source(engine)["c.jsonl:2"][1].startswith("not UTF-8 text")
    assert [d.source for d in engine.retry_dead_letters().dead_letters] == ["c.jsonl:2"]  # retry: same letter


@pytest.mark.parametrize("front", ["published_at: 2024-13-45", "published_at: 0001-01-01T00:00:00+05:00",
                                   "expires_at: 9999-12-31T23:00:00-05:00"])
def test_an_impossible_date_is_a_dead_letter_not_a_crash(make_engine: EngineFactory, write_corpus: CorpusWriter,
                                                         front: str) -> None:
    corpus = write_corpus({"bad.md": f"---\n{front}\n---\n# Bad\n\ntext\n", "ok.md": "# Ok\n\nplatypusword\n"})
    engine = make_engine()
    engine.ingest([corpus])
    assert bm25(engine, "platypusword") == ["ok.md"]
    assert set(letters_by_source(engine)) == {"bad.md"}


def test_a_year_before_1000_round_trips(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    """The timestamp is written with a four-digit year; '999-...' could not be read back, and every search
    failed until the batch was rolled back."""
    corpus = write_corpus({"old.md": "---\npublished_at: 0999-05-01T00:00:00Z\n---\n# Old\n\nechidnaword\n"})
    engine = make_engine()
    engine.ingest([corpus])
    (hit,) = engine.search("echidnaword", k=1, mode=RetrievalMode.HYBRID)
    assert hit.chunk.provenance.published_at is not None and hit.chunk.provenance.published_at.year == 999


def test_a_byte_order_mark_does_not_hide_front_matter(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    """With the BOM in front, '---' was not at the start: the provenance (expiry, labels) was dropped and an
    expired page passed the gate."""
    page = "---\nexpires_at: 2020-01-01T00:00:00Z\naccess_labels: [ops]\n---\n# Runbook\n\nbilbyword\n"
    corpus = write_corpus({"bom.md": b"\xef\xbb\xbf" + page.encode(), "b.jsonl": b"\xef\xbb\xbf" +
                           b'{"doc_id": "j", "text": "bandicootword"}\n'})
    engine = make_engine()
    engine.ingest([corpus])
    (hit,) = engine.search("bilbyword", k=1, mode=RetrievalMode.BM25)
    assert hit.chunk.provenance.access_labels == ("ops",) and hit.chunk.provenance.expires_at is not None
    assert "---" not in hit.chunk.text
    assert bm25(engine, "bandicootword") == ["j"] and engine.dead_letters() == []


def test_a_document_emptied_on_disk_stops_answering_until_rolled_back(
        make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    corpus = write_corpus({"b.md": "---\ntitle: B\n---\n# B\n\nwombatword text\n"})
    engine = make_engine()
    engine.ingest([corpus])
    (corpus / "b.md").write_text("---\ntitle: B\n---\n", encoding="utf-8")  # front matter only now
    report = engine.ingest([corpus])
    assert report.empty_documents == 1 and report.replaced_documents == 1
    assert bm25(engine, "wombatword") == []
    engine.rollback()
    assert bm25(engine, "wombatword") == ["b.md"]


def test_html_without_a_closing_head_keeps_its_body(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    """</head> is optional in HTML5: the body had been skipped as part of the head."""
    corpus = write_corpus({"p.html": "<html><head><title>T</title><body><h1>Real</h1><p>dingoword body</p>"})
    engine = make_engine()
    engine.ingest([corpus])
    (hit,) = engine.search("dingoword", k=1, mode=RetrievalMode.BM25)
    assert hit.chunk.title == "T" and "# Real" in hit.chunk.text

# ---- metadata overlay ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad_line", [
    '{"source": "good.md", "owner": ',  # invalid JSON
    '["good.md"]',  # not an object
    '{"owner": "x"}',  # no source
    '{"source": "good.md", "access_labels": 5}',  # ill-typed field
    '{"source": "good.md", "published_at": "last tuesday"}',
    '{"source": "a.md", "owner": "dup"}',  # duplicate entry
    '{"source": "good.md", "access_label": ["security-team"]}',  # a misspelled field: the restriction was dropped
    '{"source": "good.md", "citationURI": "https://kb.example/good"}',
])
def test_a_malformed_overlay_line_stops_the_run_before_anything_is_written(
        make_engine: EngineFactory, write_corpus: CorpusWriter, tmp_path: Path, bad_line: str) -> None:
    corpus = write_corpus({"good.md": "# Good\n\nFine.\n", "a.md": "# A\n\nText.\n"})
    overlay = tmp_path / "overlay.jsonl"
    overlay.write_text(f'{{"source": "a.md", "owner": "team"}}\n\n{bad_line}\n', encoding="utf-8")
    engine = make_engine()
    with pytest.raises(IngestError) as caught:
        engine.ingest([corpus], metadata=overlay)
    assert caught.value.location == f"{overlay}:3"
    assert str(caught.value).startswith(f"{overlay}:3: ")
    assert engine.batches() == []
    assert engine.stats()["chunks"] == 0
    assert engine.dead_letters() == []


# ---- configuration ---------------------------------------------------------------------------------------
def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evidex.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("toml", "names"), [
    ("[retrievl]\nfusion = 'rrf'\n", "retrievl"),
    ("[retrieval]\nfusoin = 'rrf'\n", "retrieval.fusoin"),
    ("[chunking]\nmax_chars = 'big'\n", "chunking.max_chars"),
    ("[retrieval]\nrrf_k = true\n", "retrieval.rrf_k"),
    ("[retrieval]\ndense_weight = 'heavy'\n", "retrieval.dense_weight"),
    ("[retrieval]\nfusion = 'max'\n", "retrieval.fusion"),
    ("[retrieval]\ndense_weight = -1.0\n", "retrieval.dense_weight"),
    ("[retrieval]\ndense_weight = 0.0\nsparse_weight = 0.0\n", "retrieval.dense_weight"),
    ("[chunking]\nmax_chars = 300\noverlap_chars = 150\n", "chunking.overlap_chars"),
    ("[embedding]\nbackend = 'tensorflow'\n", "embedding.backend"),
    ("[embedding]\nquery_cache = -1\n", "embedding.query_cache"),
    ("[embedding]\nquery_threads = 0\n", "embedding.query_threads"),
    ("[embedding]\nthreads = -1\n", "embedding.threads"),
    ("[retrieval]\ntitle_weight = 0\n", "retrieval.title_weight"),
    ("[evidence]\nbridge_context_names = -1\n", "evidence.bridge_context_names"),
    ("[evidence]\nname_lookups = -2\n", "evidence.name_lookups"),
    ("[embedding]\nbackend = 'torch'\ndevice = 'gpu0'\n", "embedding.device"),
    ("[embedding]\ndevice = 'cuda'\n", r"embedding\.device.*needs backend = 'torch'"),
    ("[evidence]\ncross_encoder_device = 'tpu'\n", "evidence.cross_encoder_device"),
    ("[index]\nbackend = 'postgres'\n", "index.backend"),
    ("[[families]]\npattern = '(unclosed'\nname = 'x'\n", r"families\[0\]\.pattern"),
    ("[[families]]\npattern = 'ok'\nname = 'x'\n[[families]]\npattern = 'a'\nname = 'y'\nextra = 1\n",
     r"families\[1\]"),
    ("[retrieval\nfusion = 'rrf'\n", "invalid TOML"),
])
def test_config_errors_name_the_key(tmp_path: Path, toml: str, names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        load_config(write_config(tmp_path, toml), env={})


def test_bad_fusion_mode_lists_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="choose one of: rrf, weighted"):
        load_config(write_config(tmp_path, "[retrieval]\nfusion = 'max'\n"), env={})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml", env={})


@pytest.mark.parametrize(("key", "value", "names"), [
    ("EVIDEX_RETRIEVAL_FUSION", "bogus", "retrieval.fusion"),
    ("EVIDEX_RETRIEVAL_NOPE", "1", "retrieval.nope"),
    ("EVIDEX_CHUNKING_MAX_CHARS", "many", "chunking.max_chars"),
])
def test_environment_overrides_are_checked_like_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         key: str, value: str, names: str) -> None:
    monkeypatch.chdir(tmp_path)  # no ./evidex.toml
    with pytest.raises(ConfigError, match=names):
        load_config(None, env={key: value})


def test_environment_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[retrieval]\nfusion = 'weighted'\n[chunking]\nmax_chars = 800\n"
                                  "[index]\npath = 'idx'\n[[families]]\npattern = '^deploy/'\nname = 'deploy'\n")
    config = load_config(path, env={"EVIDEX_RETRIEVAL_FUSION": "RRF", "EVIDEX_CHUNKING_MAX_CHARS": "500",
                                    "EVIDEX_TEST_CACHE": "/elsewhere", "HOME": "/x"})
    assert config.retrieval.fusion is FusionMode.RRF and config.fusion_mode.value == "rrf"  # read as its mode
    assert config.chunking.max_chars == 500
    assert config.index_dir == tmp_path / "idx"  # relative to the config file
    assert config.families == (FamilyRule("^deploy/", "deploy"),)


def test_replace_checks_keys_and_values() -> None:
    with pytest.raises(ConfigError, match=r"retrieval\.fusoin"):
        Config().replace(retrieval={"fusoin": "rrf"})
    with pytest.raises(ConfigError, match=r"retrieval\.fusion"):
        Config().replace(retrieval={"fusion": "bogus"})


@pytest.mark.parametrize("change", [
    {"retrieval": {"fusion": "rrf"}}, {"retrieval": {"dense_weight": 0.7}}, {"retrieval": {"rrf_k": 10}},
    {"chunking": {"max_chars": 800}}, {"embedding": {"model_dir": "/models/other"}},
    {"embedding": {"backend": "torch"}}, {"families": (FamilyRule("^a/", "a"),)},
])
def test_config_hash_changes_with_result_relevant_keys(change: dict[str, object]) -> None:
    assert Config().replace(**change).hash() != Config().hash()


@pytest.mark.parametrize("change", [
    {"index": {"path": "/somewhere/else"}}, {"embedding": {"cache_dir": "/tmp/cache"}},
    {"embedding": {"threads": 3}}, {"root": "/other/root"},
])
def test_config_hash_ignores_paths_and_caches(change: dict[str, object]) -> None:
    assert Config().replace(**change).hash() == Config().hash()


def test_config_hash_is_stable_and_short() -> None:
    assert Config().hash() == Config().hash()
    assert len(Config().hash()) == 16
    assert json.dumps(Config().to_dict())  # serialisable


def test_re_ingesting_a_folder_with_a_known_broken_file_makes_no_batch(make_engine: EngineFactory,
                                                                       write_corpus: CorpusWriter) -> None:
    """The broken file's failure is already on record: a re-run that changes nothing else made a batch of it,
    and `rollback` then undid that no-op instead of the last real change."""
    corpus = write_corpus({"good.md": "# Good\n\nfirst wombatword\n", "broken.md": "---\ntitle: [x\n---\nbody\n"})
    engine = make_engine()
    engine.ingest([corpus])
    (corpus / "good.md").write_text("# Good\n\nsecond quokkaword\n", encoding="utf-8")
    changed = engine.ingest([corpus])
    again = engine.ingest([corpus])
    assert changed.batch_id and again.batch_id == "" and [d.source for d in again.dead_letters] == ["broken.md"]
    assert engine.rollback().batch_id == changed.batch_id
    assert bm25(engine, "wombatword") == ["good.md"]
    (corpus / "broken.md").write_text("---\ntitle: [x, y]\n---\nbody\n", encoding="utf-8")
    assert engine.ingest([corpus]).batch_id  # a failure that is resolved still makes its batch
