"""The command line on a Milvus Lite index: what an operator sees when an index is missing or moved."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from typer.testing import CliRunner, Result

from evidex.interfaces.cli import app

Invoke = Callable[..., Result]


@pytest.fixture
def invoke(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """invoke("stats", index="idx") in tmp_path on the Milvus backend, the shared embedding cache."""
    monkeypatch.chdir(tmp_path)  # no stray ./evidex.toml
    monkeypatch.delenv("EVIDEX_CONFIG", raising=False)
    monkeypatch.setenv("EVIDEX_INDEX_BACKEND", "milvus")
    monkeypatch.setenv("EVIDEX_EMBEDDING_CACHE_DIR", str(cache_dir))
    runner = CliRunner()

    def run(*args: str, index: str = "idx") -> Result:
        return runner.invoke(app, [*args, "--index", str(tmp_path / index)])

    return run


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "backups.md").write_text("# Backups\n\nSnapshot the etcd cluster nightly.\n", encoding="utf-8")
    (root / "quota.md").write_text("# Quotas\n\nA resource quota caps namespace memory.\n", encoding="utf-8")
    return root


def ingest(invoke: Invoke, corpus: Path) -> str:
    result = invoke("ingest", str(corpus), "--json")
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout)["batch_id"])


def test_a_mistyped_milvus_index_is_an_error_not_an_empty_answer(invoke: Invoke, tmp_path: Path) -> None:
    """As on SQLite: a read command had created a new, empty Milvus Lite index and answered from it (exit 0)."""
    for args in (["query", "how do I rotate keys?"], ["search", "keys"], ["stats"], ["batches"], ["rollback"]):
        result = invoke(*args, index="typo")
        assert result.exit_code == 2 and "no index at" in result.stderr, (args, result.output)
    assert not (tmp_path / "typo").exists()


def test_a_moved_milvus_index_names_the_collection_it_holds(invoke: Invoke, corpus: Path, tmp_path: Path) -> None:
    """The collection name is derived from the index folder's name: a moved or copied folder had answered from a
    new, empty collection beside the one it holds."""
    ingest(invoke, corpus)
    shutil.copytree(tmp_path / "idx", tmp_path / "moved")
    result = invoke("stats", index="moved")
    assert result.exit_code == 2, result.output
    assert "no index at" in result.stderr and "no collection 'evidex_moved'" in result.stderr
    assert "evidex_idx" in result.stderr
    assert invoke("stats").exit_code == 0  # the original is untouched
