"""The embedding cache on disk: the row layout (and the rewrite of an earlier evidex's), and pruning the
vectors of models no longer in use, by the API and by `evidex cache`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from evidex.embedding.cache import CACHE_FILE, EmbeddingCache, content_hash
from evidex.embedding.protocol import Embedder
from evidex.interfaces.cli import app

DIM = 384


def vectors(n: int, seed: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [(content_hash(f"text {seed} {i}"), rng.standard_normal(DIM).astype(np.float32)) for i in range(n)]


def table_sql(path: Path) -> str:
    with sqlite3.connect(path) as db:
        (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()
    return str(sql)


def test_a_cache_of_the_earlier_layout_is_rewritten_with_every_vector_in_half_the_space(tmp_path: Path) -> None:
    # The layout evidex wrote before: rows in the primary key's tree, each 1.5 KB vector on an overflow page.
    rows = vectors(600, seed=1)
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        db.execute("CREATE TABLE vectors (model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL, "
                   "PRIMARY KEY (model, hash)) WITHOUT ROWID")
        db.executemany("INSERT INTO vectors VALUES ('m', ?, ?)", [(h, v.tobytes()) for h, v in rows])
    before = (tmp_path / CACHE_FILE).stat().st_size

    cache = EmbeddingCache(tmp_path)
    found = cache.lookup("m", [h for h, _ in rows])
    cache.close()

    assert "WITHOUT ROWID" not in table_sql(tmp_path / CACHE_FILE).upper()
    assert len(found) == len(rows)
    assert all(found[h].tobytes() == v.tobytes() for h, v in rows)
    assert (tmp_path / CACHE_FILE).stat().st_size < 0.6 * before
    EmbeddingCache(tmp_path).close()  # opening it again rewrites nothing and loses nothing
    assert len(EmbeddingCache(tmp_path).lookup("m", [h for h, _ in rows])) == len(rows)


def test_dropping_models_keeps_the_vectors_of_the_models_kept_and_shrinks_the_file(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    kept, other, third = vectors(50, seed=2), vectors(400, seed=3), vectors(20, seed=4)
    cache.store("kept", kept)
    cache.store("other", other)
    cache.store("third", third)
    cache.close()
    before = (tmp_path / CACHE_FILE).stat().st_size

    cache = EmbeddingCache(tmp_path)
    assert cache.models() == {"kept": 50, "other": 400, "third": 20}
    assert cache.drop_models({"kept", "third"}) == 400
    assert cache.models() == {"kept": 50, "third": 20}
    found = cache.lookup("kept", [h for h, _ in kept])
    assert all(found[h].tobytes() == v.tobytes() for h, v in kept)
    assert cache.lookup("other", [h for h, _ in other]) == {}
    assert cache.drop_models({"kept", "third"}) == 0
    cache.close()
    assert (tmp_path / CACHE_FILE).stat().st_size < 0.5 * before


@pytest.fixture
def cache_home(tmp_path: Path, cache_dir: Path) -> Path:
    """A cache folder of its own that shares the test session's model export (no second export)."""
    home = tmp_path / "cache"
    home.mkdir()
    (home / "models").symlink_to(cache_dir / "models", target_is_directory=True)
    return home


def test_evidex_cache_reports_and_prunes_every_model_but_the_configured_one(
        cache_home: Path, embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cache = EmbeddingCache(cache_home)
    cache.store(embedder.fingerprint, vectors(5, seed=5))
    cache.store("onnx-int8:retired-export", vectors(30, seed=6))
    cache.store("st:another-model", vectors(3, seed=7))
    cache.close()
    runner = CliRunner()
    env = {"EVIDEX_EMBEDDING_CACHE_DIR": str(cache_home), "EVIDEX_CONFIG": None}

    report = json.loads(runner.invoke(app, ["cache", "--json"], env=env).stdout)
    assert report["configured_model"] == embedder.fingerprint
    assert report["models"] == {embedder.fingerprint: 5, "onnx-int8:retired-export": 30, "st:another-model": 3}

    dry = runner.invoke(app, ["cache", "prune", "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    assert "would delete 33 vectors of 2 other models" in dry.stdout
    assert json.loads(runner.invoke(app, ["cache", "--json"], env=env).stdout)["models"] == report["models"]

    pruned = runner.invoke(app, ["cache", "prune", "--keep-model", "st:another-model"], env=env)
    assert pruned.exit_code == 0, pruned.output
    assert "deleted 30 vectors of 1 other model" in pruned.stdout
    after = json.loads(runner.invoke(app, ["cache", "--json"], env=env).stdout)
    assert after["models"] == {embedder.fingerprint: 5, "st:another-model": 3}
    assert "nothing to prune" in runner.invoke(app, ["cache", "prune", "--keep-model", "st:another-model"],
                                               env=env).stdout
