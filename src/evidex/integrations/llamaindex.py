"""A LlamaIndex retriever over evidex: `EvidexRetriever(engine, principal).retrieve("question")` returns
`NodeWithScore`s of `TextNode`s, one per admitted chunk, with the citation, family, gate status and the
decision's signals in `node.metadata` (see `evidex.integrations.hits`).

Install with `pip install 'evidex[llamaindex]'`. Usage:

    from evidex import Engine, Principal, load_config
    from evidex.integrations.llamaindex import EvidexRetriever

    engine = Engine.open(load_config("evidex.toml"))
    retriever = EvidexRetriever(engine, Principal.of("docs-bot", ["staff"]), k=5)
    for hit in retriever.retrieve("How do I rotate the signing key?"):
        print(hit.score, hit.node.metadata["citation"])

Only `title` and `citation` of the metadata reach an LLM prompt (`node.get_content(MetadataMode.LLM)`); the rest
is for the caller. A query engine built on it (`RetrieverQueryEngine.from_args(retriever, llm=...)`) answers
from admitted evidence only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from evidex.admission.gate import Principal
from evidex.errors import BackendUnavailable
from evidex.integrations.hits import Hit, ReasoningEngine, search_hits

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise BackendUnavailable(f"the LlamaIndex adapter needs: pip install 'evidex[llamaindex]' ({exc})") from None

PROMPT_KEYS = frozenset({"title", "citation"})  # the metadata an LLM sees beside the text


class EvidexRetriever(BaseRetriever):
    """Admitted evidence from an evidex engine as LlamaIndex nodes, best first.

    `principal`: who asks (None: the engine's default principal); `k`: at most this many chunks;
    `retrieved_at`: the instant the gate checks validity at (None: now); `aspect_focus`: passed to the tool.
    """

    def __init__(self, engine: ReasoningEngine, principal: Principal | None = None, *, k: int = 10,
                 retrieved_at: datetime | None = None, aspect_focus: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.engine = engine
        self.principal = principal
        self.k = k
        self.retrieved_at = retrieved_at
        self.aspect_focus = aspect_focus

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = search_hits(self.engine, query_bundle.query_str, principal=self.principal, k=self.k,
                           retrieved_at=self.retrieved_at, aspect_focus=self.aspect_focus)
        return [NodeWithScore(node=to_node(hit), score=hit.score) for hit in hits]


def to_node(hit: Hit) -> TextNode:
    """A hit as a TextNode: its record id as the node id, the chunk text, the metadata (only PROMPT_KEYS shown to
    an LLM, none embedded again)."""
    hidden = sorted(set(hit.metadata) - PROMPT_KEYS)
    return TextNode(id_=hit.record_id, text=hit.text, metadata=hit.metadata,
                    excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=sorted(hit.metadata))
