"""Every path under a folder that ingest does not read is reported with its reason (in the report, its JSON and
the CLI), and symbolic links leading outside the folder are not followed unless the configuration asks."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evidex.engine import Engine
from evidex.errors import IngestError
from evidex.interfaces.cli import app

EngineFactory = Callable[..., Engine]
PAGE = "# Page\n\nDrain the worker before restarting it.\n"


def hostile_folder(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nThe root password is hunter2.\n", encoding="utf-8")
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "page.md").write_text(PAGE, encoding="utf-8")
    (root / "inside-link.md").symlink_to(root / "page.md")  # inside the folder: read
    (root / "outside-link.md").symlink_to(outside / "secret.md")
    (root / "dangling.md").symlink_to(root / "gone.md")
    (root / "loop-a.md").symlink_to(root / "loop-b.md")
    (root / "loop-b.md").symlink_to(root / "loop-a.md")
    (root / "linked-folder").symlink_to(outside, target_is_directory=True)
    os.mkfifo(root / "pipe.md")
    (root / "diagram.png").write_bytes(b"\x89PNG")
    (root / "sub" / "Makefile").write_text("all:\n", encoding="utf-8")
    return root


EXPECTED = {
    "dangling.md": "a symbolic link to nothing (dangling)",
    "diagram.png": "no loader reads .png",
    "linked-folder": "a symbolic link to a folder (not followed)",
    "loop-a.md": "a symbolic link loop",
    "loop-b.md": "a symbolic link loop",
    "outside-link.md": "a symbolic link leading outside the folder (not followed: [ingest] follow_symlinks_outside)",
    "pipe.md": "a FIFO, not a regular file",
    "sub/Makefile": "no loader reads files without a suffix",
}


def test_every_path_not_read_is_reported_with_its_reason(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    report = engine.ingest([hostile_folder(tmp_path)])
    assert dict(report.skipped_paths) == EXPECTED
    assert set(engine.store.ledger.document_hashes()) == {"page.md", "inside-link.md"}
    assert not report.dead_letters
    as_json = report.to_dict()["skipped_paths"]
    assert as_json["count"] == len(EXPECTED)
    assert {p["path"]: p["reason"] for p in as_json["paths"]} == EXPECTED


def test_links_outside_are_read_when_the_configuration_asks(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(ingest={"follow_symlinks_outside": True})
    report = engine.ingest([hostile_folder(tmp_path)])
    assert "outside-link.md" in engine.store.ledger.document_hashes()
    assert "outside-link.md" not in dict(report.skipped_paths)


def test_a_sync_of_a_folder_holding_only_unread_paths_is_refused(make_engine: EngineFactory, tmp_path: Path) -> None:
    """Skipped paths are no documents: a folder of them counts as empty, and a sync of it retires nothing."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "page.md").write_text(PAGE, encoding="utf-8")
    engine = make_engine()
    engine.ingest([corpus])
    (corpus / "page.md").unlink()
    (corpus / "diagram.png").write_bytes(b"\x89PNG")
    with pytest.raises(IngestError, match="holds no documents"):
        engine.ingest([corpus], sync=True)
    assert set(engine.store.ledger.document_hashes()) == {"page.md"}


def test_the_cli_counts_the_paths_not_read(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no stray ./evidex.toml
    root = hostile_folder(tmp_path)
    result = CliRunner().invoke(app, ["ingest", str(root), "--index", str(tmp_path / "idx")],
                                env={"EVIDEX_EMBEDDING_CACHE_DIR": str(cache_dir), "EVIDEX_CONFIG": None})
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "8 path(s) not read: 2 a symbolic link loop;" in flat
