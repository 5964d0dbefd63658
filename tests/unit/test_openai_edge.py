"""The HTTP edge's pure parts: body decoding, OpenAI request validation (messages, client tools), the
completion and chunk bodies of tool calls, and the one gRPC → HTTP error mapping."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentmesh_client import ClientToolCall, Sampling, Usage
from gateway.openai_body import MAX_DEPTH, decode_body
from gateway.openai_errors import http_error
from gateway.openai_messages import PriorCall
from gateway.openai_request import ChatRequest, parse_chat_request
from gateway.openai_response import Reply
from gateway.openai_tools import NO_ARGUMENTS, SchemaChecks, parse_tools
from services.runtime.errors import (
    AgentMeshError,
    DeadlineExceeded,
    FieldViolation,
    InvalidArgument,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

USER = [{"role": "user", "content": "hi"}]
MODEL = "SmolLM2-135M-Instruct"
ORDER = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


def tool(name: str = "get_order_status", parameters: Any = ORDER, **extra: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": "An order's status.", "parameters": parameters, **extra},
    }


def call(call_id: str, name: str = "get_order_status", arguments: str = '{"order_id":"A1"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def parse(body: dict[str, Any], headers: dict[str, str] | None = None, **kw: Any) -> ChatRequest:
    return parse_chat_request({"model": MODEL, "messages": USER, **body}, headers or {}, **kw)


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


def test_a_request_maps_to_sampling_priority_and_tool_choice() -> None:
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
        "logit_bias": {"50256": -100, "13": 2.5},
    }
    chat = parse_chat_request(body, {"x-agentmesh-priority": "p0"})
    assert chat.agent and chat.message == "hi" and chat.system_prompt == "Be brief." and chat.tool_choice == "clock"
    assert chat.sampling == Sampling(0.5, 0.9, None, 7, 3, ("END",)) and chat.priority == "P0"
    assert chat.stream and chat.include_usage and chat.converse and not chat.client_tools
    plain = parse({})
    assert not plain.agent and not plain.converse and plain.tool_choice == "auto" and plain.priority == "P1"
    assert plain.sampling == Sampling()
    history = [*USER, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "and now?"}]
    continued = parse_chat_request({"model": "agentmesh-agent", "messages": history}, {"x-agentmesh-session": "s1"})
    assert continued.message == "and now?" and continued.session_id == "s1" and continued.dialogue.history == ()


def test_a_history_becomes_earlier_turns_on_both_models() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada."},
        {"role": "user", "content": "Where is order A1?"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "It shipped."},
        {"role": "user", "content": "One more thing."},
        {"role": "user", "content": [{"type": "text", "text": "What is my name?"}]},
    ]
    for model in (MODEL, "agentmesh-agent"):
        chat = parse({"model": model, "messages": messages, "tools": [tool()]})
        assert chat.converse and chat.message == "One more thing.\n\nWhat is my name?"
        assert chat.dialogue.history == (("My name is Ada.", "Hello Ada."), ("Where is order A1?", "It shipped."))
        assert chat.dialogue.prior_calls == () and chat.system_prompt == "Be brief."
    no_tools = parse({"messages": messages[:4]})
    assert no_tools.converse and no_tools.turn_tool_choice == "none"  # the plain model calls none of the mesh's
    renamed = no_tools.http_fields((FieldViolation("start_turn.history[0].user_message", "must not be empty"),))
    assert renamed == [FieldViolation("messages[1].content", "must not be empty")]


def test_tool_results_after_the_last_user_message_are_prior_calls() -> None:
    messages = [
        *USER,
        {"role": "assistant", "content": "Let me look.", "tool_calls": [call("c1"), call("c2", arguments="")]},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "delayed"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
        {"role": "assistant", "tool_calls": [call("c3", arguments='{"order_id": "B2"}')]},
        {"role": "tool", "tool_call_id": "c3", "content": "lost"},
    ]
    chat = parse({"messages": messages, "tools": [tool()], "parallel_tool_calls": False})
    assert chat.message == "hi" and chat.max_calls_per_round == 1 and chat.dialogue.history == ()
    assert chat.dialogue.prior_calls == (
        PriorCall("c1", "get_order_status", '{"order_id":"A1"}', "shipped"),
        PriorCall("c2", "get_order_status", "{}", "delayed"),
        PriorCall("c3", "get_order_status", '{"order_id": "B2"}', "lost"),
    )
    protos = chat.prior_tool_calls()
    assert [(p.call_id, p.output) for p in protos] == [("c1", "shipped"), ("c2", "delayed"), ("c3", "lost")]
    assert chat.http_fields((FieldViolation("start_turn.prior_tool_calls[2].arguments_json", "x"),)) == [
        FieldViolation("messages[4].tool_calls[0].function.arguments", "x")
    ]


def test_tools_become_client_tool_specs_in_order() -> None:
    chat = parse({"tools": [tool(), tool("ping", None), tool("noop", {}, strict=True)], "tool_choice": "required"})
    specs = chat.specs()
    assert [s.name for s in specs] == ["get_order_status", "ping", "noop"] and chat.tool_choice == "required"
    assert json.loads(specs[0].parameters_json_schema) == ORDER and specs[0].description == "An order's status."
    assert specs[1].parameters_json_schema == specs[2].parameters_json_schema == NO_ARGUMENTS
    assert list(json.loads(specs[0].parameters_json_schema)) == list(ORDER)  # the caller's order is kept
    assert chat.converse and chat.turn_tool_choice == "required"
    named = parse({"tools": [tool()], "tool_choice": {"type": "function", "function": {"name": "get_order_status"}}})
    assert named.tool_choice == "get_order_status"
    assert chat.http_fields((FieldViolation("start_turn.client_tools[1].name", "taken"),)) == [
        FieldViolation("tools[1].function.name", "taken")
    ]
    assert chat.http_fields((FieldViolation("start_turn.sampling.top_k", "x"),)) == [FieldViolation("top_k", "x")]
    assert chat.http_fields((FieldViolation("start_turn.message", "x"),)) == [FieldViolation("messages", "x")]


def test_schema_checks_are_jsonschemas_and_remembered() -> None:
    checks = SchemaChecks(size=2)
    good = parse_tools([tool(), tool("b", {"type": "object", "properties": {"n": {"type": "integer"}}})], cap=8)
    assert not checks.known(good)
    checks.check(good)
    assert checks.known(good)
    bad = parse_tools([tool(), tool("x", {"type": "object", "properties": {"n": {"pattern": "("}}})], cap=8)
    with pytest.raises(InvalidArgument) as err:
        checks.check(bad)
    assert err.value.field_violations[0].field == "tools[1].function.parameters"
    assert "parameters.properties.n.pattern" in err.value.message
    assert not checks.known(good)  # two remembered: the oldest was dropped


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (b"{", None),
        (b'{"model": NaN}', None),
        (b'{"temperature": 1e999}', None),
        (b'{"max_tokens": ' + b"9" * 5000 + b"}", None),
        (b"\xff\xfe{}", None),
        (b"[" * 100_000 + b"]" * 100_000, None),
        (b'{"a": ' + b'{"a": ' * MAX_DEPTH + b"1" + b"}" * (MAX_DEPTH + 1), "a" + ".a" * (MAX_DEPTH - 1)),
        (b'{"messages": [{"role": "user", "content": "\\ud800"}]}', "messages[0].content"),
        (b'{"tools": [{"\\udfff": 1}]}', "tools[0]"),
    ],
)
def test_bodies_python_would_take_but_json_or_protobuf_would_not_are_refused(raw: bytes, param: str | None) -> None:
    with pytest.raises(InvalidArgument) as err:
        decode_body(raw)
    assert (err.value.field_violations[0].field if err.value.field_violations else None) == param


def test_bodies_within_the_rules_decode() -> None:
    assert decode_body('{"a": ["é", 1.5, 2, {"b": null}]}'.encode()) == {"a": ["é", 1.5, 2, {"b": None}]}
    assert decode_body(b'{"a": ' * (MAX_DEPTH - 1) + b"1" + b"}" * (MAX_DEPTH - 1))


def test_a_streamed_call_is_openais_chunk_sequence_and_the_whole_one_its_message() -> None:
    calls = (ClientToolCall("c1", "get_order_status", '{"order_id":"A1"}'), ClientToolCall("c2", "ping", "{}"))
    stream = Reply("m", "r1")
    chunks = [
        json.loads(c.removeprefix(b"data: ")) for c in [*stream.call_chunks(calls), *stream.finish_chunks("tool_calls")]
    ]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_order_status", "arguments": ""}}
            ],
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"order_id":"A1"}'}}]},
        {"tool_calls": [{"index": 1, "id": "c2", "type": "function", "function": {"name": "ping", "arguments": ""}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]},
        {},
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 4 + ["tool_calls"]
    whole = Reply("m", "r1")
    whole.calls.extend(calls)
    message = whole.completion("tool_calls", Usage(3, 4))["choices"][0]
    assert message["finish_reason"] == "tool_calls" and message["message"]["content"] is None
    assert message["message"]["tool_calls"][1] == {
        "id": "c2",
        "type": "function",
        "function": {"name": "ping", "arguments": "{}"},
    }
    text = Reply("m", "r1")
    first = [json.loads(c.removeprefix(b"data: ")) for c in text.text_chunks("Hi")]
    assert [c["choices"][0]["delta"] for c in first] == [{"role": "assistant", "content": ""}, {"content": "Hi"}]
    assert text.completion("tool_calls", Usage(3, 4))["choices"][0]["finish_reason"] == "stop"  # no calls


@pytest.mark.parametrize(
    ("body", "headers", "param"),
    [
        ({"model": None}, {}, "model"),
        ({"messages": []}, {}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, {}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, {}, "messages[0].content[0]"),
        ({"messages": [*USER, {"role": "assistant", "content": "x"}]}, {}, "messages[1].role"),
        ({"messages": [{"role": "assistant", "content": "x"}, *USER]}, {}, "messages[0].role"),
        ({"messages": [{"role": "system", "content": "x"}]}, {}, "messages"),
        ({"messages": [*USER, {"role": "assistant", "content": None}, *USER]}, {}, "messages[1].content"),
        ({"temperature": 3}, {}, "temperature"),
        ({"temperature": 10**400}, {}, "temperature"),
        ({"max_tokens": 0}, {}, "max_tokens"),
        ({"max_tokens": 2**32}, {}, "max_tokens"),
        ({"max_completion_tokens": 2**63}, {}, "max_completion_tokens"),
        ({"seed": 2**64}, {}, "seed"),
        ({"top_k": -1}, {}, "top_k"),
        ({"repetition_penalty": 10**400}, {}, "repetition_penalty"),
        ({"stop": ["a", "b", "c", "d", "e"]}, {}, "stop"),
        ({"stop": ["a", ""]}, {}, "stop"),
        ({"n": 2}, {}, "n"),
        ({"stream_options": {"include_usage": True}}, {}, "stream_options"),
        ({"tool_choice": "required"}, {}, "tool_choice"),
        ({"logit_bias": [1]}, {}, "logit_bias"),
        ({"logit_bias": {"the": 1}}, {}, "logit_bias"),
        ({"logit_bias": {"12": 101}}, {}, "logit_bias"),
        ({"logit_bias": {"12": True}}, {}, "logit_bias"),
        ({"functions": [{"name": "f"}]}, {}, "functions"),
        ({"parallel_tool_calls": "no"}, {}, "parallel_tool_calls"),
        ({"tools": {"a": 1}}, {}, "tools"),
        ({"tools": [tool(), "x"]}, {}, "tools[1]"),
        ({"tools": [{"type": "custom", "function": {"name": "f"}}]}, {}, "tools[0].type"),
        ({"tools": [tool(), tool("b"), tool("c"), tool("d", [])]}, {}, "tools[3].function.parameters"),
        ({"tools": [tool("d", {"type": "string"})]}, {}, "tools[0].function.parameters"),
        ({"tools": [tool(), tool()]}, {}, "tools[1].function.name"),
        ({"tools": [tool("has space")]}, {}, "tools[0].function.name"),
        ({"tools": [tool("x" * 65)]}, {}, "tools[0].function.name"),
        ({"tools": [tool("ok\n")]}, {}, "tools[0].function.name"),
        ({"tools": [tool(strict="yes")]}, {}, "tools[0].function.strict"),
        ({"tools": [tool(description=3)]}, {}, "tools[0].function.description"),
        ({"tools": [tool(f"t{i}") for i in range(129)]}, {}, "tools"),
        (
            {"tools": [tool()], "tool_choice": {"type": "function", "function": {"name": "other"}}},
            {},
            "tool_choice.function.name",
        ),
        ({"tools": [tool()], "tool_choice": {"type": "function"}}, {}, "tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "clock"}}}, {}, "tool_choice"),
        (
            {"tools": [tool()], "messages": [*USER, {"role": "tool", "tool_call_id": "c1", "content": "x"}]},
            {},
            "messages[1].tool_call_id",
        ),
        (
            {
                "tools": [tool()],
                "messages": [
                    *USER,
                    {"role": "assistant", "tool_calls": [call("c1")]},
                    {"role": "tool", "tool_call_id": "c9", "content": "x"},
                ],
            },
            {},
            "messages[2].tool_call_id",
        ),
        (
            {
                "tools": [tool()],
                "messages": [
                    *USER,
                    {"role": "assistant", "tool_calls": [call("c1")]},
                    {"role": "tool", "tool_call_id": "c1", "content": "x"},
                    {"role": "tool", "tool_call_id": "c1", "content": "y"},
                ],
            },
            {},
            "messages[3].tool_call_id",
        ),
        (
            {
                "tools": [tool()],
                "messages": [
                    *USER,
                    {"role": "assistant", "tool_calls": [call("c1"), call("c2")]},
                    {"role": "tool", "tool_call_id": "c1", "content": "x"},
                ],
            },
            {},
            "messages[1].tool_calls[1]",
        ),
        (
            {
                "tools": [tool()],
                "messages": [
                    *USER,
                    {"role": "assistant", "tool_calls": [call("c1", arguments="[1]")]},
                    {"role": "tool", "tool_call_id": "c1", "content": "x"},
                ],
            },
            {},
            "messages[1].tool_calls[0].function.arguments",
        ),
        (
            {
                "messages": [
                    *USER,
                    {"role": "assistant", "tool_calls": [call("c1", arguments='{"a": "\\ud800"}')]},
                    {"role": "tool", "tool_call_id": "c1", "content": "x"},
                ],
            },
            {},
            "messages[1].tool_calls[0].function.arguments",
        ),
        (
            {
                "tools": [tool()],
                "messages": [
                    *USER,
                    {"role": "assistant", "tool_calls": [call("c1", name="unknown")]},
                    {"role": "tool", "tool_call_id": "c1", "content": "x"},
                ],
            },
            {},
            "messages[1].tool_calls[0].function.name",
        ),
        ({}, {"x-agentmesh-priority": "P9"}, "X-AgentMesh-Priority"),
        ({}, {"x-agentmesh-session": "s"}, "X-AgentMesh-Session"),
        ({"model": "agentmesh-agent"}, {"x-agentmesh-session": "s\udcff"}, "X-AgentMesh-Session"),
    ],
)
def test_invalid_requests_name_the_field(body: dict[str, Any], headers: dict[str, str], param: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        parse(body, headers)
    assert err.value.field_violations[0].field == param, err.value.message


def test_the_tool_cap_is_the_edges_setting() -> None:
    assert len(parse({"tools": [tool(f"t{i}") for i in range(3)]}, max_tools=3).client_tools) == 3
    with pytest.raises(InvalidArgument) as err:
        parse({"tools": [tool(f"t{i}") for i in range(4)]}, max_tools=3)
    assert err.value.field_violations[0].field == "tools" and "at most 3" in err.value.message
