"""Tools as typed Python functions, and tool calls parsed from the model's text.

Declaring: ``@tool`` on a function with annotated parameters and a docstring gives a ``Tool`` whose
JSON schema (``Tool.schema()``, the OpenAI/Hermes ``{"type": "function", ...}`` form that chat
templates render) comes from the signature; the description is the docstring's first paragraph and
parameter descriptions come from its ``Args:`` section.

Calling format (Hermes / Qwen): the model writes, anywhere in its turn,

    <tool_call>{"name": "calculate", "arguments": {"expression": "12*34"}}</tool_call>

A malformed call (bad JSON, unknown tool, missing, unexpected or mistyped arguments) or a tool that
raises becomes a one-sentence ``Error: ...`` result for the model to read, never an exception.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

_CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|\Z)", re.S)
_JSON_TYPES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    function: Callable[..., Any]

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolResult:
    """One call's outcome, as the model will read it."""

    content: str
    error: bool


def tool(function: Callable[..., Any]) -> Tool:
    """The Tool declared by a function's signature (every parameter annotated) and docstring."""
    hints = typing.get_type_hints(function)
    doc = inspect.getdoc(function) or ""
    described = _arg_descriptions(doc)
    properties, required = {}, []
    for name, param in inspect.signature(function).parameters.items():
        if name not in hints:
            raise TypeError(f"tool {function.__name__}: parameter {name!r} needs a type annotation")
        properties[name] = _json_type(hints[name]) | ({"description": described[name]} if name in described else {})
        if param.default is inspect.Parameter.empty:
            required.append(name)
    description = doc.split("\n\n")[0].replace("\n", " ").strip()
    parameters = {"type": "object", "properties": properties, "required": required}
    return Tool(function.__name__, description, parameters, function)


def _json_type(annotation: Any) -> dict[str, Any]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return {"type": _JSON_TYPES[type(args[0])], "enum": list(args)}
    if origin in (list, Sequence, tuple) and args:
        return {"type": "array", "items": _json_type(args[0])}
    if origin in (typing.Union, types.UnionType):
        kinds = [_json_type(a) for a in args if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else {"anyOf": kinds}
    if (origin or annotation) in _JSON_TYPES:
        return {"type": _JSON_TYPES[origin or annotation]}
    raise TypeError(f"unsupported tool parameter type {annotation!r} (use str, int, float, bool, list, dict, Literal)")


def _arg_descriptions(doc: str) -> dict[str, str]:
    """``name: text`` lines of a Google-style ``Args:`` section (continuation lines joined)."""
    section = re.search(r"^\s*Args:\s*\n(.*?)(?:\n\s*\n|\Z)", doc, re.S | re.M)
    found: dict[str, str] = {}
    last = None
    for line in section.group(1).splitlines() if section else []:
        entry = re.match(r"\s*(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
        if entry:
            last = entry.group(1)
            found[last] = entry.group(2).strip()
        elif last:
            found[last] += " " + line.strip()
    return found


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


def parse_tool_calls(text: str) -> list[ToolCall | ToolResult]:
    """Every ``<tool_call>`` block of the text, in order: a ToolCall, or the error result of a malformed one."""
    return [_parse_call(body.strip()) if close else _error("the tool call is not closed with </tool_call>") for body, close in _CALL.findall(text)]


def _parse_call(body: str) -> ToolCall | ToolResult:
    try:
        call = json.loads(body)
    except json.JSONDecodeError as e:
        return _error(
            f'the tool call is not valid JSON ({e.msg} at character {e.pos}); write <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>'
        )
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(call.get("arguments", {}), dict):
        return _error('a tool call must be a JSON object with a string "name" and an object "arguments"')
    return ToolCall(call["name"], call.get("arguments", {}))


def _error(message: str) -> ToolResult:
    return ToolResult(f"Error: {message}.", error=True)


def call_tool(tools: Sequence[Tool], call: ToolCall) -> ToolResult:
    """Runs the call after checking its arguments against the tool's schema; the result is ``str(return value)``."""
    by_name = {t.name: t for t in tools}
    if call.name not in by_name:
        return _error(f"unknown tool {call.name!r} (available: {', '.join(by_name) or 'none'})")
    target = by_name[call.name]
    problem = _argument_problem(target.parameters, call.arguments)
    if problem:
        return _error(f"{call.name}: {problem}")
    try:
        return ToolResult(str(target.function(**call.arguments)), error=False)
    except Exception as e:  # the tool's own failure is the model's observation
        return _error(f"{call.name} failed: {type(e).__name__}: {e}")


def _argument_problem(parameters: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    properties = parameters["properties"]
    unexpected = [a for a in arguments if a not in properties]
    if unexpected:
        return f"unexpected argument {unexpected[0]!r} (expected: {', '.join(properties)})"
    missing = [p for p in parameters["required"] if p not in arguments]
    if missing:
        return f"missing argument {missing[0]!r}"
    for name, value in arguments.items():
        if not _matches(properties[name], value):
            return f"argument {name!r} must be {_describe(properties[name])}, got {json.dumps(value)}"
    return None


def _matches(schema: dict[str, Any], value: Any) -> bool:
    if "anyOf" in schema:
        return any(_matches(s, value) for s in schema["anyOf"])
    if "enum" in schema and value not in schema["enum"]:
        return False
    kind = schema["type"]
    if kind == "array":
        return isinstance(value, list) and all(_matches(schema["items"], v) for v in value)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "boolean": bool, "object": dict}[kind])


def _describe(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_describe(s) for s in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    if schema["type"] == "array":
        return f"an array of {_describe(schema['items'])}"
    return {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean", "object": "an object"}[schema["type"]]


def run_tool_calls(tools: Sequence[Tool], text: str) -> list[ToolResult]:
    """The results of every tool call in the text (empty when it makes none)."""
    return [c if isinstance(c, ToolResult) else call_tool(tools, c) for c in parse_tool_calls(text)]
