"""Tools the client runs itself: which tools a turn offers, the checks on them, and the wait for their results.

In: a StartTurn's ``client_tools`` (a ToolSpec with only a name, a description and a JSON Schema), and later
the stream's ``SubmitToolResults``. Out: the turn's ``ToolList`` (the tenant's tools and the client's, or the
client's alone with ``only_client_tools``) for the same planner every tool goes through — a client tool is
planned like any tool that arrives with no examples (an MCP tool) — and, per planned client call, the
``ToolResult`` the client sent, so the round, the record and the answer treat it like a server tool's.

``ClientCalls`` is the turn's mailbox: the round registers the calls it hands out, the Converse stream
delivers results into it as they arrive (several messages may each carry some), and each call's wait ends
with its result, or as TIMEOUT when the wait runs out (the turn then answers, like after a tool that timed
out). A result naming a call the turn does not wait for, while it waits, ends the turn with INVALID_ARGUMENT
naming the result; results that arrive when nothing waits (late, after a timeout) are dropped.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import re
import time
from collections.abc import Sequence

import jsonschema

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.router.tools.lists import ToolList
from services.runtime.deadline import Deadline
from services.runtime.errors import FieldViolation, InvalidArgument
from services.runtime.protoutil import duration

log = logging.getLogger(__name__)

#: OpenAI's rule for function names, which every framework follows.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_DESCRIPTION_CHARS = 4096
MAX_SCHEMA_CHARS = 65536
MAX_CALLS_PER_ROUND = 64
#: ToolSpec fields a client tool leaves unset (policy is the executor's, for the mesh's own tools).
SERVER_ONLY = (
    "version",
    "timeout",
    "idempotent",
    "cache_ttl",
    "max_concurrency",
    "max_attempts",
    "examples",
    "negative_examples",
)


def check_client_tools(start: agent_pb2.StartTurn, mesh_names: set[str], cap: int) -> list[FieldViolation]:
    """What is wrong with ``start``'s client tools and the fields that go with them (``start_turn.…`` paths)."""
    bad: list[FieldViolation] = []
    tools = start.client_tools
    if len(tools) > cap:
        bad.append(FieldViolation("start_turn.client_tools", f"at most {cap} client tools"))
        return bad
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        at = f"start_turn.client_tools[{i}]"
        if not TOOL_NAME.fullmatch(tool.name):
            bad.append(FieldViolation(f"{at}.name", "1-64 letters, digits, '_' or '-'"))
        elif tool.name in seen:
            bad.append(FieldViolation(f"{at}.name", f"duplicate tool name {tool.name!r}"))
        elif tool.name in mesh_names and not start.only_client_tools:
            bad.append(FieldViolation(f"{at}.name", f"{tool.name!r} is one of the mesh's tools; rename it"))
        seen.add(tool.name)
        if len(tool.description) > MAX_DESCRIPTION_CHARS:
            bad.append(FieldViolation(f"{at}.description", f"at most {MAX_DESCRIPTION_CHARS} characters"))
        bad += _check_schema(tool.parameters_json_schema, f"{at}.parameters_json_schema")
        set_fields = {field.name for field, _ in tool.ListFields()}
        for name in SERVER_ONLY:
            if name in set_fields:
                bad.append(FieldViolation(f"{at}.{name}", "must be unset on a client tool"))
    if start.only_client_tools and not tools:
        bad.append(FieldViolation("start_turn.only_client_tools", "needs client_tools"))
    if start.end_at_client_calls and not tools:
        bad.append(FieldViolation("start_turn.end_at_client_calls", "needs client_tools"))
    if start.history and start.session_id:
        bad.append(FieldViolation("start_turn.history", "only for a new session (the session keeps its own)"))
    for i, past in enumerate(start.history):
        if not past.user_message.strip():
            bad.append(FieldViolation(f"start_turn.history[{i}].user_message", "must not be empty"))
    call_ids: set[str] = set()
    for i, prior in enumerate(start.prior_tool_calls):
        at = f"start_turn.prior_tool_calls[{i}]"
        if prior.tool_name not in seen:
            bad.append(FieldViolation(f"{at}.tool_name", "must name one of client_tools"))
        if not prior.call_id or prior.call_id in call_ids:
            bad.append(FieldViolation(f"{at}.call_id", "must be set and unique"))
        call_ids.add(prior.call_id)
        if not _is_object(prior.arguments_json):
            bad.append(FieldViolation(f"{at}.arguments_json", "must be a JSON object"))
    allowed: set[str] = set()
    for i, name in enumerate(start.allowed_mesh_tools):
        at = f"start_turn.allowed_mesh_tools[{i}]"
        if start.only_client_tools:
            bad.append(FieldViolation(at, "cannot go with only_client_tools"))
            break
        if name not in mesh_names:
            bad.append(FieldViolation(at, f"{name[:64]!r} is not among the mesh's tools this tenant may use"))
        elif name in allowed:
            bad.append(FieldViolation(at, f"{name!r} is named twice"))
        allowed.add(name)
    if start.max_calls_per_round > MAX_CALLS_PER_ROUND:
        bad.append(FieldViolation("start_turn.max_calls_per_round", f"must be at most {MAX_CALLS_PER_ROUND}"))
    return bad


def _check_schema(text: str, field: str) -> list[FieldViolation]:
    if len(text) > MAX_SCHEMA_CHARS:
        return [FieldViolation(field, f"at most {MAX_SCHEMA_CHARS} characters")]
    problem = _schema_problem(text)
    return [FieldViolation(field, problem)] if problem else []


@functools.lru_cache(maxsize=4096)
def _schema_problem(text: str) -> str:
    """What is wrong with one schema text ("" if nothing); remembered: a framework sends the same tools every
    turn, and the meta-schema check costs milliseconds per schema."""
    try:
        schema = json.loads(text or "{}")
    except (json.JSONDecodeError, RecursionError) as exc:
        return f"not JSON: {exc}"
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return 'must be a JSON Schema object with "type": "object"'
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"not a valid JSON Schema: {exc.message}"
    except RecursionError:
        return "nested too deeply"
    return ""


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text or "{}"), dict)
    except (json.JSONDecodeError, RecursionError):
        return False


def client_specs(start: agent_pb2.StartTurn) -> list[common_pb2.ToolSpec]:
    """The client tools as the planner takes them: an empty schema is an object with no arguments."""
    specs = []
    for tool in start.client_tools:
        spec = common_pb2.ToolSpec(name=tool.name, description=tool.description)
        spec.parameters_json_schema = tool.parameters_json_schema or '{"type": "object", "properties": {}}'
        specs.append(spec)
    return specs


def turn_tools(mesh: ToolList, start: agent_pb2.StartTurn) -> ToolList:
    """The tools a turn offers: the mesh's (those of ``allowed_mesh_tools`` if it names any; none with
    ``only_client_tools``) and the client's, one revision per set."""
    if start.allowed_mesh_tools:
        allowed = set(start.allowed_mesh_tools)
        digest = hashlib.sha256("\n".join(sorted(allowed)).encode()).hexdigest()[:16]
        mesh = ToolList([s for s in mesh.specs if s.name in allowed], f"{mesh.revision}|only:{digest}")
    if not start.client_tools:
        return mesh
    specs = client_specs(start)
    digest = hashlib.sha256(b"".join(s.SerializeToString(deterministic=True) for s in specs)).hexdigest()[:16]
    if start.only_client_tools:
        return ToolList(specs, f"client:{digest}")
    return ToolList([*mesh.specs, *specs], f"{mesh.revision}+client:{digest}")


def prior_results(start: agent_pb2.StartTurn) -> list[tools_pb2.ToolResult]:
    """The client calls already made for this message, as results the answer reads."""
    return [
        tools_pb2.ToolResult(
            call_id=p.call_id,
            tool_name=p.tool_name,
            status=common_pb2.TOOL_CALL_STATUS_FAILED if p.error_message else common_pb2.TOOL_CALL_STATUS_OK,
            output_json=p.output,
            error_message=p.error_message,
        )
        for p in start.prior_tool_calls
    ]


class ClientCalls:
    """One turn's mailbox for client tool results (see module docstring)."""

    def __init__(self, turn_id: str, wait_s: float) -> None:
        self.turn_id = turn_id
        self.wait_s = wait_s
        self._waiting: dict[str, asyncio.Future[agent_pb2.ClientToolResult]] = {}
        self._waits: dict[str, float] = {}

    def handed_out(self, round_no: int, calls: Sequence[tools_pb2.ToolCall]) -> agent_pb2.ConverseResponse:
        """Register ``calls`` as waited for; the event that hands them to the client."""
        loop = asyncio.get_running_loop()
        wait = Deadline.current().timeout(cap=self.wait_s) or self.wait_s
        for call in calls:
            future: asyncio.Future[agent_pb2.ClientToolResult] = loop.create_future()
            future.add_done_callback(lambda f: f.cancelled() or f.exception())  # a failed wait may have no reader
            self._waiting[call.call_id] = future
            self._waits[call.call_id] = wait
        handed = agent_pb2.ClientToolCalls(turn_id=self.turn_id, round=round_no, wait=duration(wait))
        for call in calls:
            handed.calls.add(call_id=call.call_id, tool_name=call.tool_name, arguments_json=call.arguments_json)
        return agent_pb2.ConverseResponse(client_tool_calls=handed)

    def deliver(self, request: agent_pb2.SubmitToolResults) -> None:
        """Results from the stream: each ends its call's wait; an unknown call id, while calls wait, fails them."""
        pending = {k: f for k, f in self._waiting.items() if not f.done()}
        if not pending:
            log.info(
                "turn %s: %d client results arrived with no call waiting; dropped", self.turn_id, len(request.results)
            )
            return
        for i, result in enumerate(request.results):
            if result.call_id not in pending:
                error = InvalidArgument.field(
                    f"tool_results.results[{i}].call_id",
                    f"the turn waits for no call {result.call_id!r}; it waits for {sorted(pending)}",
                )
                for future in pending.values():
                    if not future.done():
                        future.set_exception(error)
                return
        for result in request.results:
            future = pending[result.call_id]
            if not future.done():
                future.set_result(result)

    async def result(self, call: tools_pb2.ToolCall) -> tools_pb2.ToolResult:
        """``call``'s result once the client sends it, or TIMEOUT after the wait."""
        began = time.perf_counter()
        future, wait = self._waiting[call.call_id], self._waits[call.call_id]
        out = tools_pb2.ToolResult(call_id=call.call_id, tool_name=call.tool_name)
        try:
            sent = await asyncio.wait_for(asyncio.shield(future), wait)
        except TimeoutError:
            out.status = common_pb2.TOOL_CALL_STATUS_TIMEOUT
            out.error_message = f"the client sent no result within {wait:.3g}s"
        else:
            failed = bool(sent.error_message)
            out.status = common_pb2.TOOL_CALL_STATUS_FAILED if failed else common_pb2.TOOL_CALL_STATUS_OK
            out.output_json, out.error_message = sent.output, sent.error_message
        finally:
            self._waiting.pop(call.call_id, None)
            self._waits.pop(call.call_id, None)
        out.latency.CopyFrom(duration(time.perf_counter() - began))
        return out
