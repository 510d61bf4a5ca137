"""`evidex query --json`, `evidex replay` and `evidex demo` through typer's runner, on the handbook."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from evidence_support import HANDBOOK, RETRIEVED_AT_TEXT, ROLLBACK_QUESTION, SAMPLE_CONFIG
from typer.testing import CliRunner, Result

from evidex.interfaces import cli
from evidex.interfaces.cli import app

Invoke = Callable[..., Result]


def _env(cache_dir: Path) -> dict[str, str | None]:
    return {"EVIDEX_EMBEDDING_CACHE_DIR": str(cache_dir), "EVIDEX_CONFIG": None}


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.output, result.stderr)
    return result


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    index = tmp_path_factory.mktemp("cli-handbook") / "idx"
    result = CliRunner().invoke(app, ["ingest", str(HANDBOOK), "--json", "--config", str(SAMPLE_CONFIG),
                                      "--index", str(index)], env=_env(cache_dir))
    assert json.loads(ok(result).stdout)["dead_letters"] == []
    return index


@pytest.fixture
def invoke(index_dir: Path, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli.out, "_width", 300)

    def run(*args: str) -> Result:
        return CliRunner().invoke(app, [*args, "--config", str(SAMPLE_CONFIG), "--index", str(index_dir)],
                                  env=_env(cache_dir))

    return run


@pytest.fixture
def saved(invoke: Invoke, tmp_path: Path) -> Path:
    result = ok(invoke("query", ROLLBACK_QUESTION, "--json", "--principal", "engineer", "--labels",
                       "engineering-read", "--retrieved-at", RETRIEVED_AT_TEXT))
    data = json.loads(result.stdout)
    assert data["request"]["principal"] == {"name": "engineer", "labels": ["engineering-read"]}
    assert data["request"]["retrieved_at"] == RETRIEVED_AT_TEXT
    assert data["evidence"]
    path = tmp_path / "result.json"
    path.write_text(result.stdout, encoding="utf-8")
    return path


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    edited = path.with_name("edited.json")
    edited.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    return edited


def test_replay_of_a_saved_result_is_identical(invoke: Invoke, saved: Path) -> None:
    result = ok(invoke("replay", str(saved)))
    assert "identical" in flat(result.stdout)
    assert "different" not in result.stdout


def _bump_score(data: dict[str, Any]) -> None:
    data["evidence"][0]["chunks"][0]["score"] = 0.123456


def test_replay_of_an_edited_result_exits_1(invoke: Invoke, saved: Path) -> None:
    result = invoke("replay", str(_edit(saved, _bump_score)))
    assert result.exit_code == 1, (result.output, result.stderr)
    assert "different at $." in flat(result.stdout)


def test_replay_names_the_path_of_the_first_difference(invoke: Invoke, saved: Path) -> None:
    result = invoke("replay", str(_edit(saved, _bump_score)))
    assert result.exit_code == 1
    assert "different at $.evidence[0].chunks[0].score" in flat(result.stdout)


def test_replay_of_an_edited_citation_exits_1(invoke: Invoke, saved: Path) -> None:
    def change(data: dict[str, Any]) -> None:
        data["evidence"][0]["chunks"][0]["citation"] = "https://elsewhere.example/#x"

    result = invoke("replay", str(_edit(saved, change)))
    assert result.exit_code == 1
    assert "different at" in flat(result.stdout)


def test_replay_of_a_file_that_is_not_a_result(invoke: Invoke, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    result = invoke("replay", str(bad))
    assert result.exit_code == 4
    assert "not a saved evidex result" in flat(result.stderr)


def test_demo_runs_and_stops_on_the_restricted_question(tmp_path: Path, cache_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli.out, "_width", 300)
    result = ok(CliRunner().invoke(app, ["demo", "--index", str(tmp_path / "demo")], env=_env(cache_dir)))
    text = flat(result.stdout)
    assert "STOP" in text
    assert "found-but-rejected" in text
    assert "stop-no-fresh-authorized-citable-source" in text
    assert "RESTRICTED-MARKER" not in text
    assert "ingested the Northwind handbook" in text
