"""A Haystack component over evidex: `EvidexRetriever(engine, principal).run(query="question")` returns
`{"documents": [Document, ...], "decision": {...}}`, one document per admitted chunk, with the citation,
family, gate status and the decision's signals in `document.meta` (see `evidex.integrations.hits`).

Install with `pip install 'evidex[haystack]'`. Usage:

    from haystack import Pipeline
    from evidex import Engine, Principal, load_config
    from evidex.integrations.haystack import EvidexRetriever

    engine = Engine.open(load_config("evidex.toml"))
    retriever = EvidexRetriever(engine, Principal.of("docs-bot", ["staff"]), top_k=5)
    result = retriever.run(query="How do I rotate the signing key?")
    for doc in result["documents"]:
        print(doc.score, doc.meta["citation"])

    pipeline = Pipeline()
    pipeline.add_component("retriever", retriever)  # then a PromptBuilder, a generator, ...

`decision` is the call's recommendation and signals even when no document was admitted (a `stop`), so a
pipeline can route on it. The component holds a live engine, so it is not serialised to YAML.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from evidex.admission.gate import Principal
from evidex.errors import BackendUnavailable
from evidex.integrations.hits import Hit, ReasoningEngine, decision_metadata, hits_of, result_dict

try:
    from haystack import Document, component
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise BackendUnavailable(f"the Haystack adapter needs: pip install 'evidex[haystack]' ({exc})") from None


@component
class EvidexRetriever:
    """Admitted evidence from an evidex engine as Haystack documents, best first.

    `principal`: who asks (None: the engine's default principal); `top_k`: at most this many chunks;
    `retrieved_at`: the instant the gate checks validity at (None: now).
    """

    def __init__(self, engine: ReasoningEngine, principal: Principal | None = None, *, top_k: int = 10,
                 retrieved_at: datetime | None = None) -> None:
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, not {top_k}")
        self.engine = engine
        self.principal = principal
        self.top_k = top_k
        self.retrieved_at = retrieved_at

    @component.output_types(documents=list[Document], decision=dict[str, Any])
    def run(self, query: str, aspect_focus: str | None = None, top_k: int | None = None) -> dict[str, Any]:
        """The admitted documents for `query` and the call's decision (recommendation, confidence, ...)."""
        result = self.engine.search_with_reasoning(query, aspect_focus, k=top_k or self.top_k,
                                                   principal=self.principal, retrieved_at=self.retrieved_at)
        return {"documents": [to_document(hit) for hit in hits_of(result)],
                "decision": decision_metadata(result_dict(result))}


def to_document(hit: Hit) -> Document:
    """A hit as a Haystack Document (its record id as the document id, the fused score as its score)."""
    return Document(id=hit.record_id, content=hit.text, meta=hit.metadata, score=hit.score)
