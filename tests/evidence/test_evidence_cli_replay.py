"""`evidex query --json`, `evidex replay` and `evidex demo` through typer's runner, on the handbook."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from evidence_support import (
    ENGINEER,
    HANDBOOK,
    RETRIEVED_AT,
    RETRIEVED_AT_TEXT,
    ROLLBACK_QUESTION,
    SAMPLE_CONFIG,
    handbook_config,
)
from typer.testing import CliRunner, Result

from evidex.interfaces import cli_runtime
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
    monkeypatch.setattr(cli_runtime.out, "_width", 300)

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


def _other_snapshot(data: dict[str, Any]) -> None:
    """As if saved before a rollback: the snapshot id in both places a result keeps it (a walkthrough found the
    second one, `retrieval_metadata.index_snapshot`, still reported as the difference). The index had this
    snapshot, empty, before its first batch: one it never had is not identical (the forged-snapshot test)."""
    data["index"]["snapshot_id"] = "g0-empty"
    data["retrieval_metadata"]["index_snapshot"] = "g0-empty"


def test_replay_on_another_snapshot_with_the_same_decision_says_so(invoke: Invoke, saved: Path) -> None:
    """A rollback (or a batch touching nothing the request reads) makes a new snapshot: replay had reported
    "different" at the snapshot id alone. It still notes the snapshot, and still fails on a real difference."""
    same = ok(invoke("replay", str(_edit(saved, _other_snapshot))))
    assert "note: saved on snapshot g0-empty" in flat(same.stdout)
    assert "identical but for the snapshot id" in flat(same.stdout)

    def both(data: dict[str, Any]) -> None:
        _other_snapshot(data)
        _bump_score(data)

    changed = invoke("replay", str(_edit(saved, both)))
    assert changed.exit_code == 1 and "different at $.evidence[0].chunks[0].score" in flat(changed.stdout)

@pytest.mark.parametrize("forged", ["g0-b20260101T000000-000000", "g99-empty", "not-a-snapshot"])
def test_replay_of_a_forged_snapshot_is_different(invoke: Invoke, saved: Path, forged: str) -> None:
    """A snapshot id this index never had (an unknown batch, a later generation, no snapshot at all) does not
    replay as identical, even when every other byte of the decision is."""
    def forge(data: dict[str, Any]) -> None:
        data["index"]["snapshot_id"] = data["retrieval_metadata"]["index_snapshot"] = forged

    result = invoke("replay", str(_edit(saved, forge)))
    assert result.exit_code == 1, (result.output, result.stderr)
    assert f"different: snapshot {forged} was never a snapshot of this index" in flat(result.stdout)
    assert "identical" not in result.stdout


def test_replay_after_a_batch_and_its_rollback_is_identical_but_for_the_snapshot(invoke: Invoke, saved: Path,
                                                                                 tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "lunch.md").write_text("---\naccess_labels: [engineering-read]\ncitation_uri: https://x.example/l\n"
                                    "---\n# Lunch\n\nSoup on Fridays.\n", encoding="utf-8")
    ok(invoke("ingest", str(extra)))
    ok(invoke("rollback"))
    result = ok(invoke("replay", str(saved)))
    assert "note: saved on snapshot" in flat(result.stdout)
    assert "identical but for the snapshot id" in flat(result.stdout)

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
    monkeypatch.setattr(cli_runtime.out, "_width", 300)
    result = ok(CliRunner().invoke(app, ["demo", "--index", str(tmp_path / "demo")], env=_env(cache_dir)))
    text = flat(result.stdout)
    assert "STOP" in text
    assert "found-but-rejected" in text
    assert "stop-no-fresh-authorized-citable-source" in text
    assert "RESTRICTED-MARKER" not in text
    assert "ingested the Northwind handbook" in text


def test_replay_of_an_explicit_plan_with_a_focus_is_identical(invoke: Invoke, index_dir: Path, cache_dir: Path,
                                                              tmp_path: Path) -> None:
    """The request echoes the caller's plan as given (before the focus is applied, with every family field),
    so replay applies the focus once and meets families by the same term share."""
    from evidex.engine import Engine
    from evidex.evidence.plan import RequiredFamily, explicit_plan

    plan = explicit_plan([RequiredFamily(name="keys", label="key-rotation", rescue_query="rotate transit key"),
                          RequiredFamily(name="rot", rescue_query="rotate key", aspect_terms=("rotat", "key"),
                                         min_term_share=0.3)])
    with Engine.open(handbook_config(index_dir, cache_dir)) as engine:
        result = engine.search_with_reasoning("how do I rotate the transit key and who is on call?", "audit log",
                                              k=5, plan=plan, principal=ENGINEER, retrieved_at=RETRIEVED_AT)
    assert result["request"]["plan"]["families"][1]["min_term_share"] == 0.3
    assert [f["name"] for f in result["request"]["plan"]["families"]] == ["keys", "rot"]  # no focus in it
    saved = tmp_path / "planned.json"
    saved.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    assert "identical" in flat(ok(invoke("replay", str(saved))).stdout)
