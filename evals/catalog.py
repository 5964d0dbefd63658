"""The generality catalog: tools the mesh has never seen, each only a name, a description and a schema.

``evals/generality/catalog.json`` holds them as a user would register them
from an MCP server or an OpenAI ``tools`` list — no example requests, no near
misses, no ``x-agentmesh-*`` hints. ``catalog_tools`` makes each one a tool
the executor serves beside the built-ins; a call is *recorded*, not
performed (the eval measures planning: which tool, which arguments), and
answers with its own arguments so the answer step has a result to read.
``catalog_specs`` is the same catalog as client tools, run by the eval's
client with the same recorded answers (the ``client tools`` run).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentmesh.common.v1 import common_pb2
from agentmesh_client import client_tool
from services.tools.registry import ToolDefinition, ToolFn

GENERALITY_DIR = Path(__file__).resolve().parent / "generality"
CATALOG_FILE = GENERALITY_DIR / "catalog.json"


def load_catalog(path: Path = CATALOG_FILE) -> dict[str, dict[str, Any]]:
    """Tool name → ``{"description", "parameters"}``, in file order."""
    data = json.loads(path.read_text(encoding="utf-8"))
    tools = data.get("tools") if isinstance(data, dict) else None
    if not isinstance(tools, list):
        raise ValueError(f"{path}: expected an object with a 'tools' list")
    out: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not {"name", "description", "parameters"} <= set(tool):
            raise ValueError(f"{path}: tools[{i}] needs name, description and parameters")
        out[str(tool["name"])] = {"description": str(tool["description"]), "parameters": tool["parameters"]}
    return out


def recorded_output(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """What a catalog call answers, served by the mesh or run by the client: its own arguments, recorded."""
    return {"status": "ok", "tool": name, "request": args}


def _recorder(name: str) -> ToolFn:
    async def recorded(args: dict[str, Any]) -> dict[str, Any]:
        return recorded_output(name, args)

    return recorded


def catalog_specs(catalog: Mapping[str, Mapping[str, Any]]) -> list[common_pb2.ToolSpec]:
    """The catalog as a client brings it (StartTurn.client_tools): a name, a description and a schema."""
    return [client_tool(name, str(tool["description"]), dict(tool["parameters"])) for name, tool in catalog.items()]


def catalog_tools(catalog: Mapping[str, Mapping[str, Any]]) -> list[ToolDefinition]:
    """The catalog as executor tools: description and schema only, calls recorded (not cached, one attempt)."""
    return [
        ToolDefinition(
            name=name,
            description=str(tool["description"]),
            parameters=dict(tool["parameters"]),
            fn=_recorder(name),
            max_attempts=1,
        )
        for name, tool in catalog.items()
    ]
