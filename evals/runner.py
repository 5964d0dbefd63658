"""Running cases through a mesh: one Converse stream per case, one turn at a time, every mode in turn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc
import grpc.aio

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from evals.cases import Case
from evals.catalog import recorded_output
from evals.records import ToolCall, TurnRecord
from evals.scoring import score_turn
from evals.summary import Report

DEFAULT_TURN_TIMEOUT_S = 120.0
#: The router takes the tenant from this header (the gateway sets it after auth); the eval's sessions
#: live under their own tenant, so they can be told apart and deleted.
TENANT_HEADER = "x-agentmesh-tenant"
EVAL_TENANT = "agentmesh-eval"

# -------------------------------------------------------------------------------------------- running


class _StreamEnded(Exception):
    """The server closed the Converse stream before the turn completed."""


def selection_name(value: agent_pb2.ToolSelection.ValueType) -> str:
    """TOOL_SELECTION_EMBEDDING → "embedding" (a number this build does not know stays readable)."""
    try:
        return agent_pb2.ToolSelection.Name(value).removeprefix("TOOL_SELECTION_").lower()
    except ValueError:
        return f"value {value}"


# The stub and call stay Any: tests/unit/test_eval_scoring.py drives run_eval with a fake stub and call.
async def _run_turn(
    call: Any,
    record: TurnRecord,
    session_id: str,
    sampling: common_pb2.SamplingParams | None = None,
    client_tools: Sequence[common_pb2.ToolSpec] = (),
) -> None:
    start = agent_pb2.StartTurn(
        session_id=session_id, message=record.message, sampling=sampling, client_tools=client_tools
    )
    sent = time.perf_counter()
    await call.write(agent_pb2.ConverseRequest(start_turn=start))
    by_id: dict[str, ToolCall] = {}
    while True:
        event = await call.read()
        if event is grpc.aio.EOF:
            raise _StreamEnded("the stream ended before TurnCompleted")
        kind = event.WhichOneof("event")
        if kind == "turn_accepted":
            record.session_id = event.turn_accepted.session_id
        elif kind == "text_delta" and event.text_delta.text:
            if record.ttft_client_s is None:
                record.ttft_client_s = time.perf_counter() - sent
            record.answer += event.text_delta.text
        elif kind == "tool_call_started":
            started = event.tool_call_started
            by_id[started.call_id] = ToolCall(started.call_id, started.tool_name, started.arguments_json)
            record.calls.append(by_id[started.call_id])
        elif kind == "client_tool_calls":  # run by this client, answered as the mesh's recorder answers
            handed = event.client_tool_calls
            results = agent_pb2.SubmitToolResults(turn_id=handed.turn_id)
            for c in handed.calls:
                output = json.dumps(recorded_output(c.tool_name, json.loads(c.arguments_json or "{}")))
                results.results.add(call_id=c.call_id, output=output)
            await call.write(agent_pb2.ConverseRequest(tool_results=results))
        elif kind == "tool_call_finished":
            finished = event.tool_call_finished
            tool_call = by_id.get(finished.call_id)
            if tool_call is None:  # a finish without a start is still a call the turn made
                tool_call = ToolCall(finished.call_id, finished.tool_name, "")
                record.calls.append(tool_call)
            tool_call.status = common_pb2.ToolCallStatus.Name(finished.status).removeprefix("TOOL_CALL_STATUS_")
            tool_call.output_json = finished.output_json
            tool_call.error_message = finished.error_message
        elif kind == "turn_completed":
            completed = event.turn_completed
            record.latency_s = time.perf_counter() - sent
            record.generations = completed.generations
            record.tool_selection = selection_name(completed.tool_selection)
            record.cached = completed.cached
            record.planning_s = completed.timings.planning.ToNanoseconds() / 1e9
            if record.answer:
                record.ttft_server_s = completed.time_to_first_token.ToNanoseconds() / 1e9
            return


async def run_case(
    stub: Any,
    case: Case,
    mode: str,
    *,
    turn_timeout_s: float = DEFAULT_TURN_TIMEOUT_S,
    sampling: common_pb2.SamplingParams | None = None,
    client_tools: Sequence[common_pb2.ToolSpec] = (),
) -> list[TurnRecord]:
    """Every turn of ``case`` on one Converse stream, in one session (the id TurnAccepted gave); ``sampling``
    for every answer (None: the router's defaults); ``client_tools`` brought by every turn and run here."""
    records = [TurnRecord(case.id, case.category, case.split, mode, i, turn) for i, turn in enumerate(case.turns, 1)]
    call: Any = stub.Converse(metadata=((TENANT_HEADER, EVAL_TENANT),))
    session_id = ""
    try:
        for record in records:
            try:
                async with asyncio.timeout(turn_timeout_s):
                    await _run_turn(call, record, session_id, sampling, client_tools)
            except TimeoutError:
                record.error = f"no TurnCompleted within {turn_timeout_s:g} s"
            except grpc.aio.AioRpcError as exc:
                record.error = f"{exc.code().name}: {exc.details()}"
            except _StreamEnded as exc:
                record.error = str(exc)
            if record.error:  # the stream is unusable and the session incomplete: later turns cannot run
                for later in records[record.turn_index :]:
                    later.error = "not run: an earlier turn of the session failed"
                break
            session_id = record.session_id
        else:
            await call.done_writing()
            with contextlib.suppress(TimeoutError, grpc.aio.AioRpcError):
                await asyncio.wait_for(call.code(), 10)
    finally:
        call.cancel()
    return records


async def run_eval(
    cases: Sequence[Case],
    stubs: Mapping[str, Any],
    *,
    turn_timeout_s: float = DEFAULT_TURN_TIMEOUT_S,
    progress: Callable[[str], None] | None = None,
    sampling: common_pb2.SamplingParams | None = None,
    client_tools: Sequence[common_pb2.ToolSpec] = (),
) -> Report:
    """Run every case under every mode, one at a time, interleaved per case (``sampling``: every answer's).

    Case 1 runs under the first mode then the second, case 2 the other way
    round, and so on: warm-up, background load and thermal drift hit every
    mode alike. Each case gets a fresh session per mode.
    """
    modes = tuple(stubs)
    records: list[TurnRecord] = []
    total = sum(len(c.turns) for c in cases) * len(modes)
    for i, case in enumerate(cases):
        for mode in modes if i % 2 == 0 else modes[::-1]:
            ran = await run_case(
                stubs[mode], case, mode, turn_timeout_s=turn_timeout_s, sampling=sampling, client_tools=client_tools
            )
            for record in ran:
                records.append(record)
                if progress is not None:
                    progress(f"[{len(records):>{len(str(total))}}/{total}] {progress_line(record)}")
    splits = tuple(dict.fromkeys(c.split for c in cases))
    return Report(modes, splits, dict(Counter(c.split for c in cases)), records)


def progress_line(record: TurnRecord) -> str:
    """One line per turn, free of the message and the answer (held-out prompts stay unseen)."""
    score = score_turn(record)
    mark = {True: "ok", False: "FAIL", None: "-"}
    args_ok = None if not score.args else all(p is None for _, p in score.args)
    latency = "-" if record.latency_s is None else f"{record.latency_s:.1f}s"
    line = (
        f"{record.case_id}#{record.turn_index} {record.mode}: tools={','.join(sorted(record.tools_called)) or '-'}"
        f" choice={mark[score.tool_ok]} args={mark[args_ok]} answer={mark[score.answer_ok]}"
        f" selection={record.tool_selection} generations={record.generations} {latency}"
    )
    return line + (f" error={record.error}" if record.error else "")
