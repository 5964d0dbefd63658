"""The MCP servers the tool executor mounts: the ecosystem's ``mcpServers`` JSON, validated once at start.

The file is what desktop MCP hosts read, so a user's existing one works::

    {"mcpServers": {
        "calendar": {"command": "npx", "args": ["-y", "@acme/calendar-mcp"],
                     "env": {"CALENDAR_TOKEN": "${env:CALENDAR_TOKEN}"}},
        "tickets":  {"url": "https://tickets.example.com/mcp",
                     "headers": {"Authorization": "Bearer ${env:TICKETS_TOKEN}"},
                     "tenants": ["acme"], "timeout_s": 10}}}

A server is stdio (``command``, ``args``, ``env``, ``cwd``) or streamable HTTP
(``url``, ``headers``); ``type`` may say which ("stdio", "http",
"streamable-http", "streamableHttp"; "sse" is refused: the SDK's old HTTP+SSE
transport is not mounted) and ``disabled: true`` leaves a server out, as
desktop hosts do. AgentMesh's own keys sit beside them (``SERVER_KEYS``):
policy (timeout, concurrency, attempts, cache TTL, output size), which tools
(``allowed_tools``, ``denied_tools``, by the server's own names), which tenants
may see and call them (``tenants``; absent: every tenant), the name prefix
(default: the server's name, so ``calendar``'s ``create_event`` is
``calendar__create_event``; "" for none), and liveness (start-up timeout, ping
interval, restart back-off cap).

Secrets stay out of the file: ``${env:NAME}`` (or ``${NAME}``) in ``command``,
``args``, ``env``, ``cwd``, ``url`` and ``headers`` is replaced by the
executor's environment variable ``NAME`` when the file is loaded; an unset one
is an error naming the server, key and variable, never a value. The resolved
values are kept out of ``repr`` so no log line can print them.

Every mistake is one ``McpConfigError`` line naming the file, the server and the
key (an unknown key, a missing ``command``, a bad number), and the executor
refuses to start.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.runtime.tenancy import valid_tenant
from services.tools.registry import valid_tool_name

#: What separates a server's prefix from its tool's name: ``calendar__create_event``.
SEPARATOR = "__"
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
_PREFIX = re.compile(r"^[A-Za-z0-9_-]{0,48}$")
_ENV_REF = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")
_STDIO_TYPES = {"stdio"}
_HTTP_TYPES = {"http", "streamable-http", "streamable_http", "streamableHttp"}

STDIO_KEYS = ("command", "args", "env", "cwd")
HTTP_KEYS = ("url", "headers")
#: Keys of the ecosystem's format that are not a transport's.
COMMON_KEYS = ("type", "disabled")
#: AgentMesh's own per-server keys, with their defaults.
SERVER_KEYS: dict[str, Any] = {
    "prefix": None,  # default: the server's name
    "tenants": None,  # default: every tenant
    "allowed_tools": None,  # default: every tool the server lists
    "denied_tools": (),
    "timeout_s": 30.0,
    "max_concurrency": 8,
    "max_attempts": 3,
    "cache_ttl_s": 60.0,
    "max_output_bytes": 64 * 1024,
    "startup_timeout_s": 10.0,
    "ping_interval_s": 15.0,
    "restart_max_s": 30.0,
}
KNOWN_KEYS = frozenset((*STDIO_KEYS, *HTTP_KEYS, *COMMON_KEYS, *SERVER_KEYS))


class McpConfigError(ValueError):
    """The MCP config cannot be used (one line naming the file, server and key)."""


@dataclass(frozen=True)
class StdioTransport:
    """Launch ``command`` with ``args``; it speaks JSON-RPC on its stdin and stdout."""

    command: str = field(repr=False)
    args: tuple[str, ...] = field(default=(), repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str = field(default="", repr=False)

    def describe(self) -> str:
        """For logs: the program only (arguments and environment may hold secrets)."""
        return f"stdio {Path(self.command).name}"


@dataclass(frozen=True)
class HttpTransport:
    """A streamable HTTP endpoint."""

    url: str = field(repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    def describe(self) -> str:
        """For logs: scheme, host and port only (a URL may carry a token)."""
        match = re.match(r"^([a-z][a-z0-9+.-]*://)(?:[^@/]*@)?([^/?#]*)", self.url)
        return f"streamable HTTP {match.group(1) + match.group(2) if match else '(url)'}"


@dataclass(frozen=True)
class McpServerConfig:
    """One server of the file, resolved and checked (see module docstring for the keys)."""

    name: str
    transport: StdioTransport | HttpTransport
    prefix: str
    tenants: frozenset[str] = frozenset()
    allowed_tools: frozenset[str] | None = None
    denied_tools: frozenset[str] = frozenset()
    timeout_s: float = 30.0
    max_concurrency: int = 8
    max_attempts: int = 3
    cache_ttl_s: float = 60.0
    max_output_bytes: int = 64 * 1024
    startup_timeout_s: float = 10.0
    ping_interval_s: float = 15.0
    restart_max_s: float = 30.0

    def exposes(self, tool: str) -> bool:
        """Whether the server's tool ``tool`` (its own name) is mounted."""
        if tool in self.denied_tools:
            return False
        return self.allowed_tools is None or tool in self.allowed_tools

    def tool_name(self, tool: str) -> str | None:
        """The mesh's name for the server's tool ``tool``, or None when no valid name fits (too long).

        Characters a mesh tool name cannot have (MCP allows ".") become "_".
        """
        clean = re.sub(r"[^A-Za-z0-9_-]", "_", tool)
        name = f"{self.prefix}{SEPARATOR}{clean}" if self.prefix else clean
        return name if valid_tool_name(name) else None

    def owns(self, name: str) -> bool:
        """Whether the mesh tool name ``name`` is in this server's namespace."""
        return bool(self.prefix) and name.startswith(self.prefix + SEPARATOR)


def load_mcp_config(path: str | Path, env: Mapping[str, str] | None = None) -> tuple[McpServerConfig, ...]:
    """The servers of the file at ``path`` (disabled ones left out); McpConfigError on any mistake."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise McpConfigError(f"{source}: cannot read it: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{source}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    return parse_mcp_config(data, source=source, env=os.environ if env is None else env)


def parse_mcp_config(data: Any, *, source: str, env: Mapping[str, str]) -> tuple[McpServerConfig, ...]:
    if not isinstance(data, dict):
        raise McpConfigError(f'{source}: the top level must be an object with "mcpServers"')
    unknown = sorted(set(data) - {"mcpServers"})
    if unknown:
        raise McpConfigError(f'{source}: unknown key {unknown[0]!r} at the top level (only "mcpServers")')
    servers = data.get("mcpServers")
    if not isinstance(servers, dict):
        raise McpConfigError(f'{source}: "mcpServers" must be an object of servers by name')
    parsed = [_server(name, spec, _Where(source, name), env) for name, spec in servers.items()]
    configs = tuple(c for c in parsed if c is not None)
    prefixes: dict[str, str] = {}
    for config in configs:
        if config.prefix in prefixes:
            raise McpConfigError(
                f"{source}: server {config.name!r}: prefix {config.prefix!r} is already server"
                f" {prefixes[config.prefix]!r}'s; two servers must not share a namespace"
            )
        if config.prefix:
            prefixes[config.prefix] = config.name
    return configs


@dataclass(frozen=True)
class _Where:
    source: str
    server: str

    def error(self, key: str, why: str) -> McpConfigError:
        at = f"server {self.server!r}" + (f": {key}" if key else "")
        return McpConfigError(f"{self.source}: {at}: {why}")


def _server(name: str, spec: Any, where: _Where, env: Mapping[str, str]) -> McpServerConfig | None:
    if not _SERVER_NAME.match(name):
        raise where.error("", "a server name must be 1-48 letters, digits, '_' or '-'")
    if not isinstance(spec, dict):
        raise where.error("", "must be an object")
    for key in spec:
        if key not in KNOWN_KEYS:
            raise where.error(key, f"unknown key (known: {', '.join(sorted(KNOWN_KEYS))})")
    if _boolean(spec, "disabled", False, where):
        return None
    transport = _transport(spec, where, env)
    prefix = spec.get("prefix", name)
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise where.error("prefix", "must be a string of at most 48 letters, digits, '_' or '-'")
    tenants = _names(spec, "tenants", where)
    for tenant in tenants or ():
        if not valid_tenant(tenant):
            raise where.error("tenants", f"{tenant!r} is not a valid tenant name")
    if tenants is not None and not tenants:
        raise where.error("tenants", "an empty list would hide the server from everyone; leave it out or disable it")
    return McpServerConfig(
        name=name,
        transport=transport,
        prefix=prefix,
        tenants=tenants or frozenset(),
        allowed_tools=_names(spec, "allowed_tools", where),
        denied_tools=_names(spec, "denied_tools", where) or frozenset(),
        timeout_s=_number(spec, "timeout_s", where),
        max_concurrency=int(_number(spec, "max_concurrency", where, integer=True)),
        max_attempts=int(_number(spec, "max_attempts", where, integer=True)),
        cache_ttl_s=_number(spec, "cache_ttl_s", where, zero=True),
        max_output_bytes=int(_number(spec, "max_output_bytes", where, integer=True)),
        startup_timeout_s=_number(spec, "startup_timeout_s", where),
        ping_interval_s=_number(spec, "ping_interval_s", where, zero=True),
        restart_max_s=_number(spec, "restart_max_s", where),
    )


def _transport(spec: dict[str, Any], where: _Where, env: Mapping[str, str]) -> StdioTransport | HttpTransport:
    kind = spec.get("type")
    if kind is not None and (not isinstance(kind, str) or kind not in _STDIO_TYPES | _HTTP_TYPES):
        if kind == "sse":
            raise where.error("type", '"sse" (HTTP+SSE) is not supported; use streamable HTTP ("http")')
        raise where.error("type", 'must be "stdio" or "http" (streamable HTTP)')
    stdio_keys = [k for k in STDIO_KEYS if k in spec]
    http_keys = [k for k in HTTP_KEYS if k in spec]
    if kind is None:
        if "command" in spec and "url" in spec:
            raise where.error("url", "a server has a command (stdio) or a url (streamable HTTP), not both")
        kind = "stdio" if "command" in spec else "http" if "url" in spec else None
        if kind is None:
            raise where.error("command", "missing: give command (stdio) or url (streamable HTTP)")
    if kind in _STDIO_TYPES:
        if http_keys:
            raise where.error(http_keys[0], "is for streamable HTTP; this server is stdio")
        command = _resolved(_string(spec, "command", where, required=True), "command", where, env)
        if not command:
            raise where.error("command", "must not be empty")
        args = spec.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise where.error("args", "must be a list of strings")
        return StdioTransport(
            command=command,
            args=tuple(_resolved(a, f"args[{i}]", where, env) for i, a in enumerate(args)),
            env=_string_map(spec, "env", where, env),
            cwd=_resolved(_string(spec, "cwd", where), "cwd", where, env),
        )
    if stdio_keys:
        raise where.error(stdio_keys[0], "is for stdio; this server is streamable HTTP")
    url = _resolved(_string(spec, "url", where, required=True), "url", where, env)
    if not re.match(r"^https?://[^/?#\s]+", url):
        raise where.error("url", "must be an http:// or https:// URL")
    return HttpTransport(url=url, headers=_string_map(spec, "headers", where, env))


def _resolved(value: str, key: str, where: _Where, env: Mapping[str, str]) -> str:
    def variable(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise where.error(key, f"environment variable {name} is not set")
        return env[name]

    return _ENV_REF.sub(variable, value)


def _string(spec: dict[str, Any], key: str, where: _Where, *, required: bool = False) -> str:
    if key not in spec:
        if required:
            raise where.error(key, "missing")
        return ""
    value = spec[key]
    if not isinstance(value, str):
        raise where.error(key, "must be a string")
    return value


def _string_map(spec: dict[str, Any], key: str, where: _Where, env: Mapping[str, str]) -> dict[str, str]:
    value = spec.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise where.error(key, "must be an object of strings")
    return {str(k): _resolved(v, f"{key}.{k}", where, env) for k, v in value.items()}


def _names(spec: dict[str, Any], key: str, where: _Where) -> frozenset[str] | None:
    if key not in spec:
        return None
    value = spec[key]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise where.error(key, "must be a list of names")
    return frozenset(value)


def _boolean(spec: dict[str, Any], key: str, default: bool, where: _Where) -> bool:
    value = spec.get(key, default)
    if not isinstance(value, bool):
        raise where.error(key, "must be true or false")
    return value


def _number(spec: dict[str, Any], key: str, where: _Where, *, integer: bool = False, zero: bool = False) -> float:
    value = spec.get(key, SERVER_KEYS[key])
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise where.error(key, "must be a number")
    if integer and value != int(value):
        raise where.error(key, "must be a whole number")
    if value < 0 or (value == 0 and not zero):
        raise where.error(key, "must be greater than 0" if not zero else "must not be negative")
    return float(value)
