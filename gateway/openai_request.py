"""An OpenAI ``/v1/chat/completions`` body, validated into what AgentService needs (``ChatRequest``).

Invalid input raises ``InvalidArgument`` naming the field as OpenAI names it (``messages[2].content``,
``tools[3].function.parameters``, ``max_tokens``), which the edge answers as a 400 with ``param`` set.
What the mesh cannot honour is refused rather than ignored: ``n`` > 1, the deprecated ``functions``,
``logprobs``, a ``response_format`` other than text. ``presence_penalty`` and ``frequency_penalty``
([-2, 2]) are OpenAI's; ``repetition_penalty`` (> 0, 1: none) is an extra body field, as vLLM's server
takes it. ``logit_bias`` is checked for OpenAI's shape (token id → bias in [-100, 100]) and then ignored,
as are the fields that only tune OpenAI's own models (``user``, ``store``...), as vLLM's server ignores
what its engine lacks.

Client-defined tools (``openai_tools.py``) work on both models. With ``tools`` the request becomes a
Converse turn that ends at the client's calls (``end_at_client_calls``): on ``agentmesh-agent`` the mesh's
own tools are offered with them and run in the mesh; on the plain model only the client's are.

Conversation state (``openai_messages.py``): without ``X-AgentMesh-Session`` the whole history is read from
``messages`` (earlier turns become the turn's ``history``, tool results after the last user message its
``prior_tool_calls``). ``agentmesh-agent`` with the header keeps the history in the mesh's session, so only
the last user message (and the tool results after it) is new. A plain-model request with one user message
and no tools is a Complete; any other is a Converse turn with no mesh tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh_client import Priority, Sampling
from gateway.config import HTTP_MAX_TOOLS
from gateway.openai_messages import Dialogue, parse_messages
from gateway.openai_tools import ClientTool, max_calls_per_round, parse_tool_choice, parse_tools
from services.runtime.errors import FieldViolation, InvalidArgument

AGENT_MODEL = "agentmesh-agent"
PRIORITY_HEADER = "X-AgentMesh-Priority"
SESSION_HEADER = "X-AgentMesh-Session"
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to run: a Converse turn (``converse``) or a plain completion."""

    model: str
    dialogue: Dialogue
    sampling: Sampling
    stream: bool
    include_usage: bool
    priority: Priority
    session_id: str
    #: ``auto``, ``none``, ``required`` or a tool's name (the typed client's spelling).
    tool_choice: str
    client_tools: tuple[ClientTool, ...] = ()
    max_calls_per_round: int = 0
    #: gRPC field paths of StartTurn that name something of this request → the HTTP field.
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def agent(self) -> bool:
        return self.model == AGENT_MODEL

    @property
    def message(self) -> str:
        return self.dialogue.message

    @property
    def system_prompt(self) -> str:
        return self.dialogue.system_prompt

    @property
    def converse(self) -> bool:
        """Whether this runs as a Converse turn (the agent, tools, or a history) rather than a Complete."""
        d = self.dialogue
        return self.agent or bool(self.client_tools or d.history or d.prior_calls)

    @property
    def turn_tool_choice(self) -> str:
        """The turn's tool choice: a plain-model turn without client tools must call none of the mesh's."""
        return self.tool_choice if self.agent or self.client_tools else "none"

    def specs(self) -> list[common_pb2.ToolSpec]:
        return [t.spec() for t in self.client_tools]

    def prior_tool_calls(self) -> list[agent_pb2.PriorToolCall]:
        return [
            agent_pb2.PriorToolCall(
                call_id=c.call_id, tool_name=c.tool_name, arguments_json=c.arguments_json, output=c.output
            )
            for c in self.dialogue.prior_calls
        ]

    def http_fields(self, violations: tuple[FieldViolation, ...]) -> list[FieldViolation]:
        """Violations the mesh reported (``start_turn.client_tools[2].name``) renamed to this request's fields
        (``tools[2].function.name``); a path with no better name keeps its last known prefix's."""
        return [FieldViolation(self._http_field(v.field), v.description) for v in violations]

    def _http_field(self, path: str) -> str:
        path = path.removeprefix("start_turn.")
        head, _, rest = path.partition(".")
        for key in (path, head):
            if key in self.fields:
                return self.fields[key] if key == path else ".".join(p for p in (self.fields[key], rest) if p)
        return path


def parse_chat_request(body: Any, headers: dict[str, str], *, max_tools: int = HTTP_MAX_TOOLS) -> ChatRequest:
    """Validate ``body`` (decoded JSON, ``openai_body.py``) and the mesh's headers (names lower-cased)."""
    if not isinstance(body, dict):
        raise InvalidArgument("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidArgument.field("model", "a model name is required")
    agent = model == AGENT_MODEL
    session_id = headers.get(SESSION_HEADER.lower(), "").strip()
    if session_id and not agent:
        raise InvalidArgument.field(SESSION_HEADER, f"sessions belong to model {AGENT_MODEL}")
    if session_id and not (session_id.isascii() and session_id.isprintable()):
        raise InvalidArgument.field(SESSION_HEADER, "a session id from an earlier answer's header")
    if body.get("functions") or body.get("function_call"):
        raise InvalidArgument.field("functions", "the deprecated functions are not supported; send tools")
    tools = parse_tools(body.get("tools"), cap=max_tools)
    names = {t.name for t in tools}
    dialogue = parse_messages(body.get("messages"), known_tool=names.__contains__, replay_history=not session_id)
    choice = parse_tool_choice(body.get("tool_choice"), tools, mesh_tools=agent)
    calls_per_round = max_calls_per_round(body.get("parallel_tool_calls"))
    if body.get("n", 1) != 1:
        raise InvalidArgument.field("n", "only n=1 is supported")
    if body.get("logprobs"):
        raise InvalidArgument.field("logprobs", "logprobs are not supported")
    _check_logit_bias(body.get("logit_bias"))
    response_format = body.get("response_format")
    if response_format is not None and (not isinstance(response_format, dict) or response_format.get("type") != "text"):
        raise InvalidArgument.field("response_format", "only the text format is supported")
    stream = _typed(body, "stream", bool, False)
    options = body.get("stream_options")
    if options is not None and (not stream or not isinstance(options, dict)):
        raise InvalidArgument.field("stream_options", "an object, allowed only when stream is true")
    include_usage = _typed(options or {}, "include_usage", bool, False, field="stream_options.include_usage")
    priority = headers.get(PRIORITY_HEADER.lower(), "P1").strip().upper()
    if priority not in ("P0", "P1", "P2"):
        raise InvalidArgument.field(PRIORITY_HEADER, "P0, P1 or P2")
    fields = {
        **dialogue.fields,
        "session_id": SESSION_HEADER,
        "sampling": "",
        "client_tools": "tools",
        "only_client_tools": "tools",
        "end_at_client_calls": "tools",
        "tool_choice": "tool_choice",
        "tool_choice.mode": "tool_choice",
        "tool_choice.tool_name": "tool_choice.function.name",
        "max_calls_per_round": "parallel_tool_calls",
        "history": "messages",
        "prior_tool_calls": "messages",
        "prompt": "messages",
    }
    for i, tool in enumerate(tools):
        at = f"client_tools[{i}]"
        fields |= {
            at: tool.field,
            f"{at}.name": f"{tool.field}.function.name",
            f"{at}.description": f"{tool.field}.function.description",
            f"{at}.parameters_json_schema": f"{tool.field}.function.parameters",
        }
    return ChatRequest(
        model=model,
        dialogue=dialogue,
        sampling=_sampling(body),
        stream=stream,
        include_usage=include_usage,
        priority=priority,  # type: ignore[arg-type]  # checked against the three names just above
        session_id=session_id,
        tool_choice=choice,
        client_tools=tools,
        max_calls_per_round=calls_per_round,
        fields=fields,
    )


def _check_logit_bias(value: Any) -> None:
    """OpenAI's shape: token ids (as strings) → bias in [-100, 100]. The mesh does not apply it."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise InvalidArgument.field("logit_bias", "an object of token ids to biases")
    for token, bias in value.items():
        if not (token.isascii() and token.isdigit()):
            raise InvalidArgument.field("logit_bias", f"{token[:20]!r} is not a token id")
        if isinstance(bias, bool) or not isinstance(bias, int | float) or not -100 <= bias <= 100:
            raise InvalidArgument.field("logit_bias", f"the bias of token {token} must be a number in [-100, 100]")


def _sampling(body: dict[str, Any]) -> Sampling:
    temperature = _number(body, "temperature", 0.0, 2.0)
    top_p = _number(body, "top_p", 0.0, 1.0)
    if top_p is not None and top_p == 0:
        raise InvalidArgument.field("top_p", "must be greater than 0")
    top_k = _integer(body, "top_k", 0, UINT32_MAX)
    seed = _integer(body, "seed", 0, UINT64_MAX)
    max_tokens = _integer(body, "max_completion_tokens", 1, UINT32_MAX)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", 1, UINT32_MAX)
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and (
        not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and s for s in stop)
    ):
        raise InvalidArgument.field("stop", "a non-empty string or an array of at most 4 of them")
    repetition_penalty = _number(body, "repetition_penalty", -FLOAT32_MAX, FLOAT32_MAX)
    if repetition_penalty is not None and repetition_penalty <= 0:
        raise InvalidArgument.field("repetition_penalty", "must be greater than 0 (1: no penalty)")
    return Sampling(
        temperature,
        top_p,
        top_k,
        max_tokens,
        seed,
        tuple(stop or ()),
        presence_penalty=_number(body, "presence_penalty", -2.0, 2.0),
        frequency_penalty=_number(body, "frequency_penalty", -2.0, 2.0),
        repetition_penalty=repetition_penalty,
    )


def _typed(body: dict[str, Any], name: str, kind: type, default: Any, *, field: str = "") -> Any:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise InvalidArgument.field(field or name, f"must be a {kind.__name__}")
    return value


def _number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument.field(name, "must be a number")
    if not low <= value <= high:  # NaN fails too; an int is compared exactly (float() of a huge one overflows)
        raise InvalidArgument.field(name, f"must be between {low:g} and {high:g}")
    return float(value)


def _integer(body: dict[str, Any], name: str, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument.field(name, f"must be an integer from {low} to {high}")
    return value
