"""``agentmesh chat`` and ``agentmesh complete``: streaming terminal clients of the gateway.

``chat`` keeps one Converse stream (one session) for the whole conversation,
shows each tool call as it starts (→) and finishes (←), and streams the answer;
Ctrl-C during a turn cancels that turn and the chat goes on (late text of the
cancelled turn is dropped by its turn id); Ctrl-C at the prompt or Ctrl-D ends
the chat (``interrupts.py``). A turn that fails prints its status and the chat
goes on. ``chat --once`` runs a single turn for scripts and exits 1 if it
failed. The session id goes to stderr, as one line ``agentmesh: session ID``
(after the ``--once`` turn, or when the chat ends), so stdout carries only the
turn and a script can still capture the id; ``--session ID`` continues that
session, and ``--new-session ID`` starts one under an id the caller chose
(ALREADY_EXISTS if the tenant has it). ``complete`` streams a one-shot answer.
Both speak through the typed client (``agentmesh_client``), so a turn or
completion refused by the rate limit or shed is retried after the server's
pushback (at most 3 tries, 10 s of waiting) before it is reported. The
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
from collections.abc import Callable
from typing import Any, TextIO

from agentmesh_client import (
    AgentClient,
    Draining,
    Sampling,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    Turn,
    TurnCompleted,
    TurnEvent,
    TurnStarted,
)
from agentmesh_client.options import PRIORITIES
from services.cli.interrupts import Interrupts, read_line
from services.cli.up import DEV_API_KEY, GATEWAY_PORT
from services.runtime.errors import AgentMeshError


class CliError(Exception):
    """One line for the user."""


def api_key(args: argparse.Namespace) -> str:
    key = args.api_key or os.environ.get("AGENTMESH_API_KEY", "")
    if not key and args.target.split(":")[0] in ("127.0.0.1", "localhost", "[::1]"):
        key = DEV_API_KEY
    if not key:
        raise CliError("no API key: pass --api-key or set AGENTMESH_API_KEY")
    return key


def describe(error: AgentMeshError) -> str:
    text = f"{error.metadata.get('grpc_code', error.code.name)}: {error.message}"
    if error.retry_after_s:
        text += f" (retry in {error.retry_after_s:.1f}s)"
    return text


def render(event: TurnEvent, out: TextIO) -> None:
    if isinstance(event, ToolCallStarted):
        out.write(f"  → {event.tool_name} {event.arguments_json}\n")
    elif isinstance(event, ToolCallProgress):
        of = f"/{event.total:g}" if event.total is not None else ""
        out.write(f"  … {event.tool_name} {event.progress:g}{of}{': ' + event.message if event.message else ''}\n")
    elif isinstance(event, ToolCallFinished):
        detail = event.output_json if event.output_json else event.error_message
        cached = ", cached" if event.cached else ""
        out.write(f"  ← {event.tool_name} {event.status} ({event.latency_s * 1000:.0f} ms{cached}): {detail}\n")
    elif isinstance(event, TextDelta):
        out.write(event.text)
    elif isinstance(event, TurnCompleted) and event.error is not None and event.finish_reason != "aborted":
        out.write(f"\n  [turn failed: {describe(event.error)}]\n")
    elif isinstance(event, TurnCompleted) and event.finish_reason == "aborted":
        out.write("\n  [timed out]\n" if event.error is not None else "\n  [cancelled]\n")
    elif isinstance(event, TurnCompleted):
        ttft = (event.ttft_s or 0.0) * 1000
        out.write(
            f"\n  [{event.generations} generations ({event.tool_selection}); {event.usage.prompt_tokens} prompt + "
            f"{event.usage.completion_tokens} completion tokens, {event.usage.cached_prompt_tokens} cached; "
            f"first token {ttft:.0f} ms]\n"
        )
    elif isinstance(event, Draining):
        out.write("\n  [the server is shutting down; reconnect to continue]\n")
    out.flush()


async def run_turn(turn: Turn, out: TextIO, interrupts: Interrupts | None = None) -> str:
    """Render one turn's events until its TurnCompleted; returns the session id.

    With ``interrupts``, Ctrl-C cancels this turn once (``Turn.cancel``: the client drops its late text, and
    the turn still ends with its TurnCompleted, ABORTED); the chat goes on.
    """
    session = ""
    with interrupts.turn() if interrupts is not None else contextlib.nullcontext():
        watcher = asyncio.ensure_future(_cancel_on_interrupt(interrupts, turn)) if interrupts is not None else None
        try:
            async for event in turn:
                if isinstance(event, TurnStarted):
                    session = event.session_id
                render(event, out)
        finally:
            if watcher is not None:
                watcher.cancel()
    return session


async def _cancel_on_interrupt(interrupts: Interrupts, turn: Turn) -> None:
    await interrupts.cancel.wait()
    await turn.cancel()


async def chat_loop(
    new_turn: Callable[[str], Turn],
    out: TextIO,
    interrupts: Interrupts,
    *,
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
            await run_turn(new_turn(line), out, interrupts)


async def chat(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
    """Raises CliError when the stream fails, or when the ``--once`` turn failed (its status is on ``out``)."""
    session_id, create = (args.new_session, True) if args.new_session else (args.session, False)
    async with AgentClient.connect(args.target, api_key=api_key(args)) as client:
        conversation = client.conversation(session_id, create=create)
        try:
            async with conversation:

                def new_turn(message: str) -> Turn:
                    return client.turn(conversation, message, tools=args.tool_choice, priority=args.priority)

                if args.once is not None:
                    turn = new_turn(args.once)
                    await run_turn(turn, out)
                    done = turn.completed
                    if done is not None and done.error is not None and done.finish_reason != "aborted":
                        raise CliError(describe(done.error))
                    return
                out.write(
                    f"agentmesh chat on {args.target} — Ctrl-C cancels a turn, Ctrl-C at the prompt or Ctrl-D quits\n"
                )
                interrupts = Interrupts()
                with interrupts.installed():
                    await chat_loop(new_turn, out, interrupts)
        except AgentMeshError as exc:
            raise CliError(describe(exc)) from None
        finally:
            if conversation.accepted:
                err.write(f"agentmesh: session {conversation.session_id}\n")
                err.flush()


async def complete(args: argparse.Namespace, out: TextIO = sys.stdout) -> None:
    sampling = Sampling(max_tokens=args.max_tokens or None)
    async with AgentClient.connect(args.target, api_key=api_key(args)) as client:
        try:
            async for event in client.complete(args.prompt, sampling=sampling, priority=args.priority):
                if isinstance(event, TextDelta):
                    out.write(event.text)
                    out.flush()
            out.write("\n")
        except AgentMeshError as exc:
            raise CliError(describe(exc)) from None


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default=f"127.0.0.1:{GATEWAY_PORT}", help="gateway address")
    parser.add_argument("--api-key", default="", help="API key (default: $AGENTMESH_API_KEY)")
    parser.add_argument("--priority", choices=sorted(PRIORITIES), default="P1")


def add_chat_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--once", metavar="MESSAGE", help="send one message, print the turn, exit (1 if it failed)")
    sessions = parser.add_mutually_exclusive_group()
    sessions.add_argument(
        "--session", default="", metavar="ID", help="continue this session (its id is printed on stderr)"
    )
    sessions.add_argument(
        "--new-session",
        default="",
        metavar="ID",
        help="start a session under this id (1-128 letters, digits, '.', '_', '-'); ALREADY_EXISTS if taken",
    )
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
