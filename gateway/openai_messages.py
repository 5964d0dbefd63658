"""OpenAI ``messages`` → what a turn is told: system prompt, earlier turns, the new message, tool results.

In: the ``messages`` array (roles system/developer, user, assistant — with ``tool_calls`` or without —
and tool). Out: ``Dialogue``:

- ``system_prompt``: every system and developer message, in order.
- ``message``: the last user message (with the user messages right before it, if several follow each other).
- ``prior_calls``: the assistant ``tool_calls`` after that message, each with the ``tool`` message that
  answered it — the second request of an OpenAI tool loop, which the turn answers from.
- ``history``: the earlier turns as (user, answer) pairs, an answer being the assistant text of its turn
  (earlier tool calls are not replayed: their answer says what came of them).

Refused, naming the field: a ``tool`` message whose ``tool_call_id`` matches no call of the assistant
message before it (or answers one twice), a call that no tool message answers, a call whose arguments are
not a JSON object, an assistant message before any user message, a conversation that does not end with
the user or a tool result. ``fields`` maps the gRPC paths the mesh may name in its own errors
(``history[1]``, ``prior_tool_calls[0].arguments_json``) back to the message they came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.openai_body import check_value
from services.runtime.errors import InvalidArgument

ROLES = ("system", "developer", "user", "assistant", "tool")


@dataclass(frozen=True)
class PriorCall:
    """A client tool call made for the new message, and what its tool message said."""

    call_id: str
    tool_name: str
    arguments_json: str
    output: str


@dataclass(frozen=True)
class Dialogue:
    """What a request's messages say (see the module docstring)."""

    system_prompt: str
    message: str
    history: tuple[tuple[str, str], ...] = ()
    prior_calls: tuple[PriorCall, ...] = ()
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class _Call:
    index: int  # of the assistant message
    position: int  # in its tool_calls
    call_id: str
    name: str
    arguments: str
    answered_by: int = -1


def parse_messages(messages: Any, *, known_tool: Callable[[str], bool], replay_history: bool) -> Dialogue:
    """The ``Dialogue`` of ``messages``; ``known_tool`` says whether a call may be answered by this request
    (it names one of its tools), ``replay_history`` whether earlier turns are wanted (not in a session)."""
    if not isinstance(messages, list) or not messages:
        raise InvalidArgument.field("messages", "a non-empty array of messages is required")
    return _Reader(messages).dialogue(known_tool, replay_history)


class _Reader:
    """One pass over the messages (texts, calls, their answers), then the parts of the dialogue."""

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages
        self.system: list[str] = []
        self.texts: dict[int, str] = {}  # message index → its text (user, assistant and tool messages)
        self.calls: dict[int, list[_Call]] = {}  # assistant message index → its calls
        self.fields: dict[str, str] = {"message": "messages", "system_prompt": "messages"}
        open_calls: dict[str, _Call] = {}  # the calls of the last assistant message with calls, by id
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in ROLES:
                raise InvalidArgument.field(f"messages[{i}].role", f"one of {', '.join(ROLES)}")
            role = m["role"]
            if role in ("system", "developer"):
                self.system.append(_text(m.get("content"), f"messages[{i}].content"))
                continue
            if role != "tool":
                _all_answered(open_calls)
                open_calls = {}
            if role == "assistant":
                self.calls[i] = _calls(m.get("tool_calls"), i)
                content = m.get("content")
                if content is None and not self.calls[i]:
                    raise InvalidArgument.field(f"messages[{i}].content", "required unless the message has tool_calls")
                self.texts[i] = "" if content is None else _text(content, f"messages[{i}].content", refusals=True)
                open_calls = {c.call_id: c for c in self.calls[i]}
            else:
                self.texts[i] = _text(m.get("content"), f"messages[{i}].content")
                if role == "tool":
                    _answer(open_calls, m.get("tool_call_id"), i)
        _all_answered(open_calls)
        #: Indices of the messages other than system and developer ones.
        self.turns = list(self.texts)

    def role(self, i: int) -> str:
        return str(self.messages[i]["role"])

    def dialogue(self, known_tool: Callable[[str], bool], replay_history: bool) -> Dialogue:
        turns = self.turns
        users = [i for i in turns if self.role(i) == "user"]
        if not users:
            raise InvalidArgument.field("messages", "a user message is required")
        if self.role(turns[-1]) not in ("user", "tool"):
            raise InvalidArgument.field(
                f"messages[{turns[-1]}].role", "the last message must be the user's or a tool's"
            )
        if self.role(turns[0]) != "user":
            raise InvalidArgument.field(f"messages[{turns[0]}].role", "the conversation must begin with the user")
        # The new message: the run of user messages that ends at the last one.
        end = turns.index(users[-1])
        first = end
        while first > 0 and self.role(turns[first - 1]) == "user":
            first -= 1
        message = self.joined(turns[first : end + 1])
        if not message.strip():
            raise InvalidArgument.field(f"messages[{users[-1]}].content", "must not be empty")
        prior = self.prior_calls(turns[end + 1 :], known_tool)
        history = self.history(turns[:first]) if replay_history else ()
        return Dialogue("\n\n".join(self.system), message, history, prior, self.fields)

    def prior_calls(self, after: list[int], known: Callable[[str], bool]) -> tuple[PriorCall, ...]:
        """The calls after the new message, in order, with their answers."""
        out: list[PriorCall] = []
        ids: set[str] = set()
        for i in after:
            if self.role(i) == "tool":
                continue
            if not self.calls[i]:
                raise InvalidArgument.field(
                    f"messages[{i}]", "after the last user message only tool calls and their results may come"
                )
            for call in self.calls[i]:
                at = f"messages[{i}].tool_calls[{call.position}]"
                if not known(call.name):
                    raise InvalidArgument.field(
                        f"{at}.function.name", f"{call.name!r} is not among the request's tools"
                    )
                if call.call_id in ids:
                    raise InvalidArgument.field(f"{at}.id", f"call id {call.call_id!r} is used twice")
                ids.add(call.call_id)
                k = f"prior_tool_calls[{len(out)}]"
                out.append(PriorCall(call.call_id, call.name, call.arguments, self.texts[call.answered_by]))
                self.fields |= {
                    k: at,
                    f"{k}.call_id": f"{at}.id",
                    f"{k}.tool_name": f"{at}.function.name",
                    f"{k}.arguments_json": f"{at}.function.arguments",
                    f"{k}.output": f"messages[{call.answered_by}].content",
                }
        return tuple(out)

    def history(self, before: list[int]) -> tuple[tuple[str, str], ...]:
        """Earlier turns: each run of user messages, and the assistant text up to the next user message."""
        turns: list[tuple[list[int], list[int]]] = []
        for i in before:
            if self.role(i) == "user":
                if not turns or turns[-1][1]:
                    turns.append(([], []))
                turns[-1][0].append(i)
            elif self.role(i) == "assistant" and self.texts[i]:
                turns[-1][1].append(i)
        out = []
        for k, (users, answers) in enumerate(turns):
            user = self.joined(users)
            if not user.strip():
                raise InvalidArgument.field(f"messages[{users[-1]}].content", "must not be empty")
            self.fields |= {
                f"history[{k}]": f"messages[{users[0]}]",
                f"history[{k}].user_message": f"messages[{users[-1]}].content",
                f"history[{k}].answer": f"messages[{answers[-1]}].content" if answers else f"messages[{users[-1]}]",
            }
            out.append((user, self.joined(answers)))
        return tuple(out)

    def joined(self, indices: list[int]) -> str:
        return "\n\n".join(self.texts[i] for i in indices if self.texts[i])


def _calls(value: Any, i: int) -> list[_Call]:
    if value is None or value == []:
        return []
    if not isinstance(value, list):
        raise InvalidArgument.field(f"messages[{i}].tool_calls", "an array of tool calls")
    out: list[_Call] = []
    for j, call in enumerate(value):
        at = f"messages[{i}].tool_calls[{j}]"
        if not isinstance(call, dict):
            raise InvalidArgument.field(at, 'an object {"id", "type": "function", "function": {"name", "arguments"}}')
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidArgument.field(f"{at}.id", "a non-empty string")
        if call.get("type", "function") != "function":
            raise InvalidArgument.field(f"{at}.type", 'only "function" calls are supported')
        function = call.get("function")
        if not isinstance(function, dict):
            raise InvalidArgument.field(f"{at}.function", "an object with the function's name and arguments")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidArgument.field(f"{at}.function.name", "a non-empty string")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            raise InvalidArgument.field(f"{at}.function.arguments", "a string of JSON")
        out.append(_Call(i, j, call_id, name, _arguments(arguments or "{}", f"{at}.function.arguments")))
    return out


def _arguments(text: str, where: str) -> str:
    """``text`` if it is a JSON object the mesh can carry (the body's rules apply inside the string too)."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise InvalidArgument.field(where, "must be a JSON object") from None
    if not isinstance(value, dict):
        raise InvalidArgument.field(where, "must be a JSON object")
    try:
        check_value(value)
    except InvalidArgument as exc:
        raise InvalidArgument.field(where, exc.message) from None
    return text


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _answer(open_calls: dict[str, _Call], call_id: Any, i: int) -> None:
    where = f"messages[{i}].tool_call_id"
    if not isinstance(call_id, str):
        raise InvalidArgument.field(where, "the id of the call this message answers is required")
    call = open_calls.get(call_id)
    if call is None:
        raise InvalidArgument.field(where, f"{call_id!r} matches no call in the preceding assistant message")
    if call.answered_by >= 0:
        raise InvalidArgument.field(where, f"{call_id!r} is answered already by messages[{call.answered_by}]")
    call.answered_by = i


def _all_answered(open_calls: dict[str, _Call]) -> None:
    for call in open_calls.values():
        if call.answered_by < 0:
            at = f"messages[{call.index}].tool_calls[{call.position}]"
            raise InvalidArgument.field(at, f"no tool message answers call {call.call_id!r}")


def _text(content: Any, field: str, *, refusals: bool = False) -> str:
    """A message's text: a string, or an array of text parts (other parts are refused)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            key = "refusal" if refusals and kind == "refusal" else "text"
            if kind != key or not isinstance(part.get(key), str):
                raise InvalidArgument.field(f"{field}[{j}]", "only text parts are supported")
            parts.append(part[key])
        return "".join(parts)
    raise InvalidArgument.field(field, "a string or an array of text parts")
