"""An OpenAI ``/v1/responses`` body, validated into what a Converse turn needs (``ResponseRequest``).

The Responses API is Chat Completions with other spellings, so the checks are the chat edge's, reused:
``input`` items become chat messages (``message`` → its role, ``function_call`` → an assistant message's
``tool_calls``, ``function_call_output`` → a ``tool`` message) read by ``openai_messages.parse_messages``;
flat ``function`` tools become chat tools for ``openai_tools.parse_tools``; sampling goes through the chat
parser's. Errors those name (``messages[3].content``, ``tools[0].function.name``) are renamed to this body's
fields (``input[5].content``, ``tools[0].name``), so a 400 names what the caller sent.

Refused, naming the field: ``background``, ``conversation``, ``prompt``, a ``text.format`` other than text,
tools other than ``function`` and ``mcp``, an ``mcp`` tool with a ``server_url`` (the mesh never connects
where a request says), input parts other than text. ``include``, ``reasoning``, ``user``, ``service_tier``,
``prompt_cache_key``, ``safety_identifier`` and ``top_logprobs`` only tune OpenAI's own models and are ignored.
``max_tool_calls`` n runs as one tool round of at most n calls (StartTurn bounds rounds and calls per round,
not calls per turn). ``truncation`` is echoed: the mesh fits a session's history to the model's window either
way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh_client import Priority, Sampling
from gateway.openai_messages import Dialogue, parse_messages
from gateway.openai_request import AGENT_MODEL, PRIORITY_HEADER, UINT32_MAX, _sampling
from gateway.openai_tools import ClientTool, max_calls_per_round, parse_tool_choice, parse_tools
from services.runtime.errors import FieldViolation, InvalidArgument

#: OpenAI's bounds on ``metadata``.
METADATA_KEYS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512
RESPONSE_ID = re.compile(r"resp_[0-9a-f]{32}")
_IGNORED_TEXT_FORMATS = (None, "text")
_MESSAGE_FIELD = re.compile(r"messages\[(\d+)\](?:\.tool_calls\[(\d+)\])?(.*)")
_PART_TYPES = ("input_text", "output_text", "text", "refusal")


@dataclass(frozen=True)
class McpTool:
    """A ``{"type": "mcp", "server_label": ...}`` tool: a server of the tool executor's config, by name."""

    server_label: str
    field: str
    #: The server's tools to offer, by their own names (``allowed_tools``); None: all of them.
    allowed_tools: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ResponseRequest:
    """One response to create: the body's fields, checked; the dialogue is built once the previous response
    (if any) is known (``dialogue``)."""

    model: str
    input: list[dict[str, Any]]
    instructions: str | None
    tools: tuple[ClientTool, ...]
    mcp_tools: tuple[McpTool, ...]
    tool_choice: str
    max_calls_per_round: int
    max_tool_calls: int | None
    parallel_tool_calls: bool
    sampling: Sampling
    stream: bool
    store: bool
    previous_response_id: str
    metadata: dict[str, str]
    truncation: str
    priority: Priority
    #: What the caller sent for ``tools`` and ``tool_choice``, echoed in the response object.
    tools_echo: list[Any] = field(default_factory=list)
    tool_choice_echo: Any = "auto"

    @property
    def agent(self) -> bool:
        return self.model == AGENT_MODEL

    @property
    def turn_tool_choice(self) -> str:
        """The plain model offers only the request's tools: without client or mcp tools its turn calls none."""
        return self.tool_choice if self.agent or self.tools or self.mcp_tools else "none"

    @property
    def max_tool_rounds(self) -> int:
        return 1 if self.max_tool_calls is not None else 0

    @property
    def calls_per_round(self) -> int:
        if self.max_tool_calls is None:
            return self.max_calls_per_round
        return min(self.max_calls_per_round or self.max_tool_calls, self.max_tool_calls)

    def specs(self) -> list[common_pb2.ToolSpec]:
        return [t.spec() for t in self.tools]

    def dialogue(self, previous: PreviousTurn | None) -> Dialogue:
        """The turn's dialogue: ``input`` alone, or after ``previous`` (its user message and the function calls
        it ended at, which ``function_call_output`` items answer)."""
        messages, where = chat_messages(self.input)
        if self.instructions and previous is None:
            messages.insert(0, {"role": "system", "content": self.instructions})
            where.insert(0, ("instructions", {}))
        if previous is not None and not any(m["role"] == "user" for m in messages):
            if messages and messages[0]["role"] == "tool" and previous.calls:
                calls = [
                    {"id": c, "type": "function", "function": {"name": n, "arguments": a}}
                    for c, (n, a) in previous.calls.items()
                ]
                messages.insert(0, {"role": "assistant", "content": None, "tool_calls": calls})
                where.insert(0, ("previous_response_id", {}))
            messages.insert(0, {"role": "user", "content": previous.user_message})
            where.insert(0, ("previous_response_id", {}))
        names = {t.name for t in self.tools}
        try:
            return parse_messages(messages or None, known_tool=names.__contains__, replay_history=previous is None)
        except InvalidArgument as exc:
            raise _renamed_input(exc, where) from None

    def http_field(self, path: str) -> str:
        """A StartTurn field the mesh named (``start_turn.client_tools[1].name``) as this body's."""
        path = path.removeprefix("start_turn.")
        match = re.match(r"client_tools\[(\d+)\](?:\.(\w+))?", path)
        if match:
            sub = {"parameters_json_schema": "parameters"}.get(match[2] or "", match[2] or "")
            return f"tools[{match[1]}]" + (f".{sub}" if sub else "")
        head = path.partition(".")[0].partition("[")[0]
        return {
            "session_id": "previous_response_id",
            "tool_choice": "tool_choice",
            "max_calls_per_round": "parallel_tool_calls",
            "max_tool_rounds": "max_tool_calls",
            "sampling": "",
            "client_tools": "tools",
            "prior_tool_calls": "input",
            "history": "input",
            "message": "input",
            "system_prompt": "instructions",
        }.get(head, path)

    def renamed(self, violations: tuple[FieldViolation, ...]) -> InvalidArgument:
        fields = [FieldViolation(self.http_field(v.field), v.description) for v in violations]
        return InvalidArgument("; ".join(f"{v.field}: {v.description}" for v in fields), fields)

    def prior_tool_calls(self, dialogue: Dialogue) -> list[agent_pb2.PriorToolCall]:
        return [
            agent_pb2.PriorToolCall(
                call_id=c.call_id, tool_name=c.tool_name, arguments_json=c.arguments_json, output=c.output
            )
            for c in dialogue.prior_calls
        ]


@dataclass(frozen=True)
class PreviousTurn:
    """What a continued response needs of the one it follows: its turn's user message, and the function calls it
    ended at (call id → name, arguments)."""

    user_message: str
    calls: dict[str, tuple[str, str]]


def parse_response_request(body: Any, headers: dict[str, str], *, max_tools: int) -> ResponseRequest:
    """Validate ``body`` (decoded JSON, ``openai_body.py``) and the priority header (names lower-cased)."""
    if not isinstance(body, dict):
        raise InvalidArgument("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidArgument.field("model", "a model name is required")
    for name in ("background", "conversation", "prompt"):
        if body.get(name):
            raise InvalidArgument.field(name, f"{name} is not supported")
    text = body.get("text")
    if text is not None:
        fmt = text.get("format") if isinstance(text, dict) else {}
        if not isinstance(fmt, dict | None) or (fmt or {}).get("type") not in _IGNORED_TEXT_FORMATS:
            raise InvalidArgument.field("text.format", "only the text format is supported")
    items = _input(body.get("input"))
    instructions = _optional_str(body, "instructions")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise InvalidArgument.field("previous_response_id", "a response id (resp_...)")
    chat_tools, mcp_tools = _tools(body.get("tools"))
    try:
        tools = parse_tools(chat_tools, cap=max_tools)
        choice = parse_tool_choice(_chat_tool_choice(body.get("tool_choice")), tools, mesh_tools=model == AGENT_MODEL)
        calls_per_round = max_calls_per_round(body.get("parallel_tool_calls"))
        sampling = _sampling(
            {
                "temperature": body.get("temperature"),
                "top_p": body.get("top_p"),
                "max_completion_tokens": body.get("max_output_tokens"),
            }
        )
    except InvalidArgument as exc:
        raise renamed_chat_fields(exc) from None
    max_tool_calls = body.get("max_tool_calls")
    if max_tool_calls is not None and (
        isinstance(max_tool_calls, bool) or not isinstance(max_tool_calls, int) or not 1 <= max_tool_calls <= UINT32_MAX
    ):
        raise InvalidArgument.field("max_tool_calls", f"must be an integer from 1 to {UINT32_MAX}")
    stream = _flag(body, "stream", False)
    store = _flag(body, "store", True)
    truncation = body.get("truncation") or "disabled"
    if truncation not in ("auto", "disabled"):
        raise InvalidArgument.field("truncation", "auto or disabled")
    priority = headers.get(PRIORITY_HEADER.lower(), "P1").strip().upper()
    if priority not in ("P0", "P1", "P2"):
        raise InvalidArgument.field(PRIORITY_HEADER, "P0, P1 or P2")
    return ResponseRequest(
        model=model,
        input=items,
        instructions=instructions,
        tools=tools,
        mcp_tools=mcp_tools,
        tool_choice=choice,
        max_calls_per_round=calls_per_round,
        max_tool_calls=max_tool_calls,
        parallel_tool_calls=body.get("parallel_tool_calls") is not False,
        sampling=sampling,
        stream=stream,
        store=store,
        previous_response_id=previous or "",
        metadata=_metadata(body.get("metadata")),
        truncation=truncation,
        priority=priority,  # type: ignore[arg-type]  # checked against the three names just above
        tools_echo=list(body.get("tools") or []),
        tool_choice_echo=body.get("tool_choice") or "auto",
    )


def _input(value: Any) -> list[dict[str, Any]]:
    """``input`` as a list of items (a string is one user message)."""
    if isinstance(value, str):
        if not value.strip():
            raise InvalidArgument.field("input", "must not be empty")
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise InvalidArgument.field("input", "a string or a non-empty array of input items")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidArgument.field(f"input[{i}]", "an input item object")
    return list(value)


def chat_messages(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[str, dict[int, str]]]]:
    """Input items as chat messages, and for each message where it came from: the input item's field, and for an
    assistant message's calls, each call's item (``parse_messages`` names calls by their position)."""
    messages: list[dict[str, Any]] = []
    where: list[tuple[str, dict[int, str]]] = []
    for i, item in enumerate(items):
        at = f"input[{i}]"
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise InvalidArgument.field(f"{at}.role", "user, system, developer or assistant")
            messages.append({"role": role, "content": _content(item.get("content"), f"{at}.content")})
            where.append((at, {}))
        elif kind == "function_call":
            call_id, name, arguments = (item.get(k) for k in ("call_id", "name", "arguments"))
            for key, v in (("call_id", call_id), ("name", name), ("arguments", arguments)):
                if not isinstance(v, str) or (key != "arguments" and not v):
                    raise InvalidArgument.field(
                        f"{at}.{key}", "a string" if key == "arguments" else "a non-empty string"
                    )
            call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
                where[-1][1][len(last["tool_calls"]) - 1] = at
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                where.append((at, {0: at}))
        elif kind == "function_call_output":
            output = item.get("output")
            if isinstance(output, list):
                output = _content(output, f"{at}.output")
            if not isinstance(output, str):
                raise InvalidArgument.field(f"{at}.output", "a string")
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": output})
            where.append((at, {}))
        elif kind == "reasoning":
            continue  # another model's reasoning summary: nothing this model reads
        else:
            raise InvalidArgument.field(f"{at}.type", "message, function_call or function_call_output")
    return messages, where


def _content(value: Any, at: str) -> str:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise InvalidArgument.field(at, "a string or an array of text parts")
    texts = []
    for j, part in enumerate(value):
        kind = part.get("type") if isinstance(part, dict) else None
        key = "refusal" if kind == "refusal" else "text"
        if kind not in _PART_TYPES or not isinstance(part.get(key), str):
            raise InvalidArgument.field(f"{at}[{j}]", "only text parts (input_text, output_text) are supported")
        texts.append(part[key])
    return "".join(texts)


def _tools(value: Any) -> tuple[list[dict[str, Any]] | None, tuple[McpTool, ...]]:
    """Flat Responses ``function`` tools as chat tools (same positions, so ``tools[i]`` stays ``tools[i]``),
    and the ``mcp`` tools."""
    if value is None:
        return None, ()
    if not isinstance(value, list):
        raise InvalidArgument.field("tools", "an array of tools")
    chat: list[dict[str, Any]] = []
    mcp: list[McpTool] = []
    for i, tool in enumerate(value):
        at = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise InvalidArgument.field(at, 'an object {"type": "function", "name": ...}')
        if tool.get("type") == "mcp":
            if tool.get("server_url") or tool.get("connector_id"):
                raise InvalidArgument.field(
                    f"{at}.server_url",
                    "the mesh calls only the MCP servers of its own config: name one by server_label",
                )
            label = tool.get("server_label")
            if not isinstance(label, str) or not label:
                raise InvalidArgument.field(f"{at}.server_label", "the name of an MCP server of the mesh's config")
            approval = tool.get("require_approval", "never")
            if approval != "never":
                raise InvalidArgument.field(
                    f"{at}.require_approval",
                    'only "never": the mesh runs its MCP servers\' tools under its own policy and asks no approval',
                )
            allowed = tool.get("allowed_tools")
            if allowed is not None and (
                not isinstance(allowed, list) or not allowed or not all(isinstance(n, str) and n for n in allowed)
            ):
                raise InvalidArgument.field(f"{at}.allowed_tools", "a non-empty array of the server's tool names")
            mcp.append(McpTool(label, at, None if allowed is None else tuple(allowed)))
            continue
        if tool.get("type") != "function":
            raise InvalidArgument.field(f"{at}.type", 'only "function" and "mcp" tools are supported')
        function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
        if function.get("description") is None:
            function.pop("description", None)
        chat.append({"type": "function", "function": function})
    return chat, tuple(mcp)


def _chat_tool_choice(value: Any) -> Any:
    if isinstance(value, dict) and value.get("type") == "function":
        return {"type": "function", "function": {"name": value.get("name")}}
    if isinstance(value, dict):
        raise InvalidArgument.field("tool_choice", 'auto, none, required or {"type": "function", "name": ...}')
    return value


def renamed_chat_fields(exc: InvalidArgument) -> InvalidArgument:
    """A chat parser's field (``tools[2].function.name``, ``max_completion_tokens``) as this body names it."""

    def name(path: str) -> str:
        path = re.sub(r"^tools\[(\d+)\]\.function\b", r"tools[\1]", path)
        path = path.replace("tool_choice.function.name", "tool_choice.name")
        return "max_output_tokens" if path == "max_completion_tokens" else path

    return _rebuilt(exc, name)


def _renamed_input(exc: InvalidArgument, where: list[tuple[str, dict[int, str]]]) -> InvalidArgument:
    """``messages[k]...`` as the input item (or field) message k came from."""

    def name(path: str) -> str:
        match = _MESSAGE_FIELD.fullmatch(path)
        if match is None:
            return "input" if path == "messages" else path
        item, calls = where[int(match[1])] if int(match[1]) < len(where) else ("input", {})
        rest = match[3]
        if match[2] is not None:
            item = calls.get(int(match[2]), item)
            rest = {".id": ".call_id", ".function.name": ".name", ".function.arguments": ".arguments"}.get(rest, rest)
        if rest == ".tool_call_id":
            rest = ".call_id"
        if not item.startswith("input"):
            return item
        return item + rest

    return _rebuilt(exc, name)


def _rebuilt(exc: InvalidArgument, name: Callable[[str], str]) -> InvalidArgument:
    violations = [FieldViolation(name(v.field), v.description) for v in exc.field_violations]
    if not violations:
        return exc
    return InvalidArgument("; ".join(f"{v.field}: {v.description}" for v in violations), violations)


def _optional_str(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidArgument.field(name, "must be a string")
    return value


def _flag(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidArgument.field(name, "must be a boolean")
    return value


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > METADATA_KEYS:
        raise InvalidArgument.field("metadata", f"an object of at most {METADATA_KEYS} string values")
    for key, item in value.items():
        if len(key) > METADATA_KEY_CHARS:
            raise InvalidArgument.field("metadata", f"keys are at most {METADATA_KEY_CHARS} characters")
        if not isinstance(item, str) or len(item) > METADATA_VALUE_CHARS:
            raise InvalidArgument.field(f"metadata.{key}", f"a string of at most {METADATA_VALUE_CHARS} characters")
    return dict(value)
