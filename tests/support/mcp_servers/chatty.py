"""A hand-written stdio MCP server that, on its first start only, prints a log line to stdout after listing
its tools: what a server that logs to stdout does (the SDK's servers divert stdout, so they cannot)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

MARKS = Path(os.environ.get("MCP_TEST_MARKS", "."))
ECHO = {"name": "echo", "description": "Echo the text.", "inputSchema": {"type": "object"}}


def answer(request_id: Any, result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    starts = len(list(MARKS.glob("pid-*"))) + 1
    (MARKS / f"pid-{starts}").write_text(str(os.getpid()))
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            answer(
                request_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": "chatty", "version": "1"},
                },
            )
        elif method == "tools/list":
            answer(request_id, {"tools": [ECHO]})
            if starts == 1:
                sys.stdout.write("chatty server ready, listening\n")
                sys.stdout.flush()
        elif method == "tools/call":
            text = json.dumps(message["params"].get("arguments") or {})
            answer(request_id, {"content": [{"type": "text", "text": text}]})
        elif method == "ping":
            answer(request_id, {})
        else:
            sys.stdout.write(
                json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}})
                + "\n"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
