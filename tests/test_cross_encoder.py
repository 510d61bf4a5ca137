"""The cross-encoder plumbing, on a tiny randomly initialised model built locally (no download), loaded
with sentence-transformers and as an ONNX export."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evidex.errors import ConfigError
from evidex.pipeline import SearchRequest

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from evidex.testing.models import random_cross_encoder

    return random_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


@pytest.fixture(scope="module")
def tiny_onnx_cross_encoder(tiny_cross_encoder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from evidex.rerank.cross_encoder import export_onnx

    return export_onnx(tiny_cross_encoder, tmp_path_factory.mktemp("tiny-ce-onnx") / "tiny-ce")


def test_it_scores_pairs(tiny_cross_encoder: Path) -> None:
    from evidex.rerank.cross_encoder import SentenceTransformerCrossEncoder

    ce = SentenceTransformerCrossEncoder(tiny_cross_encoder)
    scores = ce.score("how do I rotate keys", ["rotate the transit key", "bake bread", "rotate the transit key"])
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert scores[0] == pytest.approx(scores[2])  # same pair, same score
    assert ce.score("q", []) == []


def test_a_directory_without_a_model_is_a_config_error(tmp_path: Path) -> None:
    from evidex.rerank.cross_encoder import SentenceTransformerCrossEncoder

    with pytest.raises(ConfigError, match="cross_encoder_dir"):
        SentenceTransformerCrossEncoder(tmp_path)


def test_the_pipeline_applies_it_to_the_top_n_and_says_so(tiny_cross_encoder: Path, make_engine: Any,
                                                           write_corpus: Any) -> None:
    corpus = write_corpus({f"p{i}.md": f"# Page {i}\n\nKeys rotate every {i} days with vaultctl." for i in range(6)})
    plain = make_engine()
    plain.ingest([corpus])
    without = plain.run(SearchRequest(query="how often do keys rotate", k=3))
    assert without.reranker["cross_encoder"] is None
    assert "cross_encoder" not in without.reranker["weights"]
    engine = make_engine(evidence={"cross_encoder_dir": str(tiny_cross_encoder), "cross_encoder_top_n": 2})
    outcome = engine.run(SearchRequest(query="how often do keys rotate", k=3))
    assert outcome.reranker["cross_encoder"] == f"cross-encoder:{tiny_cross_encoder.name}"
    ev = engine.config.evidence
    total = ev.w_cross_encoder + ev.w_retrieval + ev.w_lexical + ev.w_title
    assert outcome.reranker["weights"]["cross_encoder"] == pytest.approx(ev.w_cross_encoder / total, abs=1e-4)
    scored = [dict(c.scores).get("cross_encoder") for c in outcome.ranked]
    assert sum(1 for s in scored if s not in (None, 0.0)) <= 2  # only the top 2 went through the model


PAIRS = ["rotate the transit key", "bake bread at 200 degrees", "keys rotate every 30 days with vaultctl"]


def test_the_onnx_export_scores_as_the_torch_model_does(tiny_cross_encoder: Path,
                                                        tiny_onnx_cross_encoder: Path) -> None:
    from evidex.rerank.cross_encoder import OnnxCrossEncoder, SentenceTransformerCrossEncoder

    torch_scores = SentenceTransformerCrossEncoder(tiny_cross_encoder).score("how do I rotate keys", PAIRS)
    onnx_scores = OnnxCrossEncoder(tiny_onnx_cross_encoder).score("how do I rotate keys", PAIRS)
    # sentence-transformers puts a single-label model's logit through a sigmoid; ONNX returns the logit.
    assert [1 / (1 + math.exp(-s)) for s in onnx_scores] == pytest.approx(torch_scores, abs=1e-5)
    assert len(set(onnx_scores)) == len(PAIRS)  # the random model still tells the pairs apart


def test_an_onnx_score_does_not_depend_on_the_other_texts_or_threads(tiny_onnx_cross_encoder: Path) -> None:
    from evidex.rerank.cross_encoder import OnnxCrossEncoder

    one = OnnxCrossEncoder(tiny_onnx_cross_encoder, threads=1)
    many = OnnxCrossEncoder(tiny_onnx_cross_encoder, threads=4)
    alone = one.score("rotate keys", [PAIRS[2]])[0]
    assert many.score("rotate keys", [*PAIRS, *PAIRS])[2] == alone
    assert one.score("rotate keys", []) == []
    long_text = "keys rotate " * 5000  # far beyond the model's 512 positions: truncated, not an error
    assert math.isfinite(one.score("rotate keys", [long_text])[0])


def test_an_int8_export_loads_and_scores_reproducibly(tiny_cross_encoder: Path, tmp_path: Path) -> None:
    from evidex.rerank.cross_encoder import export_onnx, load_cross_encoder

    int8 = export_onnx(tiny_cross_encoder, tmp_path / "int8", int8=True)
    ce = load_cross_encoder(int8)
    first = ce.score("how do I rotate keys", PAIRS)
    assert all(math.isfinite(s) for s in first)
    assert ce.score("how do I rotate keys", PAIRS) == first
    assert sorted(p.name for p in int8.iterdir()) == ["config.json", "model.onnx", "tokenizer.json"]


def test_an_onnx_cross_encoder_needs_no_torch(tiny_onnx_cross_encoder: Path) -> None:
    script = (
        "import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
        "from pathlib import Path\n"
        "from evidex.rerank.cross_encoder import load_cross_encoder\n"
        f"ce = load_cross_encoder(Path({str(tiny_onnx_cross_encoder)!r}))\n"
        "print(ce.name, len(ce.score('rotate keys', ['a', 'b'])))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"cross-encoder:{tiny_onnx_cross_encoder.name}", "(onnx)", "2"]


def test_an_unusable_directory_is_a_config_error(tmp_path: Path, tiny_onnx_cross_encoder: Path) -> None:
    from evidex.rerank.cross_encoder import load_cross_encoder

    with pytest.raises(ConfigError, match="not a directory"):
        load_cross_encoder(tmp_path / "absent")
    half = tmp_path / "half"
    half.mkdir()
    (half / "model.onnx").write_bytes((tiny_onnx_cross_encoder / "model.onnx").read_bytes())
    with pytest.raises(ConfigError, match=r"tokenizer\.json"):
        load_cross_encoder(half)
    (half / "tokenizer.json").write_text((tiny_onnx_cross_encoder / "tokenizer.json").read_text())
    with pytest.raises(ConfigError, match="runs on the CPU"):
        load_cross_encoder(half, device="cuda")
    (half / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(ConfigError, match="cannot load"):
        load_cross_encoder(half)


def test_the_command_line_exports_one(tiny_cross_encoder: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from evidex.interfaces.cli import app

    runner = CliRunner()
    done = runner.invoke(app, ["export-cross-encoder", str(tiny_cross_encoder), str(tmp_path / "ce"), "--int8"])
    assert done.exit_code == 0, done.output
    assert f'cross_encoder_dir = "{tmp_path / "ce"}"' in " ".join(done.stdout.split())
    assert (tmp_path / "ce" / "model.onnx").is_file()
    again = runner.invoke(app, ["export-cross-encoder", str(tiny_cross_encoder), str(tmp_path / "ce")])
    assert again.exit_code == 0, again.output  # a previous export is replaced
    bad = runner.invoke(app, ["export-cross-encoder", str(tmp_path), str(tmp_path / "nothing")])
    assert bad.exit_code == 3 and "cannot load a cross-encoder" in bad.stderr
    assert not (tmp_path / "nothing").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    refused = runner.invoke(app, ["export-cross-encoder", str(tiny_cross_encoder), str(mine)])
    assert refused.exit_code == 3 and "is not a cross-encoder export" in refused.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_the_pipeline_uses_an_onnx_cross_encoder_from_config(tiny_onnx_cross_encoder: Path, make_engine: Any,
                                                             write_corpus: Any) -> None:
    corpus = write_corpus({f"p{i}.md": f"# Page {i}\n\nKeys rotate every {i} days with vaultctl." for i in range(6)})
    engine = make_engine(evidence={"cross_encoder_dir": str(tiny_onnx_cross_encoder), "cross_encoder_top_n": 3})
    engine.ingest([corpus])
    outcome = engine.run(SearchRequest(query="how often do keys rotate", k=3))
    assert outcome.reranker["cross_encoder"] == f"cross-encoder:{tiny_onnx_cross_encoder.name} (onnx)"
    scored = [dict(c.scores).get("cross_encoder") for c in outcome.ranked]
    assert 0 < sum(1 for s in scored if s not in (None, 0.0)) <= 3
    again = engine.run(SearchRequest(query="how often do keys rotate", k=3))
    assert [c.chunk.record_id for c in again.ranked] == [c.chunk.record_id for c in outcome.ranked]


def test_a_request_scores_each_text_once_and_counts_its_tokens(tiny_onnx_cross_encoder: Path,
                                                               tiny_cross_encoder: Path) -> None:
    from evidex.rerank.cross_encoder import OnnxCrossEncoder, SentenceTransformerCrossEncoder
    from evidex.rerank.fused import RequestCrossEncoder

    model = OnnxCrossEncoder(tiny_onnx_cross_encoder)
    assert model.tokens("rotate keys", PAIRS) == SentenceTransformerCrossEncoder(tiny_cross_encoder).tokens(
        "rotate keys", PAIRS)  # the same tokenizer, whichever backend runs it
    request = RequestCrossEncoder(model)
    first = request.score("rotate keys", PAIRS[:2])
    again = request.score("rotate keys", [PAIRS[1], PAIRS[2], PAIRS[0]])  # two seen before, one new
    assert again[0] == first[1] and again[2] == first[0]
    assert request.pairs_scored == 3
    assert request.tokens_used == model.tokens("rotate keys", PAIRS) > 3 * 2  # two query words per pair and more


def test_the_result_reports_the_cross_encoders_tokens(tiny_onnx_cross_encoder: Path, make_engine: Any,
                                                      write_corpus: Any) -> None:
    corpus = write_corpus({f"p{i}.md": f"# Page {i}\n\nKeys rotate every {i} days with vaultctl." for i in range(6)})
    plain = make_engine()
    plain.ingest([corpus])
    assert plain.search_with_reasoning("how often do keys rotate")["cost"]["model_tokens"] == 0
    engine = make_engine(evidence={"cross_encoder_dir": str(tiny_onnx_cross_encoder), "cross_encoder_top_n": 4})
    outcome = engine.run(SearchRequest(query="how often do keys rotate", k=3))
    assert 0 < outcome.reranker["pairs_scored"] <= len({c.chunk.text for c in outcome.ranked_all})
    assert outcome.reranker["tokens"] > 0
    assert engine.result_of(outcome)["cost"]["model_tokens"] == outcome.reranker["tokens"]
