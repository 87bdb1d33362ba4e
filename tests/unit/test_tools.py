"""Tools: JSON schema from a typed function, Hermes-style call parsing, argument validation, error observations."""

from typing import Literal

import pytest

from flywheel.envs.tools import Tool, ToolCall, ToolResult, call_tool, parse_tool_calls, run_tool_calls, tool


@tool
def convert(amount: float, unit: Literal["km", "mi"], digits: int = 2, tags: list[str] | None = None) -> str:
    """Converts a distance.

    Longer explanation that is not part of the description.

    Args:
        amount: the distance to convert,
            a non-negative number.
        unit: the unit of ``amount``.
        digits: decimals in the result.
    """
    factor = 1.609344 if unit == "mi" else 1 / 1.609344
    if amount < 0:
        raise ValueError("amount must be non-negative")
    return f"{amount * factor:.{digits}f}"


def test_schema_from_signature_and_docstring():
    assert isinstance(convert, Tool)
    assert convert.schema() == {
        "type": "function",
        "function": {
            "name": "convert",
            "description": "Converts a distance.",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "description": "the distance to convert, a non-negative number."},
                    "unit": {"type": "string", "enum": ["km", "mi"], "description": "the unit of ``amount``."},
                    "digits": {"type": "integer", "description": "decimals in the result."},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["amount", "unit"],
            },
        },
    }


def test_unannotated_parameter_is_refused():
    def f(x):
        """No types."""

    with pytest.raises(TypeError, match="parameter 'x' needs a type annotation"):
        tool(f)


def test_parses_every_call_in_order():
    text = 'Let me see. <tool_call>{"name": "convert", "arguments": {"amount": 10, "unit": "mi"}}</tool_call> and\n<tool_call>\n{"name": "convert", "arguments": {"amount": 1.5, "unit": "km", "digits": 0}}\n</tool_call>'
    assert parse_tool_calls(text) == [
        ToolCall("convert", {"amount": 10, "unit": "mi"}),
        ToolCall("convert", {"amount": 1.5, "unit": "km", "digits": 0}),
    ]
    assert parse_tool_calls("no call here") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '<tool_call>{"name": "convert", "arguments": {"amount": 1,}}</tool_call>',
            'Error: the tool call is not valid JSON (Expecting property name enclosed in double quotes at character 46); write <tool_call>{"name": ..., "arguments": {...}}</tool_call>.',
        ),
        ('<tool_call>["convert"]</tool_call>', 'Error: a tool call must be a JSON object with a string "name" and an object "arguments".'),
        (
            '<tool_call>{"name": "convert", "arguments": "10 mi"}</tool_call>',
            'Error: a tool call must be a JSON object with a string "name" and an object "arguments".',
        ),
        ('<tool_call>{"name": "convert", "arguments": {"amount": 1, "unit": "mi"}}', "Error: the tool call is not closed with </tool_call>."),
    ],
)
def test_malformed_calls_become_error_results(text, message):
    assert parse_tool_calls(text) == [ToolResult(message, error=True)]


@pytest.mark.parametrize(
    ("call", "content"),
    [
        (ToolCall("convert", {"amount": 10, "unit": "mi"}), "16.09"),
        (ToolCall("convert", {"amount": 1.609344, "unit": "km", "digits": 1}), "1.0"),
        (ToolCall("divide", {}), "Error: unknown tool 'divide' (available: convert)."),
        (ToolCall("convert", {"amount": 1}), "Error: convert: missing argument 'unit'."),
        (
            ToolCall("convert", {"amount": 1, "unit": "mi", "round": 2}),
            "Error: convert: unexpected argument 'round' (expected: amount, unit, digits, tags).",
        ),
        (ToolCall("convert", {"amount": "1", "unit": "mi"}), "Error: convert: argument 'amount' must be a number, got \"1\"."),
        (ToolCall("convert", {"amount": 1, "unit": "ft"}), 'Error: convert: argument \'unit\' must be one of "km", "mi", got "ft".'),
        (ToolCall("convert", {"amount": 1, "unit": "mi", "digits": True}), "Error: convert: argument 'digits' must be an integer, got true."),
        (
            ToolCall("convert", {"amount": 1, "unit": "mi", "tags": ["a", 1]}),
            "Error: convert: argument 'tags' must be an array of a string, got [\"a\", 1].",
        ),
        (ToolCall("convert", {"amount": -1, "unit": "mi"}), "Error: convert failed: ValueError: amount must be non-negative."),
    ],
)
def test_call_validates_arguments_and_reports_failures(call, content):
    result = call_tool([convert], call)
    assert result == ToolResult(content, error=content.startswith("Error:"))


def test_run_tool_calls_mixes_results_and_errors():
    text = '<tool_call>{"name": "convert", "arguments": {"amount": 2, "unit": "mi", "digits": 3}}</tool_call><tool_call>oops</tool_call>'
    assert [r.content for r in run_tool_calls([convert], text)] == [
        "3.219",
        'Error: the tool call is not valid JSON (Expecting value at character 0); write <tool_call>{"name": ..., "arguments": {...}}</tool_call>.',
    ]
