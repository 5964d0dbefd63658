"""What flows into and out of one tool call: ``CallRequest`` in, ``CallOutcome`` out, with its ``CallStatus``.

Apart from ``executor`` so that the proto conversion (``convert``) and the
stream session speak these types without depending on the executor's guards.
While a call runs, its tool may report ``CallProgress`` (an MCP server's
progress notifications) with ``report_progress``: the executor points
``PROGRESS`` at the caller's sink for the call's task, so a tool needs no
extra argument and built-ins, which report none, are unchanged.
"""

from __future__ import annotations

import contextvars
import enum
from collections.abc import Callable
from dataclasses import dataclass


class CallStatus(enum.Enum):
    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    UNAVAILABLE = "unavailable"
    RESOURCE_EXHAUSTED = "resource_exhausted"
    PERMISSION_DENIED = "permission_denied"


@dataclass(frozen=True)
class CallRequest:
    call_id: str
    tool_name: str
    arguments_json: str
    timeout_s: float | None = None
    bypass_cache: bool = False
    tenant: str = ""  # in the cache key: a tenant never gets another tenant's cached result


@dataclass(frozen=True)
class CallOutcome:
    call_id: str
    tool_name: str
    status: CallStatus
    output_json: str = ""
    error_message: str = ""
    error_field: str = ""
    latency_s: float = 0.0
    cached: bool = False
    attempts: int = 0
    summary: str = ""
    #: Machine-readable cause beside the status (``ToolResult.error_reason``), e.g. "PERMISSION_DENIED".
    reason: str = ""


@dataclass(frozen=True)
class CallProgress:
    """One progress report of a running call: ``progress`` of ``total`` (None when unknown), and what it does."""

    progress: float
    total: float | None = None
    message: str = ""


ProgressSink = Callable[[CallProgress], None]

#: Where the tool of the call running in this task reports progress (None: nobody listens).
PROGRESS: contextvars.ContextVar[ProgressSink | None] = contextvars.ContextVar("agentmesh_tool_progress", default=None)


def report_progress(progress: CallProgress) -> None:
    """Hand ``progress`` to the caller of the running call, if it listens; never blocks."""
    sink = PROGRESS.get()
    if sink is not None:
        sink(progress)
