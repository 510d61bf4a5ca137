"""The command line on a Milvus Lite index: what an operator sees when an index is missing, moved, or was left
half rolled back by a killed `evidex rollback`."""

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
from evidex.interfaces.cli_runtime import build_config
from evidex.stores.milvus import MilvusStore

Invoke = Callable[..., Result]


class Crash(BaseException):
    """Stands for the process dying (as in test_milvus_store)."""


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


def test_rerunning_a_killed_rollback_undoes_one_batch(invoke: Invoke, corpus: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`kill -9` during `evidex rollback`, then `evidex rollback` again (what an operator does): opening the
    index completed the interrupted rollback, and the command then rolled back the batch before it as well."""
    first = ingest(invoke, corpus)
    (corpus / "quota.md").write_text("# Quotas\n\nA resource quota caps namespace CPU.\n", encoding="utf-8")
    second = ingest(invoke, corpus)
    store = MilvusStore.from_config(build_config(None, tmp_path / "idx"))

    def killed(batch_id: str) -> None:
        raise Crash(f"killed while rolling back {batch_id}")

    monkeypatch.setattr(store._writer, "_finish_rollback", killed)  # recorded as rolling-back, nothing undone yet
    with pytest.raises(Crash):
        store.rollback()
    store.close()

    result = invoke("rollback")
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert f"finished the interrupted rollback of batch {second}" in out
    assert "no other batch was rolled back" in out and f"rolled back batch {first}" not in out
    listing = invoke("batches").stdout
    assert f"{first}  committed" in listing and f"{second}  rolled-back" in listing
    stats = json.loads(invoke("stats", "--json").stdout)
    assert (stats["documents"], stats["chunks"]) == (2, 2)
    assert f"rolled back batch {first}" in " ".join(invoke("rollback").stdout.split())  # the next goes on
