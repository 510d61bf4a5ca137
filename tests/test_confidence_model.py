"""The shipped confidence model reproduces from the current pipeline: refitting its stored rows gives its
weights, its feature definitions are the current ones, and (with ../shared/data) the features of a fixed sample
of development questions come out as they were when it was fitted. Each failure says how to refit."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from evidex.config import Config
from evidex.evaluation.datasets import load_questions
from evidex.evaluation.runner import open_eval_engine
from evidex.signals.calibration import FEATURES, LABEL, collect, feature_hash, fit_model, read_rows

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
ROWS = ROOT / "eval" / "confidence_rows.jsonl"
REFIT = ("refit it: `.venv/bin/python scripts/calibrate_dev.py` (asks every development question again, writes "
         "eval/confidence_rows.jsonl and src/evidex/data/confidence.json), and commit both")
DOC_SETS = ("k8s", "fastapi")  # indexes CI can build from scratch in a minute or two; the rest take far longer


def shipped() -> dict[str, Any]:
    return dict(json.loads(resources.files("evidex").joinpath("data/confidence.json").read_text(encoding="utf-8")))


def test_the_shipped_model_is_the_fit_of_its_stored_rows() -> None:
    model = shipped()
    assert model["label"] == LABEL and model["features"] == list(FEATURES), f"the label or features changed: {REFIT}"
    assert model["feature_hash"] == feature_hash(), f"the feature definitions changed since the fit: {REFIT}"
    refit = fit_model(read_rows(ROWS), l2=model["l2"])
    assert set(model["fitted_on"]) == {"k8s", "fastapi", "hotpotqa", "musique", "scifact"}
    assert refit["intercept"] == pytest.approx(model["intercept"], abs=1e-6), f"the fit drifted: {REFIT}"
    for name in FEATURES:
        assert refit["weights"][name] == pytest.approx(model["weights"][name], abs=1e-6), f"{name}: {REFIT}"
        assert refit["ranges"][name] == pytest.approx(model["ranges"][name], abs=1e-9), f"{name}: {REFIT}"


@pytest.mark.shared_data
@pytest.mark.slow
@pytest.mark.skipif(not DATA.is_dir(), reason=f"shared evaluation data not found at {DATA}")
@pytest.mark.parametrize("name", DOC_SETS)
def test_the_current_pipeline_reproduces_the_stored_features(name: str, cache_dir: Path, embedder: Any) -> None:
    samples = shipped()["samples"][name]
    by_id = {q.id: q for q in load_questions(DATA / name / "questions.jsonl")}
    config = Config().replace(embedding={"cache_dir": str(cache_dir)})
    engine = open_eval_engine(config, [DATA / name / "docs"], None, embedder=embedder)
    try:
        rows = collect(engine.run, [by_id[s["id"]] for s in samples], name=name)
    finally:
        engine.close()
    for stored, row in zip(samples, rows, strict=True):
        assert row.complete == stored["complete"], f"{name}/{row.id}: the label changed: {REFIT}"
        for feature in FEATURES:
            assert row.features[feature] == pytest.approx(stored["features"][feature], abs=1e-6), (
                f"{name}/{row.id}: feature {feature} is {row.features[feature]}, the model was fitted on "
                f"{stored['features'][feature]}: {REFIT}")


def test_calibrate_fits_a_model_that_the_configuration_then_uses(tmp_path: Path, cache_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from evidex.config import load_config
    from evidex.interfaces.cli import app
    from evidex.signals.decision import DecisionSettings
    from evidex.signals.model import ConfidenceModel, load_model

    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "backups.md").write_text("# Backups\n\nSnapshot the etcd cluster nightly and keep seven copies.\n")
    (corpus / "quota.md").write_text("# Quotas\n\nA resource quota caps namespace memory.\n")
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"id": "a", "question": "How often is etcd snapshotted?",
         "families": [{"name": "backups", "source_regex": r"^backups\.md$"}]},
        {"id": "b", "question": "What caps namespace memory, and who rotates the TLS keys?",
         "families": [{"name": "quotas", "source_regex": r"^quota\.md$"},
                      {"name": "keys", "source_regex": r"^keys\.md$"}]}]) + "\n")  # no such page: incomplete
    env = {"EVIDEX_EMBEDDING_CACHE_DIR": str(cache_dir), "EVIDEX_CONFIG": None}
    args = ["calibrate", "--corpus", str(corpus), "--questions", str(questions), "--name", "ops",
            "--save-rows", "rows.jsonl"]
    first = CliRunner().invoke(app, [*args, "--out", "m1.json"], env=env)
    assert first.exit_code == 0, first.output
    assert "1 of 2 complete" in first.output
    again = CliRunner().invoke(app, ["calibrate", "--rows", "rows.jsonl", "--out", "m2.json"], env=env)
    assert again.exit_code == 0, again.output
    m1, m2 = (json.loads((tmp_path / n).read_text()) for n in ("m1.json", "m2.json"))
    assert m1 == m2  # deterministic: the same rows give the same model, to the last digit
    assert m1["label"] == LABEL and m1["feature_hash"] == feature_hash() and m1["evidex_version"]
    assert m1["fitted_on"] == {"ops": {"questions": 2, "complete": 1}} and len(m1["samples"]["ops"]) == 2
    (tmp_path / "evidex.toml").write_text('[signals]\nconfidence_model = "m1.json"\n')
    settings = DecisionSettings.from_config(load_config(tmp_path / "evidex.toml"))
    assert settings.model == load_model(tmp_path / "m1.json") == ConfidenceModel.from_dict(m1)
    assert load_config(tmp_path / "evidex.toml").hash() != Config().hash()  # a model changes results
    refused = CliRunner().invoke(app, ["calibrate", "--questions", str(questions), "--out", "m3.json"], env=env)
    assert refused.exit_code == 2 and "--corpus" in refused.output
