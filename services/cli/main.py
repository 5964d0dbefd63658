"""``agentmesh``: the mesh from a terminal — ``up`` runs it, ``chat`` and ``complete`` talk to it, ``sessions``
reads what was said."""

from __future__ import annotations

import argparse
import asyncio
import sys

from services.cli import chat, sessions, up


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentmesh", description="AgentMesh: serve AI agents over gRPC.")
    commands = parser.add_subparsers(dest="command", required=True)
    up.add_arguments(commands.add_parser("up", help="run every service of the mesh locally"))
    chat.add_chat_arguments(commands.add_parser("chat", help="talk to the agent (streams tool calls and answers)"))
    chat.add_complete_arguments(commands.add_parser("complete", help="stream a one-shot answer to a prompt"))
    sessions.add_arguments(commands.add_parser("sessions", help="read sessions (show ID: a session's turns)"))
    args = parser.parse_args(argv)
    if args.command == "up":
        if args.sim_replicas < 0:
            parser.error("--sim-replicas must not be negative")
        if args.no_vllm and args.sim_replicas == 0:
            parser.error("--no-vllm needs --sim-replicas N (the mesh needs at least one inference replica)")
        return asyncio.run(up.run(args))
    if args.command == "sessions":
        return sessions.run(args)
    return chat.run(args.command, args)


if __name__ == "__main__":
    sys.exit(main())
