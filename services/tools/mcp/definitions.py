"""An MCP server's listed tools as mesh tool definitions: names, schemas, policy from annotations.

In: the server's config and its ``tools/list`` (every page). Out: one
``ToolDefinition`` per tool the config mounts, whose ``fn`` calls the tool on
the server's connection and turns the result into output (``results``).

- Name: ``<prefix>__<tool>`` (``config.McpServerConfig.tool_name``), so two
  servers cannot collide with each other or with a built-in.
- Description and input schema go to ListTools as the server gave them. A
  schema that is not valid JSON Schema (draft 2020-12), and a name that fits no
  mesh tool name, skip that tool with one log line naming it; the rest mount.
- Policy from the annotations (hints, as the spec says; the operator chose to
  mount the server): ``readOnlyHint`` tools are cached (the server's
  ``cache_ttl_s``, tenant-scoped like every tool result) and retried;
  ``idempotentHint`` tools are retried, not cached; all others run once and are
  never cached. Timeout, attempts, output size and the bulkhead (shared by the
  server's tools) are the server's.
- Version: a digest of what the server said about the tool, so a changed tool
  gets new cache keys and a router can re-embed only what changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import jsonschema
import mcp_types as types

from services.tools.calls import PROGRESS, CallProgress
from services.tools.mcp.config import McpServerConfig
from services.tools.mcp.connection import McpConnection
from services.tools.mcp.results import output_of
from services.tools.registry import ToolDefinition

log = logging.getLogger(__name__)


def definitions(connection: McpConnection, tools: list[types.Tool]) -> list[ToolDefinition]:
    """The mesh's definitions of the server's mounted tools (see module docstring)."""
    config = connection.config
    mounted: list[ToolDefinition] = []
    for tool in tools:
        if not config.exposes(tool.name):
            continue
        definition = definition_of(connection, tool)
        if definition is not None:
            mounted.append(definition)
    return mounted


def definition_of(connection: McpConnection, tool: types.Tool) -> ToolDefinition | None:
    config = connection.config
    name = config.tool_name(tool.name)
    if name is None:
        log.warning(
            "MCP server %s: tool %r skipped: its namespaced name would be over 64 characters", config.name, tool.name
        )
        return None
    schema = tool.input_schema
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        log.warning(
            "MCP server %s: tool %r skipped: its input schema is not valid JSON Schema (%s)",
            config.name,
            tool.name,
            exc.message[:200],
        )
        return None
    hints = tool.annotations or types.ToolAnnotations()
    read_only = bool(hints.read_only_hint)
    try:
        return ToolDefinition(
            name=name,
            description=tool.description or tool.title or hints.title or "",
            parameters=schema,
            fn=_caller(connection, tool.name),
            timeout_s=config.timeout_s,
            idempotent=read_only or bool(hints.idempotent_hint),
            max_attempts=config.max_attempts,
            max_concurrency=config.max_concurrency,
            cache_ttl_s=config.cache_ttl_s if read_only else 0.0,
            version=_version(config, tool),
            server=config.name,
            server_tool_name=tool.name,
            tenants=config.tenants,
            read_only=read_only,
            # The spec's default for a tool that may write is "destructive".
            destructive=not read_only and hints.destructive_hint is not False,
            open_world=hints.open_world_hint is not False,
            title=tool.title or hints.title or "",
            unavailable=connection.unavailable,
        )
    except (jsonschema.SchemaError, ValueError) as exc:
        log.warning("MCP server %s: tool %r skipped: %s", config.name, tool.name, str(exc)[:200])
        return None


def _caller(connection: McpConnection, tool: str) -> Any:
    max_bytes = connection.config.max_output_bytes

    async def call(args: dict[str, Any]) -> dict[str, Any]:
        sink = PROGRESS.get()  # read in the call's task: the SDK calls back from its own

        async def report(progress: float, total: float | None, message: str | None) -> None:
            if sink is not None:
                sink(CallProgress(progress, total, message or ""))

        result = await connection.call(tool, args, report if sink is not None else None)
        return output_of(result, server=connection.name, max_bytes=max_bytes)

    return call


def _version(config: McpServerConfig, tool: types.Tool) -> str:
    said = tool.model_dump(mode="json", by_alias=True, exclude={"meta", "icons"}, exclude_none=True)
    digest = hashlib.sha256(json.dumps([config.name, said], sort_keys=True).encode()).hexdigest()
    return f"mcp-{digest[:12]}"
