"""A LangChain retriever over evidex: `EvidexRetriever(engine=engine, principal=principal).invoke("question")`
returns `Document`s, one per admitted chunk, with the citation, family, gate status and the decision's signals
in `document.metadata` (see `evidex.integrations.hits`).

Install with `pip install 'evidex[langchain]'`. Usage:

    from evidex import Engine, Principal, load_config
    from evidex.integrations.langchain import EvidexRetriever

    engine = Engine.open(load_config("evidex.toml"))
    retriever = EvidexRetriever(engine=engine, principal=Principal.of("docs-bot", ["staff"]), k=5)
    for doc in retriever.invoke("How do I rotate the signing key?"):
        print(doc.metadata["citation"], doc.metadata["recommendation"])

It is a Runnable like any retriever: `retriever | format_docs | prompt | llm` in LCEL, `ainvoke` and `batch`
included (the engine is thread-safe).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from evidex.admission.gate import Principal
from evidex.errors import BackendUnavailable
from evidex.integrations.hits import Hit, search_hits

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise BackendUnavailable(f"the LangChain adapter needs: pip install 'evidex[langchain]' ({exc})") from None


class EvidexRetriever(BaseRetriever):
    """Admitted evidence from an evidex engine as LangChain documents, best first.

    `engine`: an `evidex.Engine`; `principal`: who asks (None: the engine's default principal); `k`: at most
    this many chunks; `retrieved_at`: the instant the gate checks validity at (None: now); `aspect_focus`:
    passed to the tool.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Any
    principal: Principal | None = None
    k: int = 10
    retrieved_at: datetime | None = None
    aspect_focus: str | None = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        hits = search_hits(self.engine, query, principal=self.principal, k=self.k, retrieved_at=self.retrieved_at,
                           aspect_focus=self.aspect_focus)
        return [to_document(hit) for hit in hits]


def to_document(hit: Hit) -> Document:
    """A hit as a LangChain Document (its record id as the document id)."""
    return Document(page_content=hit.text, metadata=hit.metadata, id=hit.record_id)
