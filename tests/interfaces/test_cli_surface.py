"""The command line as a new user meets it: `--version`, `-h` everywhere, boolean options as flags, tables with
`--json` beside them, "no results" said, and the demo's hint runnable from any folder. Through typer's runner."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner, Result

import evidex
from evidex.interfaces import cli_runtime
from evidex.interfaces.cli import app

CORPUS = {
    "vault.md": ("---\naccess_labels: [eng]\ncitation_uri: https://docs.example.org/vault\n---\n"
                 "# Vault\n\nUnseal the vault with three of the five key shares.\n"),
    "pager.md": "# Pager\n\nThe pager rotates weekly between the two platform engineers.\n",
}


@pytest.fixture
def invoke(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_runtime.out, "_width", 200)
    runner = CliRunner()
    env = {"EVIDEX_EMBEDDING_CACHE_DIR": str(cache_dir), "EVIDEX_CONFIG": None}

    def run(*args: str) -> Result:
        return runner.invoke(app, list(args), env=env)

    yield run


@pytest.fixture
def indexed(invoke: Any, tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in CORPUS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    assert invoke("ingest", str(corpus), "--index", str(tmp_path / "idx")).exit_code == 0
    return tmp_path / "idx"


def _command_paths() -> list[list[str]]:
    """Every command and group of the app, as the words that name it (`["keys", "list"]`)."""
    paths: list[list[str]] = []

    def walk(command: Any, prefix: list[str]) -> None:
        paths.append(prefix)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*prefix, name])

    walk(get_command(app), [])
    return paths


def test_version(invoke: Any) -> None:
    for flag in ("--version", "-V"):
        result = invoke(flag)
        assert result.exit_code == 0 and result.stdout == f"evidex {evidex.__version__}\n"


def test_the_console_script_answers_version_without_loading_the_commands() -> None:
    code = ("import sys; from evidex.interfaces.entry import main; sys.argv = ['evidex', '--version']; main(); "
            "print('numpy' in sys.modules, 'evidex.interfaces.cli' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [f"evidex {evidex.__version__}", "False False"]


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "evidex")
def test_every_command_takes_h_and_shows_flags_as_flags(invoke: Any, path: list[str]) -> None:
    short, long = invoke(*path, "-h"), invoke(*path, "--help")
    assert short.exit_code == 0 and "Usage: " in short.stdout
    assert short.stdout == long.stdout
    assert "<bool>" not in short.stdout  # `--json`, not `--json <bool>`


def test_a_flag_given_a_value_is_a_usage_error_not_a_path(invoke: Any, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    result = invoke("ingest", str(tmp_path / "docs"), "--sync", "true", "--index", str(tmp_path / "idx"))
    assert result.exit_code == 2
    assert "--sync is a flag and takes no value" in result.stderr
    assert not (tmp_path / "idx").exists()  # nothing ran
    assert invoke("search", "vault", "--json", "false").exit_code == 2
    assert invoke("stats", "--json", "yes", "--index", str(tmp_path / "idx")).exit_code == 2


def test_a_value_after_the_double_dash_is_an_argument(invoke: Any, indexed: Path) -> None:
    result = invoke("search", "--index", str(indexed), "--mode", "bm25", "--", "true")
    assert result.exit_code == 0, result.output


def test_search_with_no_hits_says_so(invoke: Any, indexed: Path) -> None:
    result = invoke("search", "zyxwv qqqj", "--mode", "bm25", "--index", str(indexed))
    assert result.exit_code == 0 and result.stdout.startswith("no results")
    data = json.loads(invoke("search", "zyxwv qqqj", "--mode", "bm25", "--index", str(indexed), "--json").stdout)
    assert data["results"] == []  # JSON stays JSON


def test_stats_is_a_table_and_json_on_request(invoke: Any, indexed: Path) -> None:
    table = invoke("stats", "--index", str(indexed))
    assert table.exit_code == 0
    assert "documents" in table.stdout and "│ 2 " in table.stdout and "access labels" in table.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(table.stdout)
    data = json.loads(invoke("stats", "--index", str(indexed), "--json").stdout)
    assert data["documents"] == 2 and data["access_labels"]["eng"] == 1


def test_show_is_a_table_with_its_text(invoke: Any, indexed: Path) -> None:
    found = json.loads(invoke("search", "key shares", "--mode", "bm25", "--index", str(indexed), "--json").stdout)
    record_id = found["results"][0]["record_id"]
    table = invoke("show", record_id, "--index", str(indexed)).stdout
    assert "https://docs.example.org/vault" in table and "Unseal the vault with three of the five key shares." in table
    data = json.loads(invoke("show", record_id, "--index", str(indexed), "--json").stdout)
    assert data["citation_uri"] == "https://docs.example.org/vault"


def test_export_and_import_print_tables_or_json(invoke: Any, indexed: Path, tmp_path: Path) -> None:
    exported = invoke("export", str(tmp_path / "copy"), "--index", str(indexed))
    assert exported.exit_code == 0, exported.output
    assert f"exported to {tmp_path / 'copy'}" in exported.stdout
    imported = invoke("import", str(tmp_path / "copy"), "--index", str(tmp_path / "idx2"), "--json")
    assert imported.exit_code == 0, imported.output
    assert isinstance(json.loads(imported.stdout), dict)
    assert json.loads(invoke("stats", "--index", str(tmp_path / "idx2"), "--json").stdout)["documents"] == 2


@pytest.mark.slow
def test_the_demo_hint_works_from_another_folder(invoke: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    demo = invoke("demo", "--index", "demo-index")
    assert demo.exit_code == 0, demo.output
    hint = demo.stdout.strip().splitlines()[-1]
    assert hint.startswith("Try: ")
    words = shlex.split(hint.removeprefix("Try: "))
    assert Path(words[words.index("--index") + 1]) == tmp_path / "here" / "demo-index"
    assert Path(words[words.index("-c") + 1]).is_file()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    answer = invoke(*words[1:], "--json")
    assert answer.exit_code == 0, answer.output
    assert json.loads(answer.stdout)["evidence"]  # the engineering-read principal is admitted evidence


def test_batches_and_dead_letters_print_json_on_request(invoke: Any, indexed: Path, tmp_path: Path) -> None:
    batches = json.loads(invoke("batches", "--index", str(indexed), "--json").stdout)
    assert [b["status"] for b in batches] == ["committed"] and batches[0]["finished_at"].endswith("Z")
    listing = invoke("batches", "--index", str(indexed)).stdout
    assert batches[0]["batch_id"] in listing and "committed" in listing
    assert json.loads(invoke("dead-letters", "--index", str(indexed), "--json").stdout) == []
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "bad.md").write_bytes(b"\xff\xfe\x00broken")
    invoke("ingest", str(tmp_path / "broken"), "--index", str(indexed))
    letters = json.loads(invoke("dead-letters", "--index", str(indexed), "--json").stdout)
    assert [d["source"] for d in letters] == ["bad.md"] and letters[0]["reason"]
