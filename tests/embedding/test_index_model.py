"""An index remembers which model made its vectors. Another build of that model (the torch fp32 build of the
default int8 ONNX embedder) may query it; another model, even of the same dimension (here MiniLM with one
weight matrix scaled, built locally), can neither add vectors to it nor query it, and says why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evidex.embedding import SentenceTransformerEmbedder, default_model_dir
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine
from evidex.errors import StoreError
from evidex.pipeline import SearchRequest
from evidex.types import RetrievalMode
from tests.conftest import engine_config

pytest.importorskip("sentence_transformers")


def another_model(out: Path) -> Path:
    """The packaged MiniLM with one weight matrix scaled: a different model of the same dimension."""
    from safetensors.numpy import load_file, save_file

    shutil.copytree(default_model_dir(), out)
    tensors = load_file(out / "model.safetensors")
    name = next(n for n in sorted(tensors) if n.endswith("query.weight"))
    tensors[name] = tensors[name] * 1.5
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    return out


def cls_pooled(out: Path) -> Path:
    """The packaged MiniLM's very weights (linked), pooled by the CLS token instead of the mean."""
    import json
    import os

    shutil.copytree(default_model_dir(), out, copy_function=os.symlink)
    pooling = out / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.unlink()
    pooling.write_text(json.dumps({**config, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}))
    return out


def test_the_same_weights_pooled_otherwise_are_another_model(tmp_path: Path, embedder: Embedder) -> None:
    """Its vectors differ from the mean-pooled ones, so an index must not mix them; the mean-pooled id is unchanged
    (the ONNX default's, and any index's recorded before pooling was part of the id)."""
    cls = SentenceTransformerEmbedder(cls_pooled(tmp_path / "cls"), threads=2)
    assert cls.model_id == embedder.model_id + "+pooling:cls"
    assert SentenceTransformerEmbedder(default_model_dir(), threads=2).model_id == embedder.model_id
    text = "Alpha restarts nightly."
    mean, by_cls = embedder.embed_query(text).reshape(-1), cls.embed_query(text).reshape(-1)
    assert float(mean @ by_cls) < 0.99  # other vectors indeed


def test_another_build_may_query_an_index_and_another_model_may_not(tmp_path: Path, embedder: Embedder,
                                                                    cache_dir: Path) -> None:
    torch_build = SentenceTransformerEmbedder(default_model_dir(), threads=2)
    other = SentenceTransformerEmbedder(another_model(tmp_path / "other-model"), threads=2)
    assert torch_build.model_id == embedder.model_id and torch_build.fingerprint != embedder.fingerprint
    assert other.dim == embedder.dim and other.model_id != embedder.model_id
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Alpha\n\nAlpha restarts nightly.\n", encoding="utf-8")
    config = engine_config(tmp_path / "idx", cache_dir)
    with Engine.open(config, embedder=embedder) as built:
        built.ingest([corpus])
        assert built.stats()["embedding_model"] == embedder.model_id
    with Engine.open(config, embedder=torch_build) as same_model:
        assert [c.chunk.source for c in same_model.run(SearchRequest("when does alpha restart?")).context] == ["a.md"]
    (corpus / "b.md").write_text("# Beta\n\nBeta backs up hourly.\n", encoding="utf-8")
    with Engine.open(config, embedder=other) as different:
        batches = different.batches()
        with pytest.raises(StoreError, match=f"model {embedder.model_id}, and the configured embedder is "
                                             f"{other.model_id}"):
            different.ingest([corpus])
        assert different.batches() == batches
        with pytest.raises(StoreError, match="vectors of two models cannot be compared"):
            different.run(SearchRequest("when does alpha restart?"))
        # Plain BM25 search needs no query vector and still works (the pipeline embeds every question).
        assert [c.chunk.source for c in different.search("restarts", mode=RetrievalMode.BM25)] == ["a.md"]
    with Engine.open(config, embedder=torch_build) as same_model:  # another build of the model may add to it
        assert same_model.ingest([corpus]).added_chunks == 1
        assert same_model.run(SearchRequest("when does beta back up?")).context


def test_a_cached_evaluation_index_that_names_another_model_is_rebuilt(tmp_path: Path, embedder: Embedder) -> None:
    """Its cache key holds the embedder's fingerprint, so a mismatch can only be a model recorded under an
    older naming: reused, it would refuse every query."""
    import sqlite3

    from evidex.config import Config
    from evidex.evaluation.runner import open_eval_engine

    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Alpha\n\nAlpha restarts nightly.\n", encoding="utf-8")
    config = Config().replace(embedding={"cache_dir": str(tmp_path / "cache")})
    with open_eval_engine(config, [corpus], None, embedder=embedder) as engine:
        index = Path(engine.config.index.path) / "index.sqlite"
    with sqlite3.connect(index) as db:
        db.execute("UPDATE meta SET value='onnx-int8:old-name' WHERE key='embedding_model'")
    with open_eval_engine(config, [corpus], None, embedder=embedder) as engine:
        assert engine.store.ledger.embedding_model() == embedder.model_id
        assert [c.chunk.source for c in engine.run(SearchRequest("when does alpha restart?")).context] == ["a.md"]


def test_an_evaluation_index_is_rebuilt_when_the_ingest_code_changes(tmp_path: Path, embedder: Embedder,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed chunker evaluated on an index the old one built measures the old chunks: its cache key holds
    a hash of the ingest code, so the same code reuses the index and changed code builds its own."""
    from evidex.config import Config
    from evidex.evaluation import runner
    from evidex.ingest import run as ingest_run

    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Alpha\n\nAlpha restarts nightly.\n", encoding="utf-8")
    config = Config().replace(embedding={"cache_dir": str(tmp_path / "cache")})
    paths = []
    for _ in range(2):
        with runner.open_eval_engine(config, [corpus], None, embedder=embedder) as engine:
            paths.append(engine.config.index.path)
    monkeypatch.setattr(ingest_run, "ingest_code_fingerprint", lambda: "a-changed-chunker")
    with runner.open_eval_engine(config, [corpus], None, embedder=embedder) as engine:
        paths.append(engine.config.index.path)
    assert paths[0] == paths[1] != paths[2]


def test_only_the_most_recently_used_evaluation_indexes_are_kept(tmp_path: Path, embedder: Embedder,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Every corpus, configuration or chunker change builds another evaluation index (about 25 MB for k8s);
    the cache had grown to 84 of them (2.1 GB). Reusing an index counts as a use; one still being built is
    never removed."""
    from evidex.config import Config
    from evidex.evaluation import runner

    monkeypatch.setattr(runner, "KEEP_EVAL_INDEXES", 2)
    config = Config().replace(embedding={"cache_dir": str(tmp_path / "cache")})
    corpora = []
    for name in ("alpha", "beta", "gamma"):
        corpus = tmp_path / name
        corpus.mkdir()
        (corpus / "a.md").write_text(f"# {name}\n\n{name} restarts nightly.\n", encoding="utf-8")
        corpora.append(corpus)
    building = config.cache_dir / "eval" / "still-building"
    building.mkdir(parents=True)

    def index_of(corpus: Path) -> Path:
        with runner.open_eval_engine(config, [corpus], None, embedder=embedder) as engine:
            return Path(engine.config.index.path)

    alpha, beta = index_of(corpora[0]), index_of(corpora[1])
    assert index_of(corpora[0]) == alpha  # reused: now the most recent
    gamma = index_of(corpora[2])
    assert sorted(p.name for p in (config.cache_dir / "eval").iterdir()) == sorted(
        [alpha.name, gamma.name, "still-building"])
    assert not beta.exists()


@pytest.mark.parametrize(("config", "pooling"), [
    ({}, "mean"),  # no pooling config: sentence-transformers' default
    ({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}, "mean"),
    ({"pooling_mode_cls_token": True}, "cls"),
    ({"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}, "max+mean"),
    ({"pooling_mode_mean_sqrt_len_tokens": True}, "mean_sqrt_len"),
])
def test_pooling_of_a_model_directory(tmp_path: Path, config: dict[str, bool], pooling: str) -> None:
    import json

    from evidex.embedding.onnx_export import model_id_of, pooling_of

    if config:
        (tmp_path / "1_Pooling").mkdir()
        (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 8, **config}))
    assert pooling_of(tmp_path) == pooling
    named = "" if pooling == "mean" else f"+pooling:{pooling}"
    assert model_id_of("ab" * 32, pooling) == "weights:" + "ab" * 8 + named
