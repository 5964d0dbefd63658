"""gRPC channel and server options, in one place so both ends agree.

Keepalive: clients ping every ``CLIENT_KEEPALIVE_TIME_MS`` even without calls
(long-lived multiplexed streams sit idle between bursts, and a silently dead
peer must be noticed); servers accept pings as often as
``SERVER_MIN_PING_INTERVAL_MS``, which is shorter, so a well-behaved client is
never punished with GOAWAY "too_many_pings". Servers ping idle clients too.
Message sizes are explicit on both sides. SO_REUSEPORT is off so two servers
can never silently share one port.

Servers end every connection after ``SERVER_MAX_CONNECTION_AGE_MS`` (gRPC adds
±10 % jitter) with a GOAWAY: the client's next calls open a new connection,
which a Service or load balancer may send to a pod that was added since, so
new pods get traffic from long-lived clients. No grace is set: streams already
open (a Converse session, a multiplexed Generate or Execute stream) run to
their end on the old connection instead of being cut.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

CLIENT_KEEPALIVE_TIME_MS = 30_000
CLIENT_KEEPALIVE_TIMEOUT_MS = 10_000
SERVER_MIN_PING_INTERVAL_MS = 10_000
SERVER_KEEPALIVE_TIME_MS = 60_000
SERVER_KEEPALIVE_TIMEOUT_MS = 20_000
SERVER_MAX_CONNECTION_AGE_MS = 300_000
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

Option = tuple[str, int | str]

#: Idempotent unary RPCs of our contracts (and health), safe for transparent retry.
IDEMPOTENT_METHODS: tuple[tuple[str, str], ...] = (
    ("agentmesh.agent.v1.AgentService", "GetSession"),
    ("agentmesh.agent.v1.AgentService", "ListTools"),
    ("agentmesh.tools.v1.ToolExecutorService", "ListTools"),
    ("agentmesh.inference.v1.InferenceService", "GetLoad"),
    ("agentmesh.inference.v1.InferenceService", "GetModelInfo"),
    ("grpc.health.v1.Health", "Check"),
)


def server_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[Option]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", SERVER_KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", SERVER_KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", SERVER_MIN_PING_INTERVAL_MS),
        ("grpc.http2.max_ping_strikes", 2),
        ("grpc.so_reuseport", 0),
        ("grpc.max_connection_age_ms", SERVER_MAX_CONNECTION_AGE_MS),
    ]


def retry_service_config(
    methods: Iterable[tuple[str, str]] = IDEMPOTENT_METHODS,
    *,
    max_attempts: int = 4,
    initial_backoff_s: float = 0.1,
    max_backoff_s: float = 2.0,
) -> str:
    """A service config retrying the given unary methods on UNAVAILABLE, with backoff."""
    return json.dumps(
        {
            "methodConfig": [
                {
                    "name": [{"service": s, "method": m} for s, m in methods],
                    "retryPolicy": {
                        "maxAttempts": max_attempts,
                        "initialBackoff": f"{initial_backoff_s}s",
                        "maxBackoff": f"{max_backoff_s}s",
                        "backoffMultiplier": 2,
                        "retryableStatusCodes": ["UNAVAILABLE"],
                    },
                }
            ]
        }
    )


def channel_options(
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    *,
    idempotent_methods: Sequence[tuple[str, str]] = IDEMPOTENT_METHODS,
) -> list[Option]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", CLIENT_KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", CLIENT_KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", retry_service_config(idempotent_methods)),
    ]
