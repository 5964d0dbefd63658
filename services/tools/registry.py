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

Tools come from sources: the built-ins (source "") are registered once; an MCP
server's tools (source = the server's name, see ``services/tools/mcp/``) are
swapped as a whole with ``replace_source`` whenever the server lists them again.
Every change that alters the list bumps ``revision`` and wakes ``wait_changed``,
which is how ListTools watchers learn of it. A tool with ``tenants`` serves only
those tenants; ``unavailable`` says why its backend cannot take calls now.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

ToolFn = Callable[[dict[str, Any]], Awaitable[Any]]
Summarizer = Callable[[Any], str]
#: Why a tool's backend cannot take calls now ("" when it can); the reason is shown to the model.
Availability = Callable[[], str]

#: Names every tool of the mesh can be given: what an OpenAI function name allows (letters, digits, "_", "-",
#: at most 64), which is stricter than MCP's (dots, 128), so a tool can be offered through either face.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def valid_tool_name(name: str) -> bool:
    return bool(TOOL_NAME.match(name))


class ToolError(Exception):
    """A failure the agent should see verbatim (bad expression, unknown unit...)."""

    #: Machine-readable cause reported beside the message (``ToolResult.error_reason``); "" for none.
    reason: str = ""


class ToolUnavailable(Exception):
    """The tool's backend cannot take the call now (its MCP server went away): UNAVAILABLE at once, not retried
    and not counted against the tool's breaker (the server has its own restart with backoff)."""


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
    #: The MCP server that serves the tool ("" for a built-in): its bulkhead is the server's, shared by its tools.
    server: str = ""
    #: The tool's name on that server.
    server_tool_name: str = ""
    #: Tenants that may see and call the tool; empty: every tenant.
    tenants: frozenset[str] = frozenset()
    #: MCP annotations as the server gave them (read-only, destructive, open-world) and its title.
    read_only: bool = False
    destructive: bool = False
    open_world: bool = False
    title: str = ""
    unavailable: Availability | None = field(default=None, repr=False, compare=False)
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

    def allows(self, tenant: str) -> bool:
        """Whether ``tenant`` may see and call the tool."""
        return not self.tenants or tenant in self.tenants

    def why_unavailable(self) -> str:
        """Why the tool cannot run now ("" when it can)."""
        return self.unavailable() if self.unavailable is not None else ""


def _definition(tool: ToolDefinition) -> tuple[Any, ...]:
    """What a tool is, without its callables (an MCP tool's ``fn`` is a new closure each time it is listed)."""
    return tuple(getattr(tool, f.name) for f in dataclasses.fields(tool) if f.compare and f.name != "fn")


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
        #: Bumped by every change of the list (see module docstring).
        self.revision = 0
        self._changed = asyncio.Event()
        for tool in tools:
            self.register(tool)

    def register(self, tool: ToolDefinition) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool
        self._bump()

    def replace_source(self, server: str, tools: Iterable[ToolDefinition]) -> list[ToolDefinition]:
        """Make ``tools`` the whole list of MCP server ``server``; the ones whose names another source holds are
        left out and returned (the caller logs them). Nothing changes, and no watcher wakes, if the list is the same.
        """
        if not server:
            raise ValueError("replace_source is for an MCP server's tools; built-ins are registered once")
        new: dict[str, ToolDefinition] = {}
        clashes: list[ToolDefinition] = []
        for tool in tools:
            held = self._tools.get(tool.name)
            if (held is not None and held.server != server) or tool.name in new:
                clashes.append(tool)
            else:
                new[tool.name] = tool
        old = {n: t for n, t in self._tools.items() if t.server == server}
        if {n: _definition(t) for n, t in old.items()} == {n: _definition(t) for n, t in new.items()}:
            return clashes
        kept = {n: t for n, t in self._tools.items() if t.server != server}
        self._tools = {**kept, **new}
        self._bump()
        return clashes

    def remove_source(self, server: str) -> None:
        self.replace_source(server, ())

    def touch(self) -> None:
        """Wake watchers without a change of definitions (a server went down or came back)."""
        self._bump()

    def _bump(self) -> None:
        self.revision += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_changed(self, seen: int) -> int:
        """Wait until ``revision`` differs from ``seen``; the revision then."""
        while self.revision == seen:
            await self._changed.wait()
        return self.revision

    def get(self, name: str) -> ToolDefinition | None:
        return self._tools.get(name)

    def visible_to(self, tenant: str) -> list[ToolDefinition]:
        """The tools ``tenant`` may see, in registration order."""
        return [t for t in self._tools.values() if t.allows(tenant)]

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
