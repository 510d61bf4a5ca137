"""The agent tool `search_with_reasoning(query, aspect_focus)`: its name, description, input and output
JSON schemas, and the one validator of its arguments. MCP, the HTTP API (OpenAPI) and
`evidex tool-schema` (function-calling JSON for OpenAI- and Anthropic-style clients) all read it from here,
so the three never drift apart.

The output schema is generated from the typed result models (`evidex.result_models`, pydantic, loaded on first
use); printing the schemas needs neither the web server nor the MCP SDK.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evidex.errors import ConfigError

NAME = "search_with_reasoning"
MAX_QUERY_CHARS = 2000
MAX_ASPECT_FOCUS_CHARS = 500
MAX_K = 50
DEFAULT_K = 10

DESCRIPTION = (
    "Search the engineering knowledge base and return a decision, not just top-k chunks: which evidence "
    "this caller may use right now (access, freshness and an exact citation are checked), which required "
    "evidence families are covered, missing or found-but-rejected, the citations to quote, and signals "
    "(confidence, coverage, source diversity, cost). Read `decision.recommendation.action` first: "
    "'proceed' (answer from `evidence`, citing `citation`), 're-query' (call again with `aspect_focus` set "
    "to each aspect in `decision.recommendation.focus`; when it is empty, rephrase the question with more "
    "detail), or 'stop' (no fresh, authorised, citable source: hand over to "
    "`decision.recommendation.owner`; do not answer from memory). Rejected records appear only as ids, "
    "sources and reason codes, and records the caller may not read only as a count."
)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                  "description": "The question, in natural language."},
        "aspect_focus": {"type": ["string", "null"], "maxLength": MAX_ASPECT_FOCUS_CHARS,
                         "description": "Optional: the aspect to concentrate on, e.g. the missing aspects a "
                                        "previous call recommended re-querying with."},
        "k": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_K, "default": DEFAULT_K,
              "description": "Optional: at most this many evidence chunks (null: the default)."},
    },
    "required": ["query"],
    "additionalProperties": False,
}

if TYPE_CHECKING:
    OUTPUT_SCHEMA: dict[str, Any]  # see __getattr__


def output_schema() -> dict[str, Any]:
    """The result's JSON schema, generated from the typed models (`evidex.result_models.Result`): the one definition
    the HTTP API's OpenAPI, the MCP tool and `tool-schema --format mcp` publish."""
    from evidex.result_models import result_schema

    return result_schema()


def __getattr__(name: str) -> Any:
    """`OUTPUT_SCHEMA`, made on first use: pydantic need not load for a command that never publishes it."""
    if name == "OUTPUT_SCHEMA":
        schema = output_schema()
        globals()[name] = schema
        return schema
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SchemaFormat(enum.Enum):
    """Which function-calling dialect `evidex tool-schema` prints."""

    OPENAI = "openai"  # {"type": "function", "function": {name, description, parameters}}
    ANTHROPIC = "anthropic"  # {name, description, input_schema}
    MCP = "mcp"  # {name, description, inputSchema, outputSchema}

    @classmethod
    def from_str(cls, value: str) -> SchemaFormat:
        try:
            return cls(value.strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ConfigError(f"unknown tool schema format {value!r}; choose one of: {choices}") from None


def definition(fmt: SchemaFormat = SchemaFormat.OPENAI, *, max_k: int = MAX_K) -> dict[str, Any]:
    """The tool definition in the dialect `fmt` (fresh dicts: callers may modify them), for a deployment that
    serves at most `max_k` chunks."""
    schema = copy.deepcopy(INPUT_SCHEMA)
    schema["properties"]["k"].update(maximum=min(max_k, MAX_K), default=min(DEFAULT_K, max_k))
    if fmt is SchemaFormat.OPENAI:
        return {"type": "function", "function": {"name": NAME, "description": DESCRIPTION, "parameters": schema}}
    if fmt is SchemaFormat.ANTHROPIC:
        return {"name": NAME, "description": DESCRIPTION, "input_schema": schema}
    return {"name": NAME, "description": DESCRIPTION, "inputSchema": schema,
            "outputSchema": output_schema()}


class ToolInputError(ValueError):
    """The caller's arguments are invalid; the message names the argument (never echoes its value)."""


@dataclass(frozen=True)
class ToolArguments:
    query: str
    aspect_focus: str | None = None
    k: int = DEFAULT_K


def parse_arguments(args: Mapping[str, Any] | None, *, max_k: int = MAX_K) -> ToolArguments:
    """Validate the tool's arguments against INPUT_SCHEMA (and a deployment's `max_k`, at most MAX_K)."""
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise ToolInputError("arguments must be a JSON object")
    extra = sorted(set(args) - set(INPUT_SCHEMA["properties"]))
    if extra:
        raise ToolInputError(f"unknown argument(s) {extra}; allowed: query, aspect_focus, k "
                             "(the principal comes from the API key, or over MCP stdio from the server's "
                             "configuration; never from the request)")
    query = args.get("query")
    if not isinstance(query, str):
        raise ToolInputError("query: required, a string")
    if not query.strip():
        raise ToolInputError("query: must not be empty")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolInputError(f"query: at most {MAX_QUERY_CHARS} characters (got {len(query)})")
    focus = args.get("aspect_focus")
    if focus is not None and not isinstance(focus, str):
        raise ToolInputError("aspect_focus: must be a string or null")
    if focus is not None and len(focus) > MAX_ASPECT_FOCUS_CHARS:
        raise ToolInputError(f"aspect_focus: at most {MAX_ASPECT_FOCUS_CHARS} characters (got {len(focus)})")
    limit = min(max_k, MAX_K)
    k = args.get("k")
    if k is None:
        k = min(DEFAULT_K, limit)
    if isinstance(k, bool) or not isinstance(k, int):
        raise ToolInputError("k: must be an integer")
    if not 1 <= k <= limit:
        raise ToolInputError(f"k: must be between 1 and {limit} (got {k})")
    focus = (focus or "").strip() or None
    return ToolArguments(query=query, aspect_focus=focus, k=k)
