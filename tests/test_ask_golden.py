"""The reference agent loop on the bundled handbook, compared with recorded transcripts.

Refresh (or record a missing one) after an intended change with:
EVIDEX_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_ask_golden.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from evidex.agent import ask
from evidex.config import load_config
from evidex.engine import Engine

GOLDEN = Path(__file__).parent / "golden"
REFRESH = "EVIDEX_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_ask_golden.py"
AT = datetime(2026, 11, 30, tzinfo=UTC)
QUESTIONS = {
    "ask_restore": "Someone ran a bad data fix on orders-prod at 14:06 UTC. How do I restore the database to just "
                   "before that time, how far back can we recover, and does personal data deleted by the retention "
                   "job come back?",
    "ask_breakglass": "What is the break-glass procedure for the Vaultline root token?",
    "ask_canary": "Our canary for checkout 4.18.2 shows a 5xx spike at the 25% step. How do I stop it and get "
                  "traffic back to stable?",
}


@pytest.fixture(scope="module")
def handbook(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Engine]:
    sample = resources.files("evidex").joinpath("sample")
    with resources.as_file(sample) as sample_dir:
        cfg = load_config(sample_dir / "evidex.toml", env={}).replace(
            index={"path": str(tmp_path_factory.mktemp("hb") / "idx")})
        engine = Engine.open(cfg, embedder=embedder)
        engine.ingest([sample_dir / "handbook"])
        yield engine
        engine.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_ask_matches_its_recorded_transcript(handbook: Engine, name: str) -> None:
    transcript = ask(lambda q, f: handbook.search_with_reasoning(q, f, retrieved_at=AT), QUESTIONS[name]).to_dict()
    path = GOLDEN / f"{name}.json"
    if os.environ.get("EVIDEX_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps(transcript, indent=2, sort_keys=True) + "\n")
    if not path.exists():  # a missing transcript is a failure, never a fresh recording that passes
        pytest.fail(f"{path.relative_to(GOLDEN.parent.parent)} is missing; record it after checking the transcript "
                    f"with: {REFRESH}")
    recorded = json.loads(path.read_text())
    # Every action, reason, aspect and evidence id exactly; the confidence (rounded to one decimal in the
    # transcript) within one step of it: float results differ in their last bits across CPUs
    # (an Intel Xeon with AVX-512 VNNI read 0.8501 where the AMD EPYC that recorded ask_canary read under 0.85).
    assert without_confidence(transcript) == without_confidence(recorded)
    for ours, theirs in zip(transcript["rounds"], recorded["rounds"], strict=True):
        assert ours["confidence"] == pytest.approx(theirs["confidence"], abs=0.1 + 1e-9)


def without_confidence(transcript: dict[str, Any]) -> dict[str, Any]:
    return {**transcript, "rounds": [{k: v for k, v in r.items() if k != "confidence"} for r in transcript["rounds"]]}


@pytest.fixture(scope="module")
def words_only(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Engine]:
    """The handbook judged by aspect words alone (`[signals] aspect_rank_depth = 0`): an aspect the context's
    pages speak of in other words is missing there, which gives the loop something to fix."""
    sample = resources.files("evidex").joinpath("sample")
    with resources.as_file(sample) as sample_dir:
        cfg = load_config(sample_dir / "evidex.toml", env={}).replace(
            index={"path": str(tmp_path_factory.mktemp("hb-words") / "idx")}, signals={"aspect_rank_depth": 0})
        engine = Engine.open(cfg, embedder=embedder)
        engine.ingest([sample_dir / "handbook"])
        yield engine
        engine.close()


@pytest.mark.slow
def test_a_requery_fixes_a_missing_aspect(words_only: Engine) -> None:
    transcript = ask(lambda q, f: words_only.search_with_reasoning(q, f, retrieved_at=AT), QUESTIONS["ask_restore"])
    first, *rest = transcript.rounds
    assert first["action"] == "re-query" and first["aspects_missing"]
    fixed = [r for r in rest if r.get("note", "").startswith("aspect fixed by re-query")]
    assert fixed, transcript.rounds
    assert fixed[0]["aspect_focus"] in first["aspects_missing"]
    assert fixed[0]["aspect_focus"] not in fixed[0]["aspects_missing"]


@pytest.mark.slow
def test_restricted_only_evidence_stops_with_an_owner(handbook: Engine) -> None:
    transcript = ask(lambda q, f: handbook.search_with_reasoning(q, f, retrieved_at=AT), QUESTIONS["ask_breakglass"])
    assert transcript.final_action == "stop"
    assert transcript.final_reason == "stop-no-fresh-authorized-citable-source"
    assert transcript.owner
    assert len(transcript.rounds) == 1
