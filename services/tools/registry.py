"""Tool definitions and the registry that validates their arguments.

A tool is a plain async callable ``fn(args: dict) -> JSON-able`` plus its
policy: timeout, attempts (retries only if idempotent), bulkhead size, cache
TTL and version. Each tool's argument schema is compiled to a validator once,
when it is registered, never per call.

A tool also says how people ask for it: ``examples`` (requests that need it,
optionally with their arguments) and ``negative_examples`` (near misses that
need no tool, or another one). They travel in ``ToolSpec`` through ListTools:
the router's tool selector embeds them and its argument filler uses the
examples with arguments as worked examples, so a new tool is one file here and
no router change. ``summarize`` turns an output into one plain sentence
("23*47 = 1081.") that the router's answer opens with, so the stated result is
the tool's, not the model's paraphrase of it.

Errors a tool raises on purpose: ``ToolError`` (a failure the agent should read,
e.g. "division by zero"); anything else is a bug in the tool, reported to the
agent as a generic failure and logged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

ToolFn = Callable[[dict[str, Any]], Awaitable[Any]]
Summarizer = Callable[[Any], str]


class ToolError(Exception):
    """A failure the agent should see verbatim (bad expression, unknown unit...)."""


@dataclass(frozen=True)
class ToolExample:
    """A request that needs the tool; ``arguments`` (when given) are what the tool should be called with."""

    text: str
    arguments: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: dict[str, Any]
    fn: ToolFn
    timeout_s: float = 5.0
    idempotent: bool = True
    max_attempts: int = 3
    max_concurrency: int = 16
    cache_ttl_s: float = 0.0
    version: str = "1"
    examples: tuple[ToolExample, ...] = ()
    negative_examples: tuple[str, ...] = ()
    summarize: Summarizer | None = field(default=None, repr=False, compare=False)
    validator: jsonschema.protocols.Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        jsonschema.Draft202012Validator.check_schema(self.parameters)
        object.__setattr__(self, "validator", jsonschema.Draft202012Validator(self.parameters))
        for example in self.examples:
            if example.arguments is not None:
                problem = ToolRegistry.check_arguments(self, example.arguments)
                if problem is not None:
                    raise ValueError(
                        f"tool {self.name!r}: example {example.text!r} has invalid arguments at"
                        f" {problem.pointer or '/'}: {problem.message}"
                    )

    @property
    def attempts(self) -> int:
        """Attempts per call: retries only for idempotent tools."""
        return self.max_attempts if self.idempotent else 1


@dataclass(frozen=True)
class ArgumentProblem:
    """Why arguments were rejected, with the JSON pointer of the field at fault."""

    pointer: str
    message: str


def json_pointer(path: Iterable[Any]) -> str:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else ""


class ToolRegistry:
    """The tools a tool executor serves, by name."""

    def __init__(self, tools: Iterable[ToolDefinition] = ()) -> None:
        self._tools: dict[str, ToolDefinition] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: ToolDefinition) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool

    def get(self, name: str) -> ToolDefinition | None:
        return self._tools.get(name)

    def __iter__(self) -> Any:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @staticmethod
    def check_arguments(tool: ToolDefinition, args: Any) -> ArgumentProblem | None:
        """The first schema violation (deepest path first), or None when valid."""
        errors = sorted(tool.validator.iter_errors(args), key=lambda e: (-len(e.absolute_path), str(e.message)))
        if not errors:
            return None
        error = errors[0]
        path = list(error.absolute_path)
        if error.validator == "required" and isinstance(error.instance, dict):
            required: list[str] = list(error.validator_value)  # type: ignore[arg-type]
            missing = next((r for r in required if r not in error.instance), None)
            if missing is not None:
                path.append(missing)
        elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
            schema: Any = error.schema
            allowed = set(schema.get("properties", {}) if isinstance(schema, dict) else {})
            extra = next((k for k in error.instance if k not in allowed), None)
            if extra is not None:
                path.append(extra)
        return ArgumentProblem(pointer=json_pointer(path), message=error.message)
