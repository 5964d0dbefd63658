"""The OpenAI edge's whole request surface, fuzzed through the real edge in front of a real gateway and
router (in-process simulator mesh): every input is a 4xx in OpenAI's error shape or a correct answer.

Bodies mix valid structure with junk field by field (roles, contents, tool calls and tool messages,
client tools with arbitrary schemas, tool choices, sampling numbers past 32 and 64 bits, logit_bias,
lone surrogates, unknown models, the mesh's headers), so most examples pass some checks and fail a later
one, and some run to an answer; raw bytes cover what is not JSON at all. An answer is checked too: a
completion or a stream ending in ``[DONE]``, and tool calls that name a tool of the request with
arguments that are a JSON object.
"""

from __future__ import annotations

import copy
import json
import string
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import jsonschema
import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.http_edge import HttpEdge
from meshkit.mesh import FAST_SIM, Mesh, start_mesh
from tests.conftest import REDIS_URL

KEY = "acme-secret-key"
MODEL = "SmolLM2-135M-Instruct"
AGENT = "agentmesh-agent"
JSON = {"Content-Type": "application/json"}
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@dataclass
class Edge:
    http: httpx.AsyncClient
    url: str


@pytest.fixture(scope="module")
async def edge() -> AsyncIterator[Edge]:
    redis = aioredis.Redis.from_url(REDIS_URL)
    mesh: Mesh = await start_mesh(redis, replicas=1, sim=replace(FAST_SIM, output_tokens=8))
    await mesh.add_router(response_cache_ttl_s=0, tool_selection="llm")  # no embedding model to load
    limits: dict[str, Any] = {"rate_rps": 1e6, "rate_burst": 1e6, "rate_window_max": 10**9, "rate_tokens_per_min": 1e12}
    _, _, server = await mesh.add_gateway(rate_limit_backend="memory", rate_token_burst=1e12, **limits)
    served = HttpEdge(server.address, timeout_s=30, completion_model=MODEL, max_tools=8)
    await served.start("127.0.0.1", 0, grace_s=0)
    async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {KEY}"}) as http:
        yield Edge(http, f"http://127.0.0.1:{served.port}/v1/chat/completions")
    await served.close()
    await mesh.close()
    await redis.aclose()


# -- strategies ---------------------------------------------------------------
# A request is drawn valid (a conversation, its tools, sampling), then 0-2 of its fields, at any depth,
# are replaced by junk or removed, or junk fields are added: most examples get past the first checks.

TOOL_NAMES = ("get_order_status", "ping", "track-parcel_2")
words = st.text(st.characters(exclude_categories=["Cs"]), max_size=20).map(lambda t: f"Where is order A1? {t}")
schemas = st.one_of(
    st.just({"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}),
    st.just({}),
    st.builds(
        lambda props, strict: (
            {"type": "object", "properties": props, "required": sorted(props)}
            | ({"additionalProperties": False} if strict else {})
        ),
        st.dictionaries(
            st.sampled_from(["a", "b", "n"]),
            st.sampled_from(
                [{"type": "string"}, {"type": "integer", "minimum": 3}, {"enum": ["x", "y"]}, {"type": "boolean"}]
            ),
            max_size=3,
        ),
        st.booleans(),
    ),
)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**31, 2**32, 2**63, 2**64, -1, 0, 1e308, -0.0, 101, "", [], {}, "\ud800", "a\udfffb"]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),  # surrogates included
    st.sampled_from(["auto", "none", "required", "function", "user", "assistant", "tool", "c1", "ping", MODEL, AGENT]),
    st.recursive(
        st.text(max_size=5) | st.integers(),
        lambda x: st.lists(x, max_size=3) | st.dictionaries(st.text(max_size=5), x, max_size=3),
        max_leaves=6,
    ),
)
FIELDS = (
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "max_tokens",
    "max_completion_tokens",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "stop",
    "n",
    "logit_bias",
    "response_format",
    "stream",
    "stream_options",
    "logprobs",
    "functions",
    "user",
)


@st.composite
def valid_bodies(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(TOOL_NAMES), unique=True, max_size=3))
    tools = [
        {"type": "function", "function": {"name": n, "description": draw(words), "parameters": draw(schemas)}}
        for n in names
    ]
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(words)})
    for _ in range(draw(st.integers(0, 2))):
        messages += [{"role": "user", "content": draw(words)}, {"role": "assistant", "content": draw(words)}]
    messages.append({"role": "user", "content": [{"type": "text", "text": draw(words)}]})
    if len(names) > 0 and draw(st.booleans()):
        called = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2))
        calls = [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": '{"order_id": "A1"}'}}
            for i, n in enumerate(called)
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [
            {"role": "tool", "tool_call_id": c["id"], "content": draw(words)} for c in draw(st.permutations(calls))
        ]
    body: dict[str, Any] = {"model": draw(st.sampled_from([MODEL, AGENT])), "messages": messages}
    if tools:
        body["tools"] = tools
        choice = draw(st.sampled_from(["auto", "none", "required", "named"]))
        body["tool_choice"] = {"type": "function", "function": {"name": names[0]}} if choice == "named" else choice
        if draw(st.booleans()):
            body["parallel_tool_calls"] = draw(st.booleans())
    if draw(st.booleans()):
        body["stream"] = True
        if draw(st.booleans()):
            body["stream_options"] = {"include_usage": True}
    body["max_tokens"] = draw(st.integers(1, 8))
    optional = {
        "temperature": st.floats(0, 2),
        "top_p": st.floats(0.01, 1),
        "seed": st.integers(0, 2**64 - 1),
        "stop": st.lists(words, max_size=4),
        "logit_bias": st.dictionaries(st.integers(0, 50_000).map(str), st.integers(-100, 100), max_size=3),
        "response_format": st.just({"type": "text"}),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=3)):
        body[key] = draw(optional[key])
    return body


def paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` a field or an item sits (the root excluded)."""
    found = []
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found += [(*at, key), *paths(child, (*at, key))]
    return found


@st.composite
def fuzzed_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body = copy.deepcopy(draw(valid_bodies()))  # st.just() hands out one object: mutate a copy
    for _ in range(draw(st.sampled_from([0, 1, 1, 2]))):
        action = draw(st.sampled_from(["replace", "replace", "remove", "add"]))
        if action == "add":
            body[draw(st.sampled_from(FIELDS))] = draw(junk)
            continue
        path = draw(st.sampled_from(paths(body)))
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        if action == "remove":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(junk)
    return body


ascii_header = st.text(alphabet=string.ascii_letters + string.digits + "-_ {}", max_size=12).map(str.strip)
headers = st.fixed_dictionaries(
    {}, optional={"X-AgentMesh-Session": ascii_header, "X-AgentMesh-Priority": ascii_header}
)


# -- checks -------------------------------------------------------------------


def check_reply(reply: httpx.Response, body: Any) -> None:
    """A 4xx in OpenAI's error shape, or a whole answer that is one."""
    assert reply.status_code < 500, reply.text
    if reply.status_code >= 400:
        error = reply.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}, error
        assert isinstance(error["message"], str) and isinstance(error["type"], str)
        assert error["param"] is None or isinstance(error["param"], str)
        assert error["code"] is None or isinstance(error["code"], str)
        return
    assert reply.status_code == 200
    offered = {t["function"]["name"]: t["function"].get("parameters") or {} for t in body.get("tools") or []}
    if reply.headers["content-type"].startswith("text/event-stream"):
        events = [e.removeprefix("data: ") for e in reply.text.split("\n\n") if e]
        assert events[-1] == "[DONE]", events
        chunks = [json.loads(e) for e in events[:-1]]
        assert all("error" not in c for c in chunks), chunks
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        assert finishes[-1] in ("stop", "length", "tool_calls") and finishes.count(None) == len(finishes) - 1
        calls: dict[int, dict[str, str]] = {}
        for c in chunks:
            for part in (c["choices"][0]["delta"].get("tool_calls") or []) if c["choices"] else []:
                call = calls.setdefault(part["index"], {"name": "", "arguments": ""})
                call["name"] += part.get("function", {}).get("name", "")
                call["arguments"] += part["function"]["arguments"]
        assert (finishes[-1] == "tool_calls") == bool(calls)
        whole_calls = list(calls.values())
    else:
        choice = reply.json()["choices"][0]
        assert choice["finish_reason"] in ("stop", "length", "tool_calls")
        message = choice["message"]
        whole_calls = [c["function"] for c in message.get("tool_calls") or []]
        assert (choice["finish_reason"] == "tool_calls") == bool(whole_calls)
        assert isinstance(message["content"], str) or (message["content"] is None and whole_calls)
    for call in whole_calls:  # the mesh's promise: arguments parse and match the tool's schema
        assert call["name"] in offered, call
        arguments = json.loads(call["arguments"])
        assert isinstance(arguments, dict), call
        jsonschema.validate(arguments, offered[call["name"]])


@FUZZ
@given(body=fuzzed_bodies(), extra=headers)
async def test_fuzzed_chat_requests_get_a_4xx_in_openais_shape_or_an_answer(
    edge: Edge, body: dict[str, Any], extra: dict[str, str]
) -> None:
    # json.dumps escapes a lone surrogate as \ud800, as a careless client's serializer would send it.
    reply = await edge.http.post(edge.url, content=json.dumps(body), headers={**JSON, **extra})
    check_reply(reply, body)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    raw=st.one_of(
        st.binary(max_size=64),
        st.integers(1, 200_000).map(lambda n: b'{"model": ' + b"[" * n + b"]" * n + b"}"),
        st.integers(1, 200_000).map(lambda n: b'{"messages": [{"role": "user", "content": ' + b"{" * n),
        st.text(max_size=40).map(
            lambda t: json.dumps({"model": MODEL, "messages": [{"role": "user", "content": t}]}).encode()
        ),
        st.sampled_from(
            [b'{"model": NaN}', b'{"max_tokens": 1e999}', b"\xef\xbb\xbf{}", b'{"max_tokens": ' + b"9" * 5000 + b"}"]
        ),
    ),
    content_type=st.sampled_from(["application/json", "application/json; charset=latin-9000", "text/plain"]),
)
async def test_fuzzed_raw_bodies_get_a_4xx_in_openais_shape_or_an_answer(
    edge: Edge, raw: bytes, content_type: str
) -> None:
    reply = await edge.http.post(edge.url, content=raw, headers={"Content-Type": content_type})
    check_reply(reply, {})


async def test_the_holes_a_careless_client_found_are_4xx(edge: Edge) -> None:
    user = [{"role": "user", "content": "hi"}]
    cases: list[tuple[bytes | dict[str, Any], int, str | None]] = [
        (b'{"model": "x", "messages": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", 400, None),
        ({"model": MODEL, "messages": user, "max_tokens": 2**32}, 400, "max_tokens"),
        ({"model": MODEL, "messages": [{"role": "user", "content": "\ud800"}]}, 400, "messages[0].content"),
        ({"model": "gpt-4o", "messages": user}, 404, None),
        ({"model": MODEL, "messages": user, "logit_bias": {"x": "y"}}, 400, "logit_bias"),
        (
            {
                "model": MODEL,
                "messages": user,
                "tools": [{"type": "function", "function": {"name": f"t{i}"}} for i in range(9)],
            },
            400,
            "tools",
        ),
    ]
    for body, status, param in cases:
        if isinstance(body, bytes):
            reply = await edge.http.post(edge.url, content=body, headers={"Content-Type": "application/json"})
        else:
            # json.dumps escapes the lone surrogate as \ud800, as a careless client's serializer would.
            reply = await edge.http.post(
                edge.url, content=json.dumps(body), headers={"Content-Type": "application/json"}
            )
        assert reply.status_code == status, reply.text
        assert reply.json()["error"]["param"] == param
    unknown = await edge.http.post(edge.url, json={"model": "gpt-4o", "messages": user})
    assert unknown.json()["error"]["code"] == "model_not_found"
    for reply, status in (
        (await edge.http.get(edge.url), 405),
        (await edge.http.post(edge.url, content=b"[" * (2 << 20), headers=JSON), 413),
    ):
        assert reply.status_code == status and reply.json()["error"]["type"] == "invalid_request_error", reply.text


@pytest.mark.parametrize("model", [MODEL, AGENT])
async def test_a_named_client_tool_with_its_result_in_the_history_is_answered(edge: Edge, model: str) -> None:
    """Found by the fuzz test above: on the agent model the router planned only the mesh's tools once prior
    results were in, yet filled the named tool, which is the client's (a KeyError, INTERNAL)."""
    order = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    call = {"id": "c0", "type": "function", "function": {"name": "get_order_status", "arguments": '{"order_id": "A1"}'}}
    body = {
        "model": model,
        "messages": [
            {"role": "user", "content": "Where is order A1?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "content": "shipped"},
        ],
        "tools": [{"type": "function", "function": {"name": "get_order_status", "parameters": order}}],
        "tool_choice": {"type": "function", "function": {"name": "get_order_status"}},
        "max_tokens": 4,
    }
    reply = await edge.http.post(edge.url, json=body)
    assert reply.status_code == 200, reply.text
