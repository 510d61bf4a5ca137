"""Retrievers for the RAG frameworks people already run, each over an evidex `Engine` and a `Principal`.

- `evidex.integrations.llamaindex.EvidexRetriever`: a LlamaIndex `BaseRetriever` (`pip install 'evidex[llamaindex]'`)
- `evidex.integrations.langchain.EvidexRetriever`: a LangChain `BaseRetriever` (`pip install 'evidex[langchain]'`)
- `evidex.integrations.haystack.EvidexRetriever`: a Haystack component (`pip install 'evidex[haystack]'`)

Each returns only admitted evidence (the gate has run: the principal may read it, it is valid now, it has an
exact citation), as the framework's own node or document type, with the citation, family, gate status and the
decision's signals in its metadata (`evidex.integrations.hits`). Importing this package imports no framework.
"""
