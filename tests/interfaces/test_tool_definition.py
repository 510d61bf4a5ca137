"""The tool definition: one schema for MCP, OpenAPI and function calling, and the validator that agrees
with it (checked against the reference JSON Schema validator, `jsonschema`)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from evidex.errors import ConfigError
from evidex.interfaces import tool
from evidex.interfaces.cli_agents import register

VALIDATOR = jsonschema.Draft202012Validator(tool.INPUT_SCHEMA)


def test_schemas_are_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(tool.INPUT_SCHEMA)
    jsonschema.Draft202012Validator.check_schema(tool.OUTPUT_SCHEMA)
    assert tool.INPUT_SCHEMA["required"] == ["query"]
    assert tool.INPUT_SCHEMA["additionalProperties"] is False
    props = tool.INPUT_SCHEMA["properties"]
    assert (props["query"]["minLength"], props["query"]["maxLength"]) == (1, 2000)
    assert (props["k"]["minimum"], props["k"]["maximum"]) == (1, 50)
    assert set(props) == {"query", "aspect_focus", "k"}  # never a principal or labels


@pytest.mark.parametrize("fmt", list(tool.SchemaFormat))
def test_definition_dialects(fmt: tool.SchemaFormat) -> None:
    d = tool.definition(fmt)
    if fmt is tool.SchemaFormat.OPENAI:
        assert d["type"] == "function"
        body, params = d["function"], d["function"]["parameters"]
    elif fmt is tool.SchemaFormat.ANTHROPIC:
        body, params = d, d["input_schema"]
    else:
        body, params = d, d["inputSchema"]
        assert d["outputSchema"] == tool.OUTPUT_SCHEMA
    assert body["name"] == "search_with_reasoning"
    assert "proceed" in body["description"] and "re-query" in body["description"]
    assert params == tool.INPUT_SCHEMA
    params["properties"].clear()  # a copy: callers may change it
    assert tool.INPUT_SCHEMA["properties"]


def test_schema_format_from_str_lists_choices() -> None:
    assert tool.SchemaFormat.from_str(" Anthropic ") is tool.SchemaFormat.ANTHROPIC
    with pytest.raises(ConfigError, match="openai, anthropic, mcp"):
        tool.SchemaFormat.from_str("gemini")


@pytest.mark.parametrize(("args", "message"), [
    ({}, "query: required"),
    ({"query": 3}, "query: required"),
    ({"query": "   "}, "query: must not be empty"),
    ({"query": "x" * 2001}, "at most 2000 characters"),
    ({"query": "q", "k": 0}, r"k: must be between 1 and 50 \(got 0\)"),
    ({"query": "q", "k": 51}, r"k: must be between 1 and 50 \(got 51\)"),
    ({"query": "q", "k": True}, "k: must be an integer"),
    ({"query": "q", "k": 2.0}, "k: must be an integer"),
    ({"query": "q", "aspect_focus": ["a"]}, "aspect_focus: must be a string"),
    ({"query": "q", "principal": "root"}, r"unknown argument\(s\) \['principal'\]"),
    ({"query": "q", "labels": ["security-team"]}, r"unknown argument\(s\) \['labels'\]"),
])
def test_parse_arguments_rejects(args: dict[str, Any], message: str) -> None:
    with pytest.raises(tool.ToolInputError, match=message):
        tool.parse_arguments(args)


def test_parse_arguments_defaults_and_deployment_limit() -> None:
    assert tool.parse_arguments({"query": "q"}) == tool.ToolArguments("q", None, 10)
    assert tool.parse_arguments({"query": "q", "aspect_focus": "  rbac ", "k": None}) == \
        tool.ToolArguments("q", "rbac", 10)
    assert tool.parse_arguments({"query": "q", "aspect_focus": " "}).aspect_focus is None
    assert tool.parse_arguments({"query": "q"}, max_k=5).k == 5
    with pytest.raises(tool.ToolInputError, match="between 1 and 5"):
        tool.parse_arguments({"query": "q", "k": 6}, max_k=5)


_values = st.one_of(st.none(), st.booleans(), st.integers(-3, 60), st.floats(allow_nan=False),
                    st.text(max_size=30), st.text(min_size=1990, max_size=2010), st.lists(st.integers(), max_size=2))
_args = st.dictionaries(st.sampled_from(["query", "aspect_focus", "k", "principal"]), _values, max_size=4)


@given(_args)
def test_validator_agrees_with_the_json_schema(args: dict[str, Any]) -> None:
    """parse_arguments accepts exactly what the published schema accepts, except a blank query."""
    try:
        tool.parse_arguments(args)
        accepted = True
    except tool.ToolInputError:
        accepted = False
    schema_ok = VALIDATOR.is_valid(args)
    # JSON Schema counts 2.0 as an integer; the validator (like JSON-decoding Python) does not.
    integral_float = isinstance(args.get("k"), float) and float(args["k"]).is_integer()
    blank = isinstance(args.get("query"), str) and not args["query"].strip()
    if accepted:
        assert schema_ok
    elif schema_ok:
        assert blank or integral_float


def test_tool_schema_command() -> None:
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    result = runner.invoke(app, ["tool-schema"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == tool.definition(tool.SchemaFormat.OPENAI)
    result = runner.invoke(app, ["tool-schema", "--format", "anthropic"])
    assert json.loads(result.stdout)["input_schema"] == tool.INPUT_SCHEMA
    result = runner.invoke(app, ["tool-schema", "--format", "nope"])
    assert result.exit_code == 3 and "choose one of: openai, anthropic, mcp" in result.stderr
