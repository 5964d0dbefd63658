"""The MCP config (``mcpServers`` JSON): what it accepts, every one-line refusal, and secrets kept out of logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.runtime.config import ConfigError, load_config
from services.tools.config import ToolsConfig
from services.tools.mcp.config import HttpTransport, McpConfigError, StdioTransport, load_mcp_config, parse_mcp_config

ENV = {"CAL_TOKEN": "s3cr3t-token", "HOME": "/home/me"}


def parse(servers: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    return parse_mcp_config({"mcpServers": servers}, source="servers.json", env=ENV if env is None else env)


def refusal(servers: Any, env: dict[str, str] | None = None) -> str:
    with pytest.raises(McpConfigError) as caught:
        parse_mcp_config(servers, source="servers.json", env=ENV if env is None else env)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("servers.json: ")
    return message


def test_a_desktop_hosts_file_loads_as_it_is() -> None:
    (cal, tickets) = parse(
        {
            "calendar": {
                "command": "npx",
                "args": ["-y", "@acme/calendar-mcp", "--token=${env:CAL_TOKEN}"],
                "env": {"TOKEN": "${env:CAL_TOKEN}", "PLAIN": "x"},
            },
            "tickets": {
                "type": "streamableHttp",
                "url": "https://tickets.example.com/mcp",
                "headers": {"Authorization": "Bearer ${CAL_TOKEN}"},
                "tenants": ["acme", "beta"],
                "timeout_s": 5,
                "prefix": "tk",
            },
            "off": {"command": "never-run", "disabled": True},
        }
    )
    assert isinstance(cal.transport, StdioTransport) and isinstance(tickets.transport, HttpTransport)
    assert cal.transport.args[-1] == "--token=s3cr3t-token"
    assert dict(cal.transport.env) == {"TOKEN": "s3cr3t-token", "PLAIN": "x"}
    assert tickets.transport.headers == {"Authorization": "Bearer s3cr3t-token"}
    assert (cal.prefix, cal.tenants, cal.timeout_s) == ("calendar", frozenset(), 30.0)
    assert (tickets.prefix, tickets.tenants, tickets.timeout_s) == ("tk", frozenset({"acme", "beta"}), 5.0)
    assert cal.tool_name("create_event") == "calendar__create_event"
    assert cal.tool_name("events.list") == "calendar__events_list"
    assert cal.tool_name("x" * 60) is None
    assert cal.owns("calendar__x") and not cal.owns("calendarx")


def test_resolved_secrets_never_appear_in_a_repr() -> None:
    servers = parse(
        {
            "a": {"command": "run", "args": ["${env:CAL_TOKEN}"], "env": {"T": "${env:CAL_TOKEN}"}},
            "b": {
                "url": "https://user:${env:CAL_TOKEN}@h.example/mcp?k=${env:CAL_TOKEN}",
                "headers": {"X": "${CAL_TOKEN}"},
            },
        }
    )
    for server in servers:
        assert "s3cr3t" not in repr(server) and "s3cr3t" not in server.transport.describe()
    assert servers[1].transport.describe() == "streamable HTTP https://h.example"


@pytest.mark.parametrize(
    ("servers", "expected"),
    [
        ({"cal": {"comand": "npx"}}, "server 'cal': comand: unknown key"),
        ({"cal": {"args": ["x"]}}, "server 'cal': command: missing"),
        ({"cal": {"type": "stdio", "args": []}}, "server 'cal': command: missing"),
        ({"cal": {"command": ""}}, "server 'cal': command: must not be empty"),
        ({"cal": {"command": "x", "url": "http://h/mcp"}}, "server 'cal': url: a server has a command"),
        ({"cal": {"type": "sse", "url": "http://h/sse"}}, "server 'cal': type: \"sse\""),
        ({"cal": {"url": "ftp://h/mcp"}}, "server 'cal': url: must be an http"),
        ({"cal": {"url": "http://h/mcp", "args": []}}, "server 'cal': args: is for stdio"),
        ({"cal": {"command": "x", "headers": {}}}, "server 'cal': headers: is for streamable HTTP"),
        ({"cal": {"command": "x", "args": "a b"}}, "server 'cal': args: must be a list of strings"),
        ({"cal": {"command": "x", "env": {"A": 1}}}, "server 'cal': env: must be an object of strings"),
        ({"cal": {"command": "x", "timeout_s": 0}}, "server 'cal': timeout_s: must be greater than 0"),
        ({"cal": {"command": "x", "timeout_s": True}}, "server 'cal': timeout_s: must be a number"),
        ({"cal": {"command": "x", "max_concurrency": 2.5}}, "server 'cal': max_concurrency: must be a whole"),
        ({"cal": {"command": "x", "cache_ttl_s": -1}}, "server 'cal': cache_ttl_s: must not be negative"),
        ({"cal": {"command": "x", "tenants": ["a b"]}}, "server 'cal': tenants: 'a b' is not a valid tenant"),
        ({"cal": {"command": "x", "tenants": []}}, "server 'cal': tenants: an empty list"),
        ({"cal": {"command": "x", "allowed_tools": "add"}}, "server 'cal': allowed_tools: must be a list"),
        ({"cal": {"command": "x", "prefix": "a.b"}}, "server 'cal': prefix: must be a string"),
        ({"cal": {"command": "x", "disabled": "yes"}}, "server 'cal': disabled: must be true or false"),
        ({"my server": {"command": "x"}}, "server 'my server': a server name must be"),
        ({"cal": ["x"]}, "server 'cal': must be an object"),
        ({"a": {"command": "x", "prefix": "p"}, "b": {"command": "y", "prefix": "p"}}, "prefix 'p' is already"),
    ],
)
def test_each_mistake_is_one_line_naming_the_server_and_key(servers: dict[str, Any], expected: str) -> None:
    assert expected in refusal({"mcpServers": servers})


def test_an_unset_variable_names_itself_but_no_value() -> None:
    message = refusal({"mcpServers": {"cal": {"url": "http://h/mcp", "headers": {"A": "${env:NOPE}"}}}})
    assert "server 'cal': headers.A: environment variable NOPE is not set" in message


def test_the_top_level_is_checked_too() -> None:
    assert "must be an object" in refusal([])
    assert "unknown key 'servers'" in refusal({"servers": {}})
    assert '"mcpServers" must be an object' in refusal({"mcpServers": []})


def test_the_file_is_read_and_its_errors_name_it(tmp_path: Path) -> None:
    good = tmp_path / "servers.json"
    good.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}}}))
    assert [s.name for s in load_mcp_config(good, env={})] == ["a"]
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(McpConfigError, match=r"bad.json: not JSON"):
        load_mcp_config(bad, env={})
    with pytest.raises(McpConfigError, match=r"missing.json: cannot read it"):
        load_mcp_config(tmp_path / "missing.json", env={})


def test_the_executor_config_refuses_a_bad_file_before_it_starts(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"cal": {"comand": "x"}}}))
    with pytest.raises(ConfigError, match=r"^--mcp-config: .*server 'cal': comand: unknown key"):
        load_config(ToolsConfig, ["--mcp-config", str(path)], env={})
    path.write_text(json.dumps({"mcpServers": {"cal": {"command": "x"}}}))
    config = load_config(ToolsConfig, [], env={"AGENTMESH_TOOLS_MCP_CONFIG": str(path)})
    assert [s.name for s in config.mcp_servers] == ["cal"]
    assert load_config(ToolsConfig, [], env={}).mcp_servers == ()


def test_the_kubernetes_example_mounts_the_config_and_its_secrets() -> None:
    from tests.unit.test_k8s import ROOT, render

    component = ROOT / "k8s" / "components" / "mcp-servers"
    (tickets,) = load_mcp_config(component / "servers.json", env={"TICKETS_TOKEN": "t"})
    assert tickets.tenants == {"acme"} and isinstance(tickets.transport, HttpTransport)
    docs = render(ROOT / "k8s" / "overlays" / "mcp-example")
    tools = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "agentmesh-tools")
    spec = tools["spec"]["template"]["spec"]
    container = spec["containers"][0]
    config_map = next(d for d in docs if d["kind"] == "ConfigMap" and "servers.json" in d.get("data", {}))
    volume = next(
        v for v in spec["volumes"] if "configMap" in v and v["configMap"]["name"] == config_map["metadata"]["name"]
    )
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["AGENTMESH_TOOLS_MCP_CONFIG"] == f"{mount['mountPath']}/servers.json" and mount["readOnly"] is True
    assert {"secretRef": {"name": "agentmesh-mcp-secrets"}} in container["envFrom"]
    assert {"configMapRef": {"name": "agentmesh-tools"}} in container["envFrom"]  # the base's settings kept
    assert {"/tmp", mount["mountPath"]} <= {m["mountPath"] for m in container["volumeMounts"]}
