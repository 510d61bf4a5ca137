"""The agent-facing commands: `serve` (HTTP API + web inspector), `mcp` (stdio or streamable HTTP),
`keys create|list|rotate|revoke`, and `tool-schema`. Registered on the main app by `register(app)`.

The web server and the MCP SDK are imported only by the commands that need them, so the rest of the CLI
starts without them; a missing one is `BackendUnavailable` with the install command.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from evidex.errors import BackendUnavailable
from evidex.interfaces import tool
from evidex.interfaces.cli_runtime import ConfigOpt, IndexOpt, build_config, err, open_engine, out, require_index, run
from evidex.interfaces.keys import DEFAULT_RATE_PER_MIN, KEYS_FILE, KeyStore, RateLimiter, rates_path

if TYPE_CHECKING:
    from evidex.engine import Engine

KeysOpt = Annotated[Path | None, typer.Option("--keys", help=f"API key file (default: <index>/{KEYS_FILE})",
                                              envvar="EVIDEX_KEYS_FILE")]
HostOpt = Annotated[str, typer.Option("--host", help="interface to bind; keep 127.0.0.1 unless a proxy fronts it")]

SERVER_EXTRA = "pip install -e '.[server]'"


class McpTransport(enum.Enum):
    STDIO = "stdio"
    HTTP = "http"

    @classmethod
    def from_str(cls, value: str) -> McpTransport:
        try:
            return cls(value.strip().lower())
        except ValueError:
            raise typer.BadParameter(f"unknown transport {value!r}; choose one of: "
                                     f"{', '.join(m.value for m in cls)}", param_hint="--transport") from None


def open_keys(config: Path | None, index: Path | None, keys: Path | None) -> KeyStore:
    """The key store beside the index (or at --keys). Keys written beside a mistyped --index had been kept
    in a new directory that no server ever reads."""
    if keys is not None:
        return run(lambda: KeyStore(keys))
    cfg = run(lambda: build_config(config, index))
    require_index(cfg)
    return run(lambda: KeyStore(cfg.index_dir / KEYS_FILE))


def _check_server_deps() -> None:
    try:
        import fastapi  # noqa: F401
        import mcp  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise BackendUnavailable(f"the HTTP and MCP servers need: {SERVER_EXTRA} ({exc})") from None


def _is_loopback(host: str) -> bool:
    return host in {"127.0.0.1", "localhost", "::1"} or host.startswith("127.")


WorkersOpt = Annotated[int, typer.Option("--workers", min=1, max=64,
                                         help="processes, each with its own engine (about one core each); "
                                              "a key's rate is shared by all of them")]


def worker_settings(config: Path | None, engine: Engine, store: KeyStore, **more: Any) -> dict[str, Any]:
    """What each worker process opens (see `evidex.interfaces.http.serve_workers`): the config file, the index,
    the key file, and `more` for its app."""
    return {"config": str(config.resolve()) if config else None, "index": str(engine.config.index_dir.resolve()),
            "keys": str(store.path.resolve()), **more}


def serve_cmd(
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8700,
    max_body_bytes: Annotated[int, typer.Option("--max-body-bytes", min=256)] = 16384,
    max_k: Annotated[int, typer.Option("--max-k", min=1, max=tool.MAX_K)] = tool.MAX_K,
    workers: WorkersOpt = 1,
    config: ConfigOpt = None, index: IndexOpt = None, keys: KeysOpt = None,
) -> None:
    """Serve the HTTP API (POST /v1/search_with_reasoning) and the web inspector at /."""
    run(_check_server_deps)
    from evidex.engine import ready_to_serve  # `serve --workers N` readies each worker's own (`WorkerParts`)
    from evidex.interfaces.http import create_app, serve, serve_workers

    if not _is_loopback(host):
        err.print(f"[yellow]binding {escape(host)}[/]: serve plain HTTP only behind a TLS-terminating proxy",
                  highlight=False, soft_wrap=True)
    with open_engine(config, index) as engine, open_keys(config, index, keys) as store:
        if not any(r.is_valid(store.now()) for r in store.list()):
            err.print(f"[yellow]no valid API key in {escape(str(store.path))}[/]: create one with "
                      "`evidex keys create NAME --principal WHO --label LABEL`", highlight=False, soft_wrap=True)
        if workers == 1:
            ready_to_serve(engine)  # before saying where: the first request then finds the engine warm
        processes = f", {workers} workers" if workers > 1 else ""
        err.print(f"evidex: API and inspector on http://{escape(host)}:{port}/ (keys: {escape(str(store.path))}"
                  f"{processes})", highlight=False, soft_wrap=True)
        if workers == 1:
            with RateLimiter(rates_path(store.path)) as limiter:
                serve(create_app(engine, store, max_body_bytes=max_body_bytes, max_k=max_k, limiter=limiter),
                      host=host, port=port)
            return
        settings = worker_settings(config, engine, store, max_body_bytes=max_body_bytes, max_k=max_k)
    serve_workers(settings, workers=workers, host=host, port=port)


def mcp_cmd(
    transport: Annotated[str, typer.Option("--transport", help="stdio | http (streamable HTTP)")] = "stdio",
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8701,
    workers: WorkersOpt = 1,
    config: ConfigOpt = None, index: IndexOpt = None, keys: KeysOpt = None,
) -> None:
    """Serve the MCP tool search_with_reasoning. stdio runs as the configured principal
    (gate.default_principal / gate.default_labels); http takes the principal from each request's API key."""
    mode = McpTransport.from_str(transport)
    if mode is McpTransport.STDIO and workers > 1:
        raise typer.BadParameter("needs --transport http: a stdio server is one process, its client's",
                                 param_hint="--workers")
    run(_check_server_deps)
    from evidex.engine import ready_to_serve
    from evidex.interfaces import mcp_server
    from evidex.interfaces.http import serve_workers

    if mode is McpTransport.STDIO:  # stdout is the protocol: nothing else may be printed there
        with open_engine(config, index) as engine:
            ready_to_serve(engine)
            mcp_server.run_stdio(engine)
        return
    if not _is_loopback(host):
        err.print(f"[yellow]binding {escape(host)}[/]: serve plain HTTP only behind a TLS-terminating proxy",
                  highlight=False, soft_wrap=True)
    with open_engine(config, index) as engine, open_keys(config, index, keys) as store:
        if workers == 1:
            ready_to_serve(engine)
        processes = f", {workers} workers" if workers > 1 else ""
        err.print(f"evidex: MCP (streamable HTTP) on http://{escape(host)}:{port}{mcp_server.MCP_PATH} "
                  f"(keys: {escape(str(store.path))}{processes})", highlight=False, soft_wrap=True)
        if workers == 1:
            mcp_server.run_http(engine, store, host=host, port=port)
            return
        settings = worker_settings(config, engine, store, host=host)
    serve_workers(settings, workers=workers, host=host, port=port, app=f"{mcp_server.__name__}:worker_app")


keys_app = typer.Typer(no_args_is_help=True, help="API keys: each carries a principal and its access labels.")


@keys_app.command("create")
def keys_create_cmd(
    name: Annotated[str, typer.Argument(help="a name for the key (e.g. the agent or team using it)")],
    principal: Annotated[str, typer.Option("--principal", help="who the key acts as")],
    label: Annotated[list[str] | None, typer.Option(
        "--label", help="access labels granted (repeatable, or comma-separated)")] = None,
    rate: Annotated[int, typer.Option("--rate", min=1, help="requests per minute")] = DEFAULT_RATE_PER_MIN,
    config: ConfigOpt = None, index: IndexOpt = None, keys: KeysOpt = None,
) -> None:
    """Create a key and print it once (stdout); only its hash is stored."""
    # "--label a,b" grants two labels, as "--labels a,b" reads two for query and ask (it had granted one: "a,b").
    labels = [x.strip() for given in label or [] for x in given.split(",") if x.strip()]
    with open_keys(config, index, keys) as store:
        plaintext, record = run(lambda: store.create(name, principal, labels, rate))
    err.print(f"created key [bold]{escape(record.name)}[/] ({record.key_id}) for principal "
              f"{escape(record.principal)} with labels {escape(str(list(record.labels)))}, {record.rate_per_min}/min. "
              "Store it now: it is not shown again.", highlight=False, soft_wrap=True)
    typer.echo(plaintext)


@keys_app.command("list")
def keys_list_cmd(
    json_out: Annotated[bool, typer.Option("--json")] = False,
    config: ConfigOpt = None, index: IndexOpt = None, keys: KeysOpt = None,
) -> None:
    """Every key with its principal, labels, rate and status (never the key itself)."""
    with open_keys(config, index, keys) as store:
        records = run(store.list)
        now = store.now()
    if json_out:
        out.print_json(data=[r.to_dict(now) for r in records])
        return
    table = Table("name", "key id", "principal", "labels", "rate/min", "status", "created", "expires", "revoked")
    for r in records:
        table.add_row(r.name, r.key_id, r.principal, ", ".join(r.labels), str(r.rate_per_min), r.status(now),
                      _when(r.created_at), _when(r.expires_at), _when(r.revoked_at))
    out.print(table)


@keys_app.command("rotate")
def keys_rotate_cmd(
    name: str,
    grace: Annotated[float, typer.Option("--grace", min=0, help="seconds the old key keeps working")] = 3600.0,
    config: ConfigOpt = None, index: IndexOpt = None, keys: KeysOpt = None,
) -> None:
    """Issue a new key for NAME (printed once); the old one works for --grace seconds more."""
    with open_keys(config, index, keys) as store:
        plaintext, record = run(lambda: store.rotate(name, grace))
    err.print(f"rotated key [bold]{escape(name)}[/]: new key id {record.key_id}; the old key stops working in "
              f"{grace:g} s. Store the new key now: it is not shown again.", highlight=False, soft_wrap=True)
    typer.echo(plaintext)


@keys_app.command("revoke")
def keys_revoke_cmd(name: str, config: ConfigOpt = None, index: IndexOpt = None, keys: KeysOpt = None) -> None:
    """Revoke every key of NAME, effective on the next request."""
    with open_keys(config, index, keys) as store:
        count = run(lambda: store.revoke(name))
    out.print(f"revoked {count} key(s) named {escape(name)}", highlight=False, soft_wrap=True)


def tool_schema_cmd(
    fmt: Annotated[str, typer.Option("--format", help="openai | anthropic | mcp")] = "openai",
) -> None:
    """Print the search_with_reasoning tool definition as function-calling JSON."""
    schema_format = run(lambda: tool.SchemaFormat.from_str(fmt))
    typer.echo(json.dumps(tool.definition(schema_format), indent=2))


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


def register(app: typer.Typer) -> None:
    """Add serve, mcp, keys and tool-schema to the `evidex` app."""
    app.command("serve")(serve_cmd)
    app.command("mcp")(mcp_cmd)
    app.add_typer(keys_app, name="keys")
    app.command("tool-schema")(tool_schema_cmd)

