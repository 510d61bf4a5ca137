"""The agent commands through typer's runner: keys create / list / rotate / revoke, and how `serve` and
`mcp --transport http` wire the engine, the key file and the options (the blocking uvicorn runner is
replaced by one that drives the app in-process and returns)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from evidex.interfaces import http as http_module
from evidex.interfaces import mcp_server
from evidex.interfaces.cli_agents import register
from evidex.interfaces.keys import KeyStore
from evidex.stores.sqlite import SqliteStore

Invoke = Callable[..., Result]


def _agents_app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture
def invoke(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    monkeypatch.chdir(tmp_path)  # no stray ./evidex.toml
    SqliteStore(tmp_path / "idx").close()  # an (empty) index: the serving commands refuse to start without one
    app = _agents_app()
    runner = CliRunner()
    env = {"EVIDEX_EMBEDDING_CACHE_DIR": str(cache_dir), "EVIDEX_CONFIG": None, "EVIDEX_KEYS_FILE": None}

    def run(*args: str) -> Result:
        return runner.invoke(app, [*args, "--index", str(tmp_path / "idx")], env=env)

    return run


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.output, result.stderr)
    return result


def test_keys_lifecycle(invoke: Invoke, tmp_path: Path) -> None:
    created = ok(invoke("keys", "create", "agent", "--principal", "alice", "--label", "engineering-read",
                        "--label", "security-team", "--rate", "30"))
    plaintext = created.stdout.strip()
    assert plaintext.startswith("evx_") and "\n" not in plaintext  # stdout holds the key alone
    assert "not shown again" in created.stderr
    store_path = tmp_path / "idx" / "keys.sqlite"
    with KeyStore(store_path) as store:
        record = store.authenticate(plaintext)
        assert record is not None and record.labels == ("engineering-read", "security-team")

    listed = json.loads(ok(invoke("keys", "list", "--json")).stdout)
    assert [(k["name"], k["principal"], k["rate_per_min"], k["status"]) for k in listed] == [
        ("agent", "alice", 30, "active")]
    assert plaintext not in json.dumps(listed)
    table = ok(invoke("keys", "list")).stdout
    assert "agent" in table and "alice" in table and plaintext not in table

    rotated = ok(invoke("keys", "rotate", "agent", "--grace", "120"))
    new = rotated.stdout.strip()
    assert new.startswith("evx_") and new != plaintext and "120 s" in rotated.stderr
    statuses = sorted(k["status"] for k in json.loads(ok(invoke("keys", "list", "--json")).stdout))
    assert statuses == ["active", "active (rotating out)"]

    assert "revoked 2 key(s)" in ok(invoke("keys", "revoke", "agent")).stdout
    with KeyStore(store_path) as store:
        assert store.authenticate(plaintext) is None and store.authenticate(new) is None


def test_keys_errors_are_one_line_with_exit_code_3(invoke: Invoke) -> None:
    ok(invoke("keys", "create", "agent", "--principal", "alice", "--label", "x"))
    again = invoke("keys", "create", "agent", "--principal", "alice", "--label", "x")
    assert again.exit_code == 3 and "rotate or revoke it first" in again.stderr
    assert "Traceback" not in again.output
    assert invoke("keys", "revoke", "ghost").exit_code == 3
    assert invoke("keys", "rotate", "ghost").exit_code == 3
    for grace in ("inf", "1e12"):  # beyond any date: a one-line error, not an OverflowError traceback
        too_long = invoke("keys", "rotate", "agent", "--grace", grace)
        assert too_long.exit_code == 3 and "grace period" in too_long.stderr and "Traceback" not in too_long.output
    assert invoke("keys", "create", "b", "--principal", "bob", "--rate", "0").exit_code == 2  # usage error


def test_serve_wires_engine_keys_and_limits(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    ok(invoke("keys", "create", "agent", "--principal", "alice", "--label", "engineering-read"))
    seen: dict[str, Any] = {}

    def fake_serve(app: Any, *, host: str, port: int) -> None:
        seen.update(host=host, port=port)
        with TestClient(app) as client:
            seen["health"] = client.get("/v1/health").status_code
            seen["no key"] = client.post("/v1/search_with_reasoning", json={"query": "q"}).status_code
            seen["big"] = client.post("/v1/search_with_reasoning", json={"query": "q" * 600},
                                      headers={"X-API-Key": "x"}).status_code
            seen["k"] = client.post("/v1/search_with_reasoning", json={"query": "q", "k": 4}).status_code

    monkeypatch.setattr(http_module, "serve", fake_serve)
    result = ok(invoke("serve", "--port", "9123", "--max-body-bytes", "512", "--max-k", "3"))
    assert "http://127.0.0.1:9123/" in result.stderr
    assert seen == {"host": "127.0.0.1", "port": 9123, "health": 200, "no key": 401, "big": 413, "k": 401}
    assert "no valid API key" not in result.stderr


def test_serve_warns_without_keys_and_off_loopback(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_module, "serve", lambda app, *, host, port: None)
    result = ok(invoke("serve", "--host", "0.0.0.0"))
    assert "no valid API key" in result.stderr and "TLS-terminating proxy" in result.stderr


def test_mcp_http_transport_wiring(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_run_http(engine: Any, keys: KeyStore, *, host: str, port: int) -> None:
        seen.update(engine=type(engine).__name__, keys=keys.path.name, host=host, port=port)

    monkeypatch.setattr(mcp_server, "run_http", fake_run_http)
    result = ok(invoke("mcp", "--transport", "HTTP", "--port", "9124"))
    assert seen == {"engine": "Engine", "keys": "keys.sqlite", "host": "127.0.0.1", "port": 9124}
    assert "/mcp" in result.stderr
    bad = invoke("mcp", "--transport", "sse")
    assert bad.exit_code == 2 and "unknown transport 'sse'" in bad.output
    one_process = invoke("mcp", "--transport", "stdio", "--workers", "2")
    assert one_process.exit_code == 2 and "--transport http" in one_process.output


def test_serving_a_missing_index_is_an_error(invoke: Invoke, tmp_path: Path) -> None:
    """A mistyped --index had silently created an empty index and answered every question with a stop."""
    for args in (("serve",), ("mcp", "--transport", "stdio"), ("keys", "list"),
                 ("keys", "create", "typo", "--principal", "t", "--label", "engineering-read")):
        result = CliRunner().invoke(_agents_app(), [*args, "--index", str(tmp_path / "typo")])
        assert result.exit_code == 2 and "no index at" in result.stderr, args
        assert not (tmp_path / "typo").exists()  # no key store that no server would ever read


def test_key_labels_may_be_comma_separated(invoke: Invoke, tmp_path: Path) -> None:
    """As `--labels a,b` reads two labels for query and ask; `--label a,b` had granted the one label "a,b"."""
    plaintext = ok(invoke("keys", "create", "agent", "--principal", "alice", "--label", "engineering-read, ops",
                          "--label", "security-team")).stdout.strip()
    with KeyStore(tmp_path / "idx" / "keys.sqlite") as store:
        record = store.authenticate(plaintext)
        assert record is not None and record.labels == ("engineering-read", "ops", "security-team")
