"""The typed result models describe what `search_with_reasoning` returns: real results validate, survive a JSON
round trip unchanged, and the schema generated from the models (what HTTP, MCP and tool-schema publish) accepts
them and refuses a malformed one."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import jsonschema
import pydantic
import pytest

from evidex.admission.gate import Principal
from evidex.engine import Engine
from evidex.interfaces import tool
from evidex.result_models import Result, result_schema
from tests.conftest import CorpusWriter

PAGES = {
    "restore.md": """\
        ---
        access_labels: [ops]
        citation_uri: https://runbooks.example.net/restore
        published_at: 2025-03-01
        ---
        # Restoring a database

        Restore the nightly snapshot into a scratch instance first, check row counts against the audit table,
        then promote the scratch instance and repoint the service.
        """,
    "printers.md": """\
        ---
        access_labels: [staff]
        citation_uri: https://runbooks.example.net/printers
        published_at: 2025-03-01
        ---
        # Printers

        The third-floor printer needs a badge tap before it releases a job.
        """,
}
AT = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture
def results(make_engine: Callable[..., Engine], write_corpus: CorpusWriter) -> list[dict[str, Any]]:
    """Three decisions on one tiny index: the runbook admitted, the runbook withheld, the default principal."""
    engine = make_engine()
    engine.ingest([write_corpus(PAGES)])
    question = "how do we restore the database from a snapshot?"
    return [engine.search_with_reasoning(question, principal=Principal.of("olga", ["ops"]), retrieved_at=AT),
            engine.search_with_reasoning(question, principal=Principal.of("pat", ["staff"]), retrieved_at=AT, k=3),
            engine.search_with_reasoning("printer badge", retrieved_at=AT)]


def test_real_results_validate_and_round_trip(results: list[dict[str, Any]]) -> None:
    admitted, outsider, _ = results
    assert admitted["evidence"][0]["source"] == "restore.md"
    assert "restore.md" not in [s["source"] for s in outsider["evidence"]]  # staff may not read the runbook
    for result in results:
        typed = Result.model_validate_json(json.dumps(result))
        assert typed.model_dump(mode="json", exclude_unset=True) == result
    typed = Result.model_validate(admitted)
    assert typed.evidence[0].chunks[0].citation.startswith("https://runbooks.example.net/restore")
    assert typed.decision.recommendation.action in {"proceed", "re-query", "stop"}


def test_the_published_schema_is_the_models_and_accepts_real_results(results: list[dict[str, Any]]) -> None:
    assert result_schema() == tool.OUTPUT_SCHEMA
    assert tool.definition(tool.SchemaFormat.MCP)["outputSchema"] == result_schema()
    assert "$ref" not in json.dumps(tool.OUTPUT_SCHEMA)  # embedded in OpenAPI and MCP documents: no dangling refs
    jsonschema.Draft202012Validator.check_schema(tool.OUTPUT_SCHEMA)
    for result in results:
        jsonschema.validate(result, tool.OUTPUT_SCHEMA)


def test_a_malformed_result_is_refused_by_both(results: list[dict[str, Any]]) -> None:
    bad = copy.deepcopy(results[0])
    bad["decision"]["recommendation"]["action"] = "guess"
    with pytest.raises(pydantic.ValidationError):
        Result.model_validate(bad)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, tool.OUTPUT_SCHEMA)
    del bad["evidence"]
    with pytest.raises(pydantic.ValidationError, match="evidence"):
        Result.model_validate(bad)
