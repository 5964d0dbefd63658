"""The HTTP edge's pure parts: OpenAI request validation and the one gRPC → HTTP error mapping."""

from __future__ import annotations

from typing import Any

import pytest

from agentmesh_client import Sampling
from gateway.openai_errors import http_error
from gateway.openai_request import parse_chat_request
from services.runtime.errors import (
    AgentMeshError,
    DeadlineExceeded,
    InvalidArgument,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

USER = [{"role": "user", "content": "hi"}]


def test_errors_map_to_http_once() -> None:
    limited = http_error(ResourceExhausted("slow down", retry_after_s=0.2, reason="RATE_LIMITED"))
    assert (limited.status, limited.headers) == (429, {"Retry-After": "1", "retry-after-ms": "200"})
    assert limited.body["error"]["type"] == "rate_limit_error" and limited.body["error"]["code"] == "rate_limited"
    shed = http_error(ResourceExhausted("overloaded", retry_after_s=2.5, reason="SHED"))
    assert (shed.status, shed.headers["Retry-After"], shed.body["error"]["type"]) == (503, "3", "overloaded_error")
    assert (
        http_error(Unavailable("no router")).status == 503 and "Retry-After" not in http_error(Unavailable("x")).headers
    )
    assert http_error(Unauthenticated("no key")).status == 401
    assert http_error(DeadlineExceeded("late")).status == 504
    bad = http_error(InvalidArgument.field("top_p", "must be greater than 0"))
    assert bad.status == 400 and bad.body["error"]["param"] == "top_p"
    hidden = http_error(AgentMeshError("secret detail"))
    assert hidden.status == 500 and hidden.body["error"]["message"] == "internal error"
    unknown = http_error(AgentMeshError("x", metadata={"grpc_code": "UNIMPLEMENTED"}))
    assert unknown.status == 500


def test_a_request_maps_to_sampling_priority_and_tools() -> None:
    body = {
        "model": "agentmesh-agent",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        ],
        "temperature": 0.5,
        "top_p": 0.9,
        "max_tokens": 9,
        "max_completion_tokens": 7,
        "seed": 3,
        "stop": "END",
        "stream": True,
        "stream_options": {"include_usage": True},
        "tool_choice": {"type": "function", "function": {"name": "clock"}},
    }
    chat = parse_chat_request(body, {"x-agentmesh-priority": "p0"})
    assert chat.agent and chat.message == "hi" and chat.system_prompt == "Be brief." and chat.tools == "clock"
    assert chat.sampling == Sampling(0.5, 0.9, None, 7, 3, ("END",)) and chat.priority == "P0"
    assert chat.stream and chat.include_usage
    plain = parse_chat_request({"model": "gpt-4o-mini", "messages": USER}, {})
    assert not plain.agent and plain.tools == "auto" and plain.sampling == Sampling() and plain.priority == "P1"
    history = [*USER, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "and now?"}]
    continued = parse_chat_request({"model": "agentmesh-agent", "messages": history}, {"x-agentmesh-session": "s1"})
    assert continued.message == "and now?" and continued.session_id == "s1"


@pytest.mark.parametrize(
    ("body", "headers", "param"),
    [
        ({"messages": USER}, {}, "model"),
        ({"model": "m", "messages": []}, {}, "messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, {}, "messages[0].role"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            {},
            "messages[0].content[0]",
        ),
        ({"model": "m", "messages": [*USER, {"role": "assistant", "content": "x"}]}, {}, "messages[1].role"),
        ({"model": "m", "messages": USER, "temperature": 3}, {}, "temperature"),
        ({"model": "m", "messages": USER, "max_tokens": 0}, {}, "max_tokens"),
        ({"model": "m", "messages": USER, "stop": ["a", "b", "c", "d", "e"]}, {}, "stop"),
        ({"model": "m", "messages": USER, "n": 2}, {}, "n"),
        ({"model": "m", "messages": USER, "stream_options": {"include_usage": True}}, {}, "stream_options"),
        ({"model": "m", "messages": USER, "tool_choice": "required"}, {}, "tool_choice"),
        ({"model": "m", "messages": USER}, {"x-agentmesh-priority": "P9"}, "X-AgentMesh-Priority"),
        ({"model": "m", "messages": USER}, {"x-agentmesh-session": "s"}, "X-AgentMesh-Session"),
    ],
)
def test_invalid_requests_name_the_field(body: dict[str, Any], headers: dict[str, str], param: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        parse_chat_request(body, headers)
    assert err.value.field_violations[0].field == param
