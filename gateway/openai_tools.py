"""OpenAI function calling on the way in: ``tools``, ``tool_choice`` and ``parallel_tool_calls`` → client tools.

In: the request body's three fields. Out: ``ClientTool``\\ s (name, description, the parameters schema as
compact JSON text, in the order given, so ``tools[i]`` is ``client_tools[i]`` on the gRPC side), the tool
choice as the typed client spells it (``auto``, ``none``, ``required`` or a tool's name) and the cap on calls
per round (``parallel_tool_calls: false`` → 1, else 0: no cap).

Refused, naming the field as OpenAI does: a tool that is not ``{"type": "function", "function": {...}}``,
a name outside OpenAI's ``^[a-zA-Z0-9_-]{1,64}$``, a name given twice, ``parameters`` that is not a JSON
Schema object (``{"type": "object", ...}`` that jsonschema's ``check_schema`` accepts; absent or ``{}`` means
no arguments), more tools than the edge's cap, a named ``tool_choice`` that is not among the tools.

Checking a schema costs milliseconds (jsonschema walks the 2020-12 meta-schema), so ``SchemaChecks``
remembers verdicts by the schema's text: an agent framework sends the same tools with every request. The
edge runs the checks only for a caller whose key is valid (see ``http_edge.py``).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from agentmesh.common.v1 import common_pb2
from services.runtime.errors import InvalidArgument

#: OpenAI's rule for function names.
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
#: The schema of a function without arguments (OpenAI's meaning of an absent or empty ``parameters``).
NO_ARGUMENTS = '{"type":"object","properties":{}}'
#: Longest schema text checked; jsonschema takes about half a second over 64 KiB.
MAX_SCHEMA_CHARS = 65536
MODES = ("auto", "none", "required")


@dataclass(frozen=True)
class ClientTool:
    """One function of ``tools``: what the gRPC ToolSpec carries, and the field it came from."""

    name: str
    description: str
    schema_text: str
    field: str

    def spec(self) -> common_pb2.ToolSpec:
        spec = common_pb2.ToolSpec(name=self.name, description=self.description)
        spec.parameters_json_schema = self.schema_text
        return spec


def parse_tools(value: Any, *, cap: int) -> tuple[ClientTool, ...]:
    """``tools`` (absent, null or ``[]``: none), checked except for the schemas' meaning (``SchemaChecks``)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidArgument.field("tools", "an array of tools")
    if len(value) > cap:
        raise InvalidArgument.field("tools", f"at most {cap} tools")
    tools: list[ClientTool] = []
    seen: dict[str, int] = {}
    for i, tool in enumerate(value):
        at = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise InvalidArgument.field(at, 'an object {"type": "function", "function": {...}}')
        if tool.get("type") != "function":
            raise InvalidArgument.field(f"{at}.type", 'only "function" tools are supported')
        function = tool.get("function")
        if not isinstance(function, dict):
            raise InvalidArgument.field(f"{at}.function", "an object with the function's name")
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise InvalidArgument.field(f"{at}.function.name", "1-64 letters, digits, underscores or dashes")
        if name in seen:
            raise InvalidArgument.field(f"{at}.function.name", f"{name!r} is already tools[{seen[name]}]")
        seen[name] = i
        description = function.get("description", "")
        if not isinstance(description, str):
            raise InvalidArgument.field(f"{at}.function.description", "must be a string")
        strict = function.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise InvalidArgument.field(f"{at}.function.strict", "must be a boolean")
        tools.append(ClientTool(name, description, _schema_text(function.get("parameters"), at), at))
    return tuple(tools)


def _schema_text(parameters: Any, at: str) -> str:
    field = f"{at}.function.parameters"
    if parameters is None or parameters == {}:
        return NO_ARGUMENTS
    if not isinstance(parameters, dict):
        raise InvalidArgument.field(field, "must be a JSON Schema object")
    if parameters.get("type", "object") != "object":
        raise InvalidArgument.field(field, 'must be a JSON Schema object with "type": "object"')
    text = json.dumps(parameters, separators=(",", ":"), ensure_ascii=False)
    if len(text) > MAX_SCHEMA_CHARS:
        raise InvalidArgument.field(field, f"at most {MAX_SCHEMA_CHARS} characters of JSON")
    return text


def parse_tool_choice(value: Any, tools: Sequence[ClientTool], *, mesh_tools: bool) -> str:
    """``tool_choice`` as the typed client takes it. A named function must be one of ``tools``; with none
    given, on the agent model (``mesh_tools``) it names one of the mesh's tools, which the mesh checks."""
    if value is None:
        return "auto"
    if value in MODES:
        if value == "required" and not tools and not mesh_tools:
            raise InvalidArgument.field("tool_choice", "required needs tools")
        return str(value)
    function = value.get("function") if isinstance(value, dict) and value.get("type") == "function" else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        raise InvalidArgument.field(
            "tool_choice", 'auto, none, required or {"type": "function", "function": {"name": ...}}'
        )
    if tools and name not in {t.name for t in tools}:
        raise InvalidArgument.field("tool_choice.function.name", f"{name!r} is not among the request's tools")
    if not tools and not mesh_tools:
        raise InvalidArgument.field("tool_choice", "a named function needs tools")
    return name


def max_calls_per_round(value: Any) -> int:
    """``parallel_tool_calls``: false allows one call per round; true or absent, any number (0)."""
    if value is None or value is True:
        return 0
    if value is False:
        return 1
    raise InvalidArgument.field("parallel_tool_calls", "must be a boolean")


class SchemaChecks:
    """jsonschema's ``check_schema`` verdicts on tool parameters, remembered by schema text (LRU)."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._verdicts: OrderedDict[str, str] = OrderedDict()  # schema text → "" (valid) or what is wrong
        self._validator = jsonschema.Draft202012Validator(
            jsonschema.Draft202012Validator.META_SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
        )

    def known(self, tools: Sequence[ClientTool]) -> bool:
        """Whether every schema of ``tools`` has a remembered verdict (checking them costs nothing)."""
        return all(t.schema_text in self._verdicts for t in tools)

    def check(self, tools: Sequence[ClientTool]) -> None:
        """Raise ``InvalidArgument`` on the first tool whose parameters are not a valid JSON Schema."""
        for tool in tools:
            problem = self._verdict(tool.schema_text)
            if problem:
                raise InvalidArgument.field(f"{tool.field}.function.parameters", problem)

    def _verdict(self, text: str) -> str:
        if text in self._verdicts:
            self._verdicts.move_to_end(text)
            return self._verdicts[text]
        try:
            error = jsonschema.exceptions.best_match(self._validator.iter_errors(json.loads(text)))
        except RecursionError:
            verdict = "nested too deeply to check"
        else:
            verdict = "" if error is None else _problem(error)
        self._verdicts[text] = verdict
        if len(self._verdicts) > self._size:
            self._verdicts.popitem(last=False)
        return verdict


def _problem(error: jsonschema.ValidationError) -> str:
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
    return f"not a valid JSON Schema: {message}" + (f" (at parameters{where})" if where else "")
