"""Experiment: adapt the embedder to one corpus from the corpus alone (no questions), and save it for
`embedding.model_dir`.

Two kinds of (anchor, positive) pairs come from an evidex index of the corpus:
- link: the words around a link in one page (`evidex.retrieval.links`, as the reranker's inlink match reads them)
  and the first chunk of the page it points to: "run a logging agent on every node with a [DaemonSet]" teaches
  the model the words questions use for a page that does not use them itself;
- heading: "page title: section heading" and the section's chunk (sections of 200 characters or more).
all-MiniLM-L6-v2 is fine-tuned on them for one epoch with in-batch negatives (batches of 32 that never hold one
positive twice), learning rate 2e-5 with 10% warm-up, sequences cut at 128 tokens, seed 0.

On the k8s pages (1,613 link and 3,210 heading pairs, 151 steps, 20 minutes on the 2-core machine) it lifted the
dense ranking read to ten distinct pages on the fourteen blind sets 0.773 -> 0.807 and hybrid 0.834 -> 0.845, but
the full pipeline only 0.857 / 0.634 -> 0.864 / 0.649, and the development set lost a family (docs/evaluation.md).
Not part of the product: evidex ships the packaged model.

    .venv/bin/python scripts/tune_embedder.py --corpus ../shared/data/k8s/docs --out /tmp/k8s-minilm
    EVIDEX_EMBEDDING_MODEL_DIR=/tmp/k8s-minilm .venv/bin/evidex eval --corpus ../shared/data/k8s/docs ...

Needs the torch extra (`pip install -e '.[torch]'`, torch==2.13.0 first).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from evidex.config import load_config
from evidex.embedding import default_model_dir
from evidex.evaluation.runner import open_eval_engine
from evidex.retrieval.links import LinkIndex
from evidex.types import Chunk

BATCH = 32
MIN_SECTION_CHARS = 200


def pairs_of(chunks: list[Chunk], kinds: set[str]) -> list[tuple[str, str]]:
    """(anchor, positive) pairs of the chosen kinds, shuffled with seed 0."""
    out: list[tuple[str, str]] = []
    lead: dict[str, Chunk] = {}
    for c in chunks:
        if c.source not in lead or c.chunk_index < lead[c.source].chunk_index:
            lead[c.source] = c
    if "link" in kinds:
        links = LinkIndex((c.record_id, c.source, c.text) for c in chunks)
        for source, contexts in links.contexts(list(lead), lambda _: True).items():
            page = lead[source]
            out += [(context, f"{page.title}\n{page.text}") for context in contexts]
    if "heading" in kinds:
        out += [(f"{c.title}: {c.heading.strip()}", c.text) for c in chunks
                if c.heading.strip() and len(c.text) >= MIN_SECTION_CHARS]
    random.Random(0).shuffle(out)
    return out


def batches(pairs: list[tuple[str, str]], rng: random.Random) -> list[list[tuple[str, str]]]:
    """Batches of `BATCH` in which no positive text occurs twice (its in-batch negatives must be negatives)."""
    pool = pairs[:]
    rng.shuffle(pool)
    out = []
    while pool:
        batch: list[tuple[str, str]] = []
        seen: set[str] = set()
        rest = []
        for pair in pool:
            if len(batch) < BATCH and pair[1] not in seen:
                batch.append(pair)
                seen.add(pair[1])
            else:
                rest.append(pair)
        out.append(batch)
        pool = rest
    return out


def train(pairs: list[tuple[str, str]], base: Path, out: Path, *, epochs: int, lr: float) -> None:
    import torch
    import torch.nn.functional as F
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    model = SentenceTransformer(str(base), device="cpu")
    model.max_seq_length = 128
    rng = random.Random(1)
    plan = [b for _ in range(epochs) for b in batches(pairs, rng)]
    warm = max(1, len(plan) // 10)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (len(plan) - s) / max(1, len(plan) - warm)))

    def encode(texts: list[str]) -> torch.Tensor:
        return F.normalize(model(model.tokenize(texts))["sentence_embedding"], dim=-1)

    model.train()
    started = time.perf_counter()
    for step, batch in enumerate(plan, 1):
        anchors, positives = encode([a for a, _ in batch]), encode([p for _, p in batch])
        loss = F.cross_entropy(anchors @ positives.T * 20.0, torch.arange(len(batch)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 10 == 0 or step == len(plan):
            print(f"step {step}/{len(plan)} loss {loss.item():.3f} {time.perf_counter() - started:.0f} s", flush=True)
    model.eval()
    model.max_seq_length = 256
    model.save(str(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True, help="corpus folder or file (indexed as evidex eval does)")
    ap.add_argument("--out", type=Path, required=True, help="where to save the tuned sentence-transformers model")
    ap.add_argument("--kinds", default="link,heading", help="pair kinds: link, heading (comma-separated)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=2e-5)
    args = ap.parse_args()
    config = load_config(None)
    if config.embedding.model_dir:
        raise SystemExit("tune from the packaged model: unset embedding.model_dir")
    engine = open_eval_engine(config, [args.corpus], None, log=print)
    try:
        pairs = pairs_of(engine.store.all_chunks(), set(args.kinds.split(",")))
    finally:
        engine.close()
    print(f"{len(pairs)} pairs")
    train(pairs, default_model_dir(), args.out, epochs=args.epochs, lr=args.lr)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
