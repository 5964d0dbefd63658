"""What flows into and out of one tool call: ``CallRequest`` in, ``CallOutcome`` out, with its ``CallStatus``.

Apart from ``executor`` so that the proto conversion (``convert``) and the
stream session speak these types without depending on the executor's guards.
"""

from __future__ import annotations

import enum
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
