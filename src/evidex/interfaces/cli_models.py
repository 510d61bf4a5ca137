"""The models and the embedding cache every index shares: `setup` builds the default embedder,
`export-cross-encoder` makes a cross-encoder run without torch, and `cache [prune]` shows the cache and trims
it. `cli.py` adds them to the app."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from evidex.config import load_config
from evidex.embedding.cache import EmbeddingCache
from evidex.engine import configured_embedder
from evidex.interfaces.cli_runtime import ConfigOpt, out, plural, run


def setup_cmd(config: ConfigOpt = None) -> None:
    """Build the default embedding model (ONNX int8, from the packaged weights; no download)."""
    cfg = run(lambda: load_config(config))
    embedder = run(lambda: configured_embedder(cfg))
    out.print(f"embedder ready: {embedder.fingerprint} (dim {embedder.dim})")


def export_cross_encoder_cmd(
    source: Annotated[Path, typer.Argument(help="a local transformers / sentence-transformers cross-encoder")],
    target: Annotated[Path, typer.Argument(help="where to write model.onnx, tokenizer.json and config.json")],
    int8: Annotated[bool, typer.Option("--int8", help="quantise the weights (about 2x faster on a CPU)")] = False,
) -> None:
    """Export a cross-encoder to ONNX once (needs torch), so `evidence.cross_encoder_dir` runs it without."""
    from evidex.rerank.cross_encoder import export_onnx

    written = run(lambda: export_onnx(source.expanduser(), target.expanduser(), int8=int8))
    out.print(f"wrote {written}: set cross_encoder_dir = \"{written}\" in the \\[evidence] section of "
              "evidex.toml", highlight=False)


cache_app = typer.Typer(invoke_without_command=True,
                        help="The embedding cache every index shares: what it holds; prune what no model in use needs.")


@contextmanager
def _configured_cache(config: Path | None) -> Iterator[tuple[EmbeddingCache, str]]:
    """The configured embedding cache, open, and the fingerprint of the configured model."""
    cfg = run(lambda: load_config(config))
    configured = run(lambda: configured_embedder(cfg)).fingerprint
    cache = EmbeddingCache(cfg.cache_dir)
    try:
        yield cache, configured
    finally:
        cache.close()


def _cache_report(cache: EmbeddingCache, configured: str) -> dict[str, Any]:
    return {"path": str(cache.path), "bytes": _cache_bytes(cache.path), "configured_model": configured,
            "models": cache.models()}


def _cache_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.is_file())


@cache_app.callback()
def cache_cmd(ctx: typer.Context, config: ConfigOpt = None,
              json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Where the cache is, its size, and its vectors per model (the configured one marked)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = config
        return
    with _configured_cache(config) as (cache, configured):
        report = _cache_report(cache, configured)
    if json_out:
        out.print_json(data=report)
        return
    out.print(f"{escape(report['path'])}: {report['bytes'] / 1e6:.1f} MB", highlight=False)
    table = Table("model", "vectors")
    for model, count in report["models"].items():
        table.add_row(escape(model) + (" (configured)" if model == configured else ""), str(count))
    out.print(table)


@cache_app.command("prune")
def cache_prune_cmd(
    ctx: typer.Context,
    keep_model: Annotated[list[str] | None, typer.Option(
        "--keep-model", help="also keep this model's vectors (a fingerprint from `evidex cache`; repeatable)")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="say what would be deleted, delete nothing")] = False,
    config: ConfigOpt = None,
) -> None:
    """Delete the vectors of every model but the configured one (and --keep-model), and give the space back.
    Indexes keep their own vectors: a deleted one is only computed again if its text is ingested with its
    model."""
    with _configured_cache(config or ctx.obj) as (cache, configured):
        keep = {configured, *(keep_model or [])}
        before = _cache_report(cache, configured)
        doomed = {m: n for m, n in before["models"].items() if m not in keep}
        if not doomed:
            out.print("nothing to prune: the cache holds only the vectors of models kept", highlight=False)
            return
        if dry_run:
            out.print(f"would delete {plural(sum(doomed.values()), 'vector')} of {plural(len(doomed), 'other model')}"
                      + "".join(f"\n  {escape(m)}: {n}" for m, n in doomed.items()), highlight=False)
            return
        deleted = run(lambda: cache.drop_models(keep))
        after = _cache_bytes(cache.path)
    out.print(f"deleted {plural(deleted, 'vector')} of {plural(len(doomed), 'other model')}: "
              f"{before['bytes'] / 1e6:.1f} MB -> {after / 1e6:.1f} MB", highlight=False)
