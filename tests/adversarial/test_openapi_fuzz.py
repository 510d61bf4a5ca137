"""The HTTP API fuzzed against its own OpenAPI spec (schemathesis), in-process, with a bounded budget: no request
the spec allows, or any mutation of one, gets a 5xx or a response its schema does not describe."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    negative_data_rejection,
    positive_data_acceptance,
    status_code_conformance,
)

from evidex.engine import Engine
from evidex.interfaces.http import create_app
from evidex.interfaces.keys import KeyStore, RateLimiter

EngineFactory = Callable[..., Engine]
PAGE = ("---\naccess_labels: [eng]\ncitation_uri: https://docs.example.com/rotate\n---\n"
        "# Rotate keys\n\nRotate the signing keys every ninety days with keyctl rotate.\n")


@pytest.fixture
def served(make_engine: EngineFactory, tmp_path: Path) -> Iterator[tuple[FastAPI, str]]:
    """The API over a one-page index, and a key to it with a rate no fuzzing run reaches."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "rotate.md").write_text(PAGE, encoding="utf-8")
    engine = make_engine()
    engine.ingest([corpus])
    with KeyStore(tmp_path / "keys.sqlite") as keys:
        secret, _ = keys.create("fuzz", "fuzzer", ["eng"], rate_per_min=100_000)
        yield create_app(engine, keys, limiter=RateLimiter()), secret


# Not checked: that every request the schema allows is accepted and every one it forbids refused (the API is
# stricter than JSON Schema in one place: `"k": 15.0` is an integer to JSON Schema and a 400 to the API); and,
# for mutated requests, that their 400 is among the documented statuses (the spec lists only each success).
UNCHECKED = {GenerationMode.POSITIVE: [positive_data_acceptance, negative_data_rejection],
             GenerationMode.NEGATIVE: [positive_data_acceptance, negative_data_rejection, status_code_conformance]}


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_request_the_spec_allows_breaks_the_api(served: tuple[FastAPI, str], mode: GenerationMode) -> None:
    """25 generated requests per operation, valid by the spec or mutated from it, each checked for a 5xx and for a
    response its schema does not describe; every request carries the key, so each reaches the operation itself.
    (Driven by hand: schemathesis's pytest plugin does not run under this pytest.)"""
    app, secret = served
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 3

    for operation in operations:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=25, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def call(case: schemathesis.Case) -> None:
            case.call_and_validate(headers={"Authorization": f"Bearer {secret}"}, excluded_checks=UNCHECKED[mode])

        try:
            call()
        except Unsatisfiable:  # an operation with no parameters and no body has nothing to mutate
            assert mode is GenerationMode.NEGATIVE
