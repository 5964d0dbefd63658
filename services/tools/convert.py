"""Proto ↔ domain conversion for the tool executor.

The tenant of a call comes from the ``agentmesh.tenant`` baggage in its
``trace_context``: the router's tenant interceptor sets it from the gateway's
header, and only mesh peers (mTLS) can reach this service.
"""

from __future__ import annotations

import json

from opentelemetry import baggage

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.runtime.interceptors.tracing import extract_context
from services.runtime.protoutil import duration
from services.runtime.tenancy import TENANT_BAGGAGE
from services.tools.calls import CallOutcome, CallRequest, CallStatus
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
