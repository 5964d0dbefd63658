"""``agentmesh chat`` and ``agentmesh complete``: streaming terminal clients of the gateway.

``chat`` keeps one Converse stream (one session) for the whole conversation,
shows each tool call as it starts (→) and finishes (←), and streams the answer;
Ctrl-C during a turn cancels that turn and the chat goes on (late text of the
cancelled turn is dropped by its turn id); Ctrl-C at the prompt or Ctrl-D ends
the chat (``interrupts.py``). A turn that fails prints its status and the chat
goes on. ``chat --once``
runs a single turn for scripts. ``complete`` streams a one-shot answer. The
API key comes from ``--api-key``, then ``AGENTMESH_API_KEY``, then — on
loopback only — the development key that ``agentmesh up`` configures.
Failures print one line: ``agentmesh: error: CODE: message``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import Callable
from typing import Any, TextIO

import grpc
import grpc.aio
from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from services.cli.interrupts import Interrupts, read_line
from services.cli.up import DEV_API_KEY, GATEWAY_PORT
from services.runtime.channel import create_channel
from services.runtime.errors import code_from_number, rich_error_of

PRIORITIES = {"P0": common_pb2.PRIORITY_P0, "P1": common_pb2.PRIORITY_P1, "P2": common_pb2.PRIORITY_P2}
MODES = {
    "auto": agent_pb2.TOOL_CHOICE_MODE_AUTO,
    "none": agent_pb2.TOOL_CHOICE_MODE_NONE,
    "required": agent_pb2.TOOL_CHOICE_MODE_REQUIRED,
}


class CliError(Exception):
    """One line for the user."""


def api_key(args: argparse.Namespace) -> str:
    key = args.api_key or os.environ.get("AGENTMESH_API_KEY", "")
    if not key and args.target.split(":")[0] in ("127.0.0.1", "localhost", "[::1]"):
        key = DEV_API_KEY
    if not key:
        raise CliError("no API key: pass --api-key or set AGENTMESH_API_KEY")
    return key


def tool_choice(value: str) -> agent_pb2.ToolChoice:
    if value in MODES:
        return agent_pb2.ToolChoice(mode=MODES[value])
    return agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NAMED, tool_name=value)


def describe(error: grpc.aio.AioRpcError) -> str:
    rich = rich_error_of(error)
    text = f"{error.code().name}: {rich.message or error.details()}"
    if rich.retry_after_s:
        text += f" (retry in {rich.retry_after_s:.1f}s)"
    return text


def render(event: agent_pb2.ConverseResponse, out: TextIO) -> None:
    kind = event.WhichOneof("event")
    if kind == "tool_call_started":
        e = event.tool_call_started
        out.write(f"  → {e.tool_name} {e.arguments_json}\n")
    elif kind == "tool_call_finished":
        f = event.tool_call_finished
        ms = f.latency.ToNanoseconds() / 1e6
        status = common_pb2.ToolCallStatus.Name(f.status).removeprefix("TOOL_CALL_STATUS_").lower()
        detail = f.output_json if f.output_json else f.error_message
        cached = ", cached" if f.cached else ""
        out.write(f"  ← {f.tool_name} {status} ({ms:.0f} ms{cached}): {detail}\n")
    elif kind == "text_delta":
        out.write(event.text_delta.text)
    elif kind == "turn_completed" and event.turn_completed.status:
        status = status_pb2.Status.FromString(event.turn_completed.status)
        out.write(f"\n  [turn failed: {code_from_number(status.code).name}: {status.message}]\n")
    elif kind == "turn_completed" and event.turn_completed.finish_reason == common_pb2.FINISH_REASON_ABORTED:
        out.write("\n  [cancelled]\n")
    elif kind == "turn_completed":
        done = event.turn_completed
        ttft = done.time_to_first_token.ToNanoseconds() / 1e6
        selection = agent_pb2.ToolSelection.Name(done.tool_selection).removeprefix("TOOL_SELECTION_").lower()
        out.write(
            f"\n  [{done.generations} generations ({selection}); {done.usage.prompt_tokens} prompt + "
            f"{done.usage.completion_tokens} completion tokens, {done.usage.cached_prompt_tokens} cached; "
            f"first token {ttft:.0f} ms]\n"
        )
    elif kind == "draining":
        out.write("\n  [the server is shutting down; reconnect to continue]\n")
    out.flush()


async def run_turn(call: Any, start: agent_pb2.StartTurn, out: TextIO, interrupts: Interrupts | None = None) -> str:
    """Send one turn and render its events until its TurnCompleted; returns the session id.

    With ``interrupts``, Ctrl-C sends CancelTurn for this turn once; its late text is dropped, and the turn
    still ends with its TurnCompleted (ABORTED). A read is never cancelled: in grpc.aio that cancels the call.
    """
    if not start.turn_id:
        start.turn_id = uuid.uuid4().hex
    await call.write(agent_pb2.ConverseRequest(start_turn=start))
    session = ""
    cancelled = False
    with interrupts.turn() if interrupts is not None else contextlib.nullcontext():
        cancel = asyncio.ensure_future(interrupts.cancel.wait()) if interrupts is not None else None
        read = asyncio.ensure_future(call.read())
        try:
            while True:
                waits = {read} if cancel is None or cancelled else {read, cancel}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if cancel is not None and cancel.done() and not cancelled:
                    cancelled = True
                    await call.write(agent_pb2.ConverseRequest(cancel_turn=agent_pb2.CancelTurn(turn_id=start.turn_id)))
                if not read.done():
                    continue
                event = read.result()
                if event is grpc.aio.EOF:
                    raise CliError("the server closed the stream")
                if event.HasField("turn_accepted"):
                    session = event.turn_accepted.session_id
                late = event.HasField("text_delta") and (cancelled or event.text_delta.turn_id != start.turn_id)
                if not late:
                    render(event, out)
                if event.HasField("turn_completed") and event.turn_completed.turn_id == start.turn_id:
                    return session
                read = asyncio.ensure_future(call.read())
        finally:
            if cancel is not None:
                cancel.cancel()


async def chat_loop(
    call: Any,
    start: Callable[[str, str], agent_pb2.StartTurn],
    out: TextIO,
    interrupts: Interrupts,
    *,
    session: str = "",
    prompt: Callable[[str], asyncio.Future[str | None]] = read_line,
) -> None:
    """Turns until Ctrl-D or Ctrl-C at the prompt; Ctrl-C during a turn cancels only that turn."""
    while True:
        line_future = prompt("you> ")
        quit_wait = asyncio.ensure_future(interrupts.quit.wait())
        waits: set[asyncio.Future[Any]] = {line_future, quit_wait}
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        quit_wait.cancel()
        if interrupts.quit.is_set() or line_future.result() is None:
            out.write("\n")
            return
        line = line_future.result() or ""
        if line.strip():
            session = await run_turn(call, start(session, line), out, interrupts) or session


async def chat(args: argparse.Namespace, out: TextIO = sys.stdout) -> None:
    metadata = (("authorization", f"Bearer {api_key(args)}"),)
    async with create_channel(args.target) as channel:
        call: Any = agent_pb2_grpc.AgentServiceStub(channel).Converse(metadata=metadata)

        def start(session: str, message: str) -> agent_pb2.StartTurn:
            return agent_pb2.StartTurn(
                session_id=session,
                message=message,
                tool_choice=tool_choice(args.tool_choice),
                priority=PRIORITIES[args.priority],
            )

        try:
            if args.once is not None:
                await run_turn(call, start(args.session or "", args.once), out)
                await call.done_writing()
                return
            out.write(
                f"agentmesh chat on {args.target} — Ctrl-C cancels a turn, Ctrl-C at the prompt or Ctrl-D quits\n"
            )
            interrupts = Interrupts()
            with interrupts.installed():
                await chat_loop(call, start, out, interrupts, session=args.session or "")
            await call.done_writing()
        except grpc.aio.AioRpcError as exc:
            raise CliError(describe(exc)) from None


async def complete(args: argparse.Namespace, out: TextIO = sys.stdout) -> None:
    metadata = (("authorization", f"Bearer {api_key(args)}"),)
    request = agent_pb2.CompleteRequest(prompt=args.prompt, priority=PRIORITIES[args.priority])
    if args.max_tokens:
        request.sampling.max_tokens = args.max_tokens
    async with create_channel(args.target) as channel:
        try:
            async for message in agent_pb2_grpc.AgentServiceStub(channel).Complete(request, metadata=metadata):
                if message.HasField("text_delta"):
                    out.write(message.text_delta.text)
                    out.flush()
            out.write("\n")
        except grpc.aio.AioRpcError as exc:
            raise CliError(describe(exc)) from None


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default=f"127.0.0.1:{GATEWAY_PORT}", help="gateway address")
    parser.add_argument("--api-key", default="", help="API key (default: $AGENTMESH_API_KEY)")
    parser.add_argument("--priority", choices=sorted(PRIORITIES), default="P1")


def add_chat_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--once", metavar="MESSAGE", help="send one message, print the turn, exit")
    parser.add_argument("--session", default="", help="continue this session")
    parser.add_argument("--tool-choice", default="auto", help="auto, none, required, or a tool name")


def add_complete_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("prompt")
    parser.add_argument("--max-tokens", type=int, default=0)


def run(command: str, args: argparse.Namespace) -> int:
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(chat(args) if command == "chat" else complete(args))
    except CliError as exc:
        print(f"agentmesh: error: {exc}", file=sys.stderr)
        return 1
    return 0
