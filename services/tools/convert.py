"""Proto ↔ domain conversion for the tool executor.

The tenant of a call comes from the ``agentmesh.tenant`` baggage in its
``trace_context``: the router's tenant interceptor sets it from the gateway's
header, and only mesh peers (mTLS) can reach this service. ListTools and
WatchTools read it from their metadata: ``x-agentmesh-tenant`` when given, else
the same baggage (the W3C ``baggage`` header the router's tracing sends).

A call the tenant may not make is PERMISSION_DENIED on the wire, with
``error_reason`` "PERMISSION_DENIED" beside it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

from opentelemetry import baggage

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.runtime.interceptors.tracing import extract_context
from services.runtime.protoutil import duration
from services.runtime.tenancy import TENANT_BAGGAGE, TENANT_HEADER
from services.tools.calls import CallOutcome, CallProgress, CallRequest, CallStatus
from services.tools.registry import ToolDefinition

STATUS = {
    CallStatus.OK: common_pb2.TOOL_CALL_STATUS_OK,
    CallStatus.FAILED: common_pb2.TOOL_CALL_STATUS_FAILED,
    CallStatus.TIMEOUT: common_pb2.TOOL_CALL_STATUS_TIMEOUT,
    CallStatus.CANCELLED: common_pb2.TOOL_CALL_STATUS_CANCELLED,
    CallStatus.INVALID_ARGUMENT: common_pb2.TOOL_CALL_STATUS_INVALID_ARGUMENT,
    CallStatus.NOT_FOUND: common_pb2.TOOL_CALL_STATUS_NOT_FOUND,
    CallStatus.UNAVAILABLE: common_pb2.TOOL_CALL_STATUS_UNAVAILABLE,
    CallStatus.RESOURCE_EXHAUSTED: common_pb2.TOOL_CALL_STATUS_RESOURCE_EXHAUSTED,
    CallStatus.PERMISSION_DENIED: common_pb2.TOOL_CALL_STATUS_PERMISSION_DENIED,
}


def request_from_proto(call: tools_pb2.ToolCall) -> CallRequest:
    return CallRequest(
        call_id=call.call_id,
        tool_name=call.tool_name,
        arguments_json=call.arguments_json,
        timeout_s=call.timeout.ToNanoseconds() / 1e9 if call.HasField("timeout") else None,
        bypass_cache=call.bypass_cache,
        tenant=str(baggage.get_baggage(TENANT_BAGGAGE, extract_context(dict(call.trace_context))) or ""),
    )


def outcome_to_proto(outcome: CallOutcome) -> tools_pb2.ToolResult:
    return tools_pb2.ToolResult(
        call_id=outcome.call_id,
        tool_name=outcome.tool_name,
        status=STATUS[outcome.status],
        output_json=outcome.output_json,
        error_message=outcome.error_message,
        error_field=outcome.error_field,
        latency=duration(outcome.latency_s),
        cached=outcome.cached,
        attempts=outcome.attempts,
        summary=outcome.summary,
        error_reason=outcome.reason,
    )


def progress_to_proto(call_id: str, tool_name: str, progress: CallProgress) -> tools_pb2.ToolProgress:
    frame = tools_pb2.ToolProgress(
        call_id=call_id, tool_name=tool_name, progress=progress.progress, message=progress.message
    )
    if progress.total is not None:
        frame.total = progress.total
    return frame


def tenant_from_metadata(metadata: Iterable[tuple[str, str | bytes]]) -> str:
    """The tenant a ListTools/WatchTools caller names (see module docstring); "" for none."""
    pairs = [(k.lower(), v) for k, v in metadata if isinstance(v, str)]
    for key, value in pairs:
        if key == TENANT_HEADER and value:
            return value
    return str(baggage.get_baggage(TENANT_BAGGAGE, extract_context(dict(pairs))) or "")


def tools_to_proto(tools: Sequence[ToolDefinition]) -> tools_pb2.ListToolsResponse:
    """ListTools' answer for these tools: specs, origins, and a digest of both."""
    reply = tools_pb2.ListToolsResponse(
        tools=[spec_to_proto(t) for t in tools], origins=[origin_to_proto(t) for t in tools]
    )
    digest = hashlib.sha256()
    for spec, origin in zip(reply.tools, reply.origins, strict=True):
        digest.update(spec.SerializeToString(deterministic=True))
        digest.update(origin.SerializeToString(deterministic=True))
    reply.revision = digest.hexdigest()[:16]
    return reply


def origin_to_proto(tool: ToolDefinition) -> tools_pb2.ToolOrigin:
    return tools_pb2.ToolOrigin(
        tool_name=tool.name,
        mcp_server=tool.server,
        mcp_tool_name=tool.server_tool_name,
        available=not tool.why_unavailable(),
        read_only=tool.read_only,
        destructive=tool.destructive,
        open_world=tool.open_world,
        title=tool.title,
    )


def spec_to_proto(tool: ToolDefinition) -> common_pb2.ToolSpec:
    return common_pb2.ToolSpec(
        name=tool.name,
        description=tool.description,
        parameters_json_schema=json.dumps(tool.parameters),
        version=tool.version,
        timeout=duration(tool.timeout_s),
        idempotent=tool.idempotent,
        cache_ttl=duration(tool.cache_ttl_s),
        max_concurrency=tool.max_concurrency,
        max_attempts=tool.attempts,
        examples=[
            common_pb2.ToolExample(
                text=e.text,
                arguments_json=json.dumps(e.arguments) if e.arguments is not None else "",
            )
            for e in tool.examples
        ],
        negative_examples=list(tool.negative_examples),
    )
