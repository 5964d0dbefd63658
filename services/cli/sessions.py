"""``agentmesh sessions show ID``: a session's turns, as ``agentmesh chat`` showed them, read with GetSession.

One header line (id, turn count, when it was created and when it expires), the
system prompt, then each turn: what the user said, its tool calls as they
finished (←, the same lines as the chat's), the answer, and its tokens. The
client follows GetSession's pages, so a long session prints whole. ``--json``
prints the ``Session`` message as proto JSON instead, for scripts. Another
tenant's session is NOT_FOUND, like an unknown one. Failures print one line,
as the chat's do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import sys
from typing import TextIO

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh_client import AgentClient
from agentmesh_client.events import turn_event_of
from services.cli.chat import CliError, api_key, describe, render
from services.cli.up import GATEWAY_PORT
from services.runtime.errors import AgentMeshError


def _when(stamp: Timestamp) -> str:
    if not stamp.seconds:
        return "-"
    return dt.datetime.fromtimestamp(stamp.seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def print_session(session: agent_pb2.Session, out: TextIO) -> None:
    """The session as text (see module docstring)."""
    out.write(
        f"session {session.session_id}: {session.turn_count} turns, created {_when(session.created_at)}, "
        f"expires {_when(session.expires_at)}\n"
    )
    if session.system_prompt:
        out.write(f"system: {session.system_prompt}\n")
    first = session.turn_count - len(session.turns) + 1
    for number, turn in enumerate(session.turns, first):
        out.write(f"\n[{number}] you> {turn.user_message}\n")
        for call in turn.tool_calls:
            event = turn_event_of(agent_pb2.ConverseResponse(tool_call_finished=call))
            if event is not None:
                render(event, out)
        out.write(f"{turn.answer}\n")
        reason = common_pb2.FinishReason.Name(turn.finish_reason).removeprefix("FINISH_REASON_").lower()
        out.write(
            f"  [{turn.usage.prompt_tokens} prompt + {turn.usage.completion_tokens} completion tokens, "
            f"{turn.usage.cached_prompt_tokens} cached; {reason}; {_when(turn.completed_at)}]\n"
        )
    out.flush()


async def show(args: argparse.Namespace, out: TextIO = sys.stdout) -> None:
    async with AgentClient.connect(args.target, api_key=api_key(args)) as client:
        try:
            session = await client.get_session(args.session_id)
        except AgentMeshError as exc:
            raise CliError(describe(exc)) from None
    if args.json:
        out.write(json_format.MessageToJson(session) + "\n")
        out.flush()
    else:
        print_session(session, out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    shown = actions.add_parser("show", help="print a session's turns")
    shown.add_argument("session_id", metavar="ID", help="the session (as `agentmesh chat` printed it)")
    shown.add_argument("--json", action="store_true", help="print the Session message as JSON")
    shown.add_argument("--target", default=f"127.0.0.1:{GATEWAY_PORT}", help="gateway address")
    shown.add_argument("--api-key", default="", help="API key (default: $AGENTMESH_API_KEY)")


def run(args: argparse.Namespace) -> int:
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(show(args))
    except CliError as exc:
        print(f"agentmesh: error: {exc}", file=sys.stderr)
        return 1
    return 0
