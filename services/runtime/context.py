"""Request-scoped values, carried in contextvars so domain code needs no context argument.

The request-id and deadline interceptors set these at the start of every RPC;
asyncio copies the context into tasks the handler spawns, so a tool call or
engine request started from a handler sees the same values.
"""

from __future__ import annotations

import contextvars

#: The id of the request being served ("" outside an RPC).
REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("agentmesh_request_id", default="")

#: Absolute ``time.monotonic()`` at which the current RPC's deadline expires; None = no deadline.
DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("agentmesh_deadline", default=None)


def current_request_id() -> str:
    """The id of the request being served, or "" outside an RPC."""
    return REQUEST_ID.get()
