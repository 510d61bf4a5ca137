"""The HTTP API in-process (FastAPI's TestClient) on a real index of the sample handbook: keys, rates,
limits, argument errors, the admission gate as seen over HTTP, the error mapping, OpenAPI and logs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import jsonschema
import pytest
from fastapi.testclient import TestClient
from interfaces_support import (
    ENGINEERING,
    MARKER,
    RESTRICTED_QUESTIONS,
    SECURITY,
    TickClock,
    WallClock,
    live_server,
)

from evidex.engine import Engine
from evidex.errors import (
    AccessDenied,
    BackendUnavailable,
    ConfigError,
    EmbeddingError,
    IngestError,
    StageError,
    StoreError,
)
from evidex.interfaces import tool
from evidex.interfaces.http import SEARCH_PATH, STATIC_DIR, api_error, create_app
from evidex.interfaces.keys import KeyStore, RateLimiter


@pytest.fixture
def client(handbook_engine: Engine, keys: KeyStore, limiter: RateLimiter) -> Iterator[TestClient]:
    with TestClient(create_app(handbook_engine, keys, limiter=limiter), raise_server_exceptions=False) as c:
        yield c


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def ask(client: TestClient, key: str | None, body: Any = None, **headers: str) -> Any:
    h = {**(bearer(key) if key else {}), **headers}
    return client.post(SEARCH_PATH, json={"query": "how are database backups restored?"} if body is None else body,
                       headers=h)


def error_of(response: Any) -> dict[str, str]:
    data = response.json()
    assert set(data) == {"error"} and set(data["error"]) == {"code", "message"}
    assert "Traceback" not in response.text
    return data["error"]  # type: ignore[no-any-return]


def test_a_key_gets_a_real_result(client: TestClient, keys: KeyStore) -> None:
    key, _ = keys.create("agent", "alice", ENGINEERING)
    r = ask(client, key, {"query": "How do I restore a Postgres backup?", "aspect_focus": "restore", "k": 5})
    assert r.status_code == 200, r.text
    result = r.json()
    jsonschema.validate(result, tool.OUTPUT_SCHEMA)
    assert result["request"]["principal"] == {"name": "alice", "labels": ["engineering-read"]}
    assert (result["request"]["k"], result["request"]["aspect_focus"]) == (5, "restore")
    assert result["decision"]["recommendation"]["action"] in {"proceed", "re-query", "stop"}
    chunks = [c for group in result["evidence"] for c in group["chunks"]]
    assert 1 <= len(chunks) <= 5
    assert any("postgres" in g["source"] or "backup" in g["source"] for g in result["evidence"])
    assert all(c["citation"] and c["citation"].startswith("https://") for c in chunks)
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"
    same = ask(client, None, {"query": "How do I restore a Postgres backup?", "aspect_focus": "restore", "k": 5},
               **{"X-API-Key": key})
    assert same.status_code == 200
    assert same.json()["decision"] == result["decision"]


BAD_KEY = "evx_0123456789ab_" + "A" * 43


@pytest.mark.parametrize(("headers", "secret"), [
    ({}, None),
    ({"Authorization": "Bearer "}, None),
    ({"Authorization": "Basic YWxpY2U6c2VjcmV0"}, "YWxpY2U6c2VjcmV0"),
    ({"Authorization": f"Bearer {BAD_KEY}"}, BAD_KEY),
    ({"X-API-Key": "not-a-key"}, "not-a-key"),
])
def test_401_without_a_valid_key(client: TestClient, headers: dict[str, str], secret: str | None) -> None:
    r = client.post(SEARCH_PATH, json={"query": "backups"}, headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert error_of(r)["code"] == "unauthorized"
    assert secret is None or secret not in r.text


def test_401_comes_before_looking_at_the_body(client: TestClient) -> None:
    r = client.post(SEARCH_PATH, json={"query": "x", "principal": "root", "labels": ["security-team"]})
    assert r.status_code == 401


def test_revoked_key_is_refused_on_the_next_request(client: TestClient, keys: KeyStore) -> None:
    key, _ = keys.create("agent", "alice", ENGINEERING)
    assert ask(client, key).status_code == 200
    keys.revoke("agent")
    r = ask(client, key)
    assert r.status_code == 401 and "revoked" in error_of(r)["message"]


def test_rotated_key_works_inside_the_grace_period_only(client: TestClient, keys: KeyStore,
                                                       wall_clock: WallClock) -> None:
    old, _ = keys.create("agent", "alice", ENGINEERING)
    new, _ = keys.rotate("agent", grace_s=30)
    wall_clock.advance(29)
    assert ask(client, old).status_code == 200
    assert ask(client, new).status_code == 200
    wall_clock.advance(1)
    assert ask(client, old).status_code == 401
    assert ask(client, new).status_code == 200


def test_429_over_the_rate_with_retry_after(client: TestClient, keys: KeyStore, tick_clock: TickClock) -> None:
    key, _ = keys.create("agent", "alice", ENGINEERING, rate_per_min=2)
    other, _ = keys.create("other", "bob", ENGINEERING, rate_per_min=2)
    assert [ask(client, key).status_code for _ in range(2)] == [200, 200]
    r = ask(client, key)
    assert r.status_code == 429
    assert r.headers["retry-after"] == "30"
    assert error_of(r)["code"] == "rate-limited"
    assert ask(client, other).status_code == 200  # another key has its own bucket
    tick_clock.advance(30)
    assert ask(client, key).status_code == 200


def test_413_for_a_body_over_the_limit(handbook_engine: Engine, keys: KeyStore) -> None:
    key, _ = keys.create("agent", "alice", ENGINEERING)
    with TestClient(create_app(handbook_engine, keys, max_body_bytes=1024)) as c:
        r = c.post(SEARCH_PATH, json={"query": "x" * 2000}, headers=bearer(key))
        assert r.status_code == 413 and error_of(r)["code"] == "body-too-large"

        def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"query": "'
            for _ in range(10):
                yield b"y" * 200
            yield b'"}'

        r = c.post(SEARCH_PATH, content=chunked(), headers={**bearer(key), "Content-Type": "application/json"})
        assert r.status_code == 413 and error_of(r)["code"] == "body-too-large"
        assert c.post(SEARCH_PATH, json={"query": "backups"}, headers=bearer(key)).status_code == 200


@pytest.mark.parametrize(("body", "message"), [
    ({"query": "x", "k": 0}, "k: must be between 1 and 50 (got 0)"),
    ({"query": "x", "k": 51}, "k: must be between 1 and 50 (got 51)"),
    ({"query": "x", "k": "ten"}, "k: must be an integer"),
    ({"query": "x", "k": "5"}, "k: must be an integer"),
    ({"query": "x", "k": 5.0}, "k: must be an integer"),
    ({"query": "x", "principal": "root"}, "unknown argument(s) ['principal']"),
    ({"query": "x", "labels": ["security-team"]}, "unknown argument(s) ['labels']"),
    ({"query": ""}, "query: must not be empty"),
    ({"aspect_focus": "x"}, "query: required"),
    ([1, 2], "body: a JSON object with 'query' is required"),
])
def test_400_names_the_bad_argument(client: TestClient, keys: KeyStore, body: Any, message: str) -> None:
    key, _ = keys.create("agent", "alice", ENGINEERING)
    r = ask(client, key, body)
    assert r.status_code == 400
    error = error_of(r)
    assert error["code"] == "invalid-argument"
    assert message in error["message"]


def test_400_for_invalid_json_and_for_k_over_the_deployment_limit(handbook_engine: Engine, keys: KeyStore) -> None:
    key, _ = keys.create("agent", "alice", ENGINEERING)
    with TestClient(create_app(handbook_engine, keys, max_k=5)) as c:
        r = c.post(SEARCH_PATH, content=b'{"query": ', headers={**bearer(key), "Content-Type": "application/json"})
        assert r.status_code == 400 and error_of(r)["message"] == "body: not valid JSON"
        r = c.post(SEARCH_PATH, content=b'{"query": "x"}', headers={**bearer(key), "Content-Type": "text/plain"})
        assert r.status_code == 400 and "Content-Type: application/json" in error_of(r)["message"]
        r = c.post(SEARCH_PATH, json={"query": "x", "k": 6}, headers=bearer(key))
        assert r.status_code == 400 and error_of(r)["message"] == "k: must be between 1 and 5 (got 6)"
        r = c.post(SEARCH_PATH, json={"query": "x", "k": 60}, headers=bearer(key))  # over the tool's own limit too
        assert r.status_code == 400 and error_of(r)["message"] == "k: must be between 1 and 5 (got 60)"
        # Without a valid key the body is not judged at all: 401, whatever it holds.
        for headers in ({}, bearer("evx_not-a-key")):
            r = c.post(SEARCH_PATH, content=b'{"query": ', headers={**headers, "Content-Type": "application/json"})
            assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
        assert c.post(SEARCH_PATH, json={"query": "x", "k": 5}, headers=bearer(key)).status_code == 200
        # The schemas an agent reads say this server's limit, not the tool's (they had said 50, default 10).
        k = c.get("/v1/tool", params={"format": "openai"}).json()["function"]["parameters"]["properties"]["k"]
        assert (k["maximum"], k["default"]) == (5, 5)
        body = c.get("/openapi.json").json()["components"]["schemas"]["SearchBody"]["properties"]["k"]
        assert [v["maximum"] for v in body["anyOf"] if v.get("type") == "integer"] == [5]


def test_restricted_text_reaches_only_a_principal_with_the_label(client: TestClient, keys: KeyStore) -> None:
    eng, _ = keys.create("eng", "erin", ENGINEERING, rate_per_min=100)
    sec, _ = keys.create("sec", "sam", SECURITY, rate_per_min=100)
    seen_by_security = 0
    for question in RESTRICTED_QUESTIONS:
        for k in (5, 50):
            as_sec = ask(client, sec, {"query": question, "k": k})
            as_eng = ask(client, eng, {"query": question, "k": k})
            assert as_sec.status_code == as_eng.status_code == 200
            seen_by_security += MARKER in as_sec.text
            assert MARKER not in as_eng.text
            hidden = {c["record_id"] for g in as_sec.json()["evidence"] for c in g["chunks"]
                      if "security-team" in c["provenance"]["access_labels"]}
            assert hidden and not any(record_id in as_eng.text for record_id in hidden)  # not even the ids
            rejected = as_eng.json()["rejected"]
            # No family is declared here, and the requester's own words never reach a record they may not
            # read: nothing restricted is even counted, so a question cannot probe for one.
            assert rejected["rejected_counts"]["access-label-not-granted"] == 0
            for r in rejected["rejected"]:
                assert set(r) <= {"record_id", "reason", "source", "superseded_by"}
    assert seen_by_security == 2 * len(RESTRICTED_QUESTIONS)
    hsm = ask(client, sec, {"query": RESTRICTED_QUESTIONS[0]}).json()
    restricted = [c for g in hsm["evidence"] for c in g["chunks"] if MARKER in c["text"]]
    assert restricted and all("security-team" in c["provenance"]["access_labels"] for c in restricted)


def test_request_log_holds_no_query_and_no_result_text(client: TestClient, keys: KeyStore,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    sec, _ = keys.create("sec", "sam", SECURITY)
    caplog.set_level(logging.DEBUG)
    r = ask(client, sec, {"query": RESTRICTED_QUESTIONS[0]})
    assert MARKER in r.text
    messages = [rec.getMessage() for rec in caplog.records]
    assert any(f"testclient POST {SEARCH_PATH} 200 key=sec" in m for m in messages)
    logged = "\n".join(messages)
    assert MARKER not in logged and "ceremony" not in logged.lower() and sec not in logged


def test_engine_failure_is_500_without_details(handbook_engine: Engine, keys: KeyStore,
                                               caplog: pytest.LogCaptureFixture) -> None:
    key, _ = keys.create("agent", "alice", ENGINEERING)
    with TestClient(create_app(handbook_engine, keys), raise_server_exceptions=False) as c:
        handbook_engine.store.close()  # a real failure inside the pipeline
        r = c.post(SEARCH_PATH, json={"query": "backups"}, headers=bearer(key))
    assert r.status_code == 500
    error = error_of(r)
    assert error["code"] in {"stage-failed", "internal-error"}
    assert "sqlite" not in r.text.lower() and "closed" not in r.text.lower()
    assert any("failed" in rec.getMessage() for rec in caplog.records if rec.name == "evidex.http")


@pytest.mark.parametrize(("exc", "status", "code"), [
    (tool.ToolInputError("k: bad"), 400, "invalid-argument"),
    (AccessDenied("label x"), 403, "forbidden"),
    (BackendUnavailable("pip install x"), 503, "unavailable"),
    (EmbeddingError("model"), 503, "unavailable"),
    (StageError("rerank", "ValueError: secret text"), 500, "stage-failed"),
    (ConfigError("key"), 500, "internal-error"),
    (StoreError("rollback"), 500, "internal-error"),
    (IngestError("bad line"), 500, "internal-error"),
    (RuntimeError("RESTRICTED-MARKER: leaked"), 500, "internal-error"),
])
def test_error_mapping(exc: Exception, status: int, code: str) -> None:
    error = api_error(exc)
    assert (error.status, error.code) == (status, code)
    if status >= 500 or status == 403:
        assert str(exc) not in error.message  # server-side details stay in the server log


def test_health_tool_openapi_and_404(client: TestClient) -> None:
    health = client.get("/v1/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert client.get("/v1/tool").json() == tool.definition(tool.SchemaFormat.MCP)
    assert client.get("/v1/tool", params={"format": "openai"}).json() == tool.definition(tool.SchemaFormat.OPENAI)
    assert client.get("/v1/tool", params={"format": "yaml"}).status_code == 400
    assert error_of(client.get("/v1/nope"))["code"] == "not-found"
    assert client.get("/docs").status_code == 404  # Swagger UI would load a CDN
    spec = client.get("/openapi.json").json()
    op = spec["paths"][SEARCH_PATH]["post"]
    ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    body = spec["components"]["schemas"][ref]
    assert set(body["properties"]) == {"query", "aspect_focus", "k"}
    assert body["additionalProperties"] is False and body["required"] == ["query"]
    assert op["responses"]["200"]["content"]["application/json"]["schema"] == json.loads(
        json.dumps(tool.OUTPUT_SCHEMA))
    assert {"400", "401", "413", "429"} <= set(op["responses"]) and "422" not in op["responses"]
    assert "HTTPValidationError" not in json.dumps(spec)
    schemes = spec["components"]["securitySchemes"]
    assert {s["type"] for s in schemes.values()} == {"http", "apiKey"}


def test_inspector_is_served_self_contained(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    for name in ("inspector.js", "inspector.css"):
        assert client.get(f"/static/{name}").status_code == 200
    for path in STATIC_DIR.iterdir():
        text = path.read_text(encoding="utf-8")
        assert "//cdn" not in text and "googleapis" not in text
        for tag in ('src="http', "src='http", 'href="http', "@import"):
            assert tag not in text, (path.name, tag)
    js = (STATIC_DIR / "inspector.js").read_text(encoding="utf-8")
    for sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in js, sink


def test_concurrent_callers_each_get_their_own_principal(handbook_engine: Engine, keys: KeyStore) -> None:
    """Over a real socket, many requests at once: every answer is computed for the key that asked."""
    issued = {name: keys.create(name, name, SECURITY if name.startswith("sec") else ENGINEERING,
                                rate_per_min=100)[0] for name in ("sec1", "sec2", "eng1", "eng2")}
    with live_server(create_app(handbook_engine, keys)) as base, httpx2.Client(base_url=base, timeout=60) as http:

        def one(i: int) -> tuple[str, Any]:
            name = sorted(issued)[i % 4]
            r = http.post(SEARCH_PATH, json={"query": RESTRICTED_QUESTIONS[i % 3]}, headers=bearer(issued[name]))
            return name, r

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(one, range(24)))
    for name, r in answers:
        assert r.status_code == 200, r.text
        assert r.json()["request"]["principal"]["name"] == name
        if name.startswith("eng"):
            assert MARKER not in r.text
