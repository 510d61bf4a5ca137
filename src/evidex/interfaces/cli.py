"""The `evidex` command line: a thin layer over `Engine`. This module is the app and its list of commands;
the commands live with their concept:

- `cli_index`: ingest, stats, batches, rollback, dead-letters, export, import
- `cli_query`: search, show, query, replay, verify, demo, ask
- `cli_evaluation`: eval, calibrate, bench
- `cli_models`: setup, export-cross-encoder, cache
- `cli_agents`: serve, mcp, keys, tool-schema

and what they share (consoles, options, opening the engine) in `cli_runtime`, where `run` turns domain errors
into one-line messages and exit codes, in one place.
"""

from __future__ import annotations

from typing import Annotated

import typer

from evidex import __version__
from evidex.interfaces import cli_agents, cli_evaluation, cli_index, cli_models, cli_query
from evidex.interfaces.cli_runtime import HELP_OPTIONS, EvidexGroup

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, cls=EvidexGroup,
                  context_settings={"help_option_names": HELP_OPTIONS},
                  help="evidex: evidence-aware retrieval for engineering knowledge bases.")


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"evidex {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_print_version,
                                               help="print the version and exit")] = False) -> None:
    """evidex: evidence-aware retrieval for engineering knowledge bases."""


# `evidex --help` lists commands in the order they are added here, then the groups in theirs.
app.command("ingest")(cli_index.ingest_cmd)
app.command("search")(cli_query.search_cmd)
app.command("show")(cli_query.show_cmd)
app.command("stats")(cli_index.stats_cmd)
app.command("batches")(cli_index.batches_cmd)
app.command("rollback")(cli_index.rollback_cmd)
app.command("setup")(cli_models.setup_cmd)
app.command("eval")(cli_evaluation.eval_cmd)
app.command("calibrate")(cli_evaluation.calibrate_cmd)
app.command("query")(cli_query.query_cmd)
app.command("replay")(cli_query.replay_cmd)
app.command("verify")(cli_query.verify_cmd)
app.command("bench")(cli_evaluation.bench_cmd)
app.command("demo")(cli_query.demo_cmd)
app.command("export")(cli_index.export_cmd)
app.command("export-cross-encoder")(cli_models.export_cross_encoder_cmd)
app.command("import")(cli_index.import_cmd)
app.command("ask")(cli_query.ask_cmd)
app.add_typer(cli_index.dead_letters_app, name="dead-letters")
app.add_typer(cli_models.cache_app, name="cache")
cli_agents.register(app)  # serve, mcp, tool-schema, and the keys group
