"""Channel/server options agree; deadlines turn into downstream timeouts."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from agentmesh.agent.v1 import agent_pb2
from agentmesh.inference.v1 import inference_pb2
from agentmesh.tools.v1 import tools_pb2
from services.runtime import options
from services.runtime.context import DEADLINE
from services.runtime.deadline import Deadline, downstream_timeout
from services.runtime.errors import DeadlineExceeded


def test_keepalive_agrees_between_client_and_server() -> None:
    client: dict[str, Any] = dict(options.channel_options())
    server: dict[str, Any] = dict(options.server_options())
    # The client never pings more often than the server tolerates.
    assert client["grpc.keepalive_time_ms"] >= server["grpc.http2.min_recv_ping_interval_without_data_ms"]
    assert client["grpc.keepalive_permit_without_calls"] == server["grpc.keepalive_permit_without_calls"] == 1
    for key in ("grpc.max_send_message_length", "grpc.max_receive_message_length"):
        assert client[key] == server[key]
    assert server["grpc.so_reuseport"] == 0


def test_retry_config_covers_only_existing_idempotent_unary_methods() -> None:
    config = json.loads(options.retry_service_config())
    names = config["methodConfig"][0]["name"]
    assert {(n["service"], n["method"]) for n in names} == set(options.IDEMPOTENT_METHODS)
    descriptors = {
        f.package + "." + s.name: s
        for f in (agent_pb2.DESCRIPTOR, tools_pb2.DESCRIPTOR, inference_pb2.DESCRIPTOR)
        for s in f.services_by_name.values()
    }
    for service, method in options.IDEMPOTENT_METHODS:
        if service.startswith("grpc."):
            continue
        m = descriptors[service].methods_by_name[method]
        assert not m.client_streaming and not m.server_streaming, f"{service}/{method} is streaming"
    assert config["methodConfig"][0]["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]


def test_downstream_timeout_follows_the_contextvar() -> None:
    assert downstream_timeout() is None
    assert downstream_timeout(cap=3.0) == 3.0
    token = DEADLINE.set(time.monotonic() + 2.0)
    try:
        t = downstream_timeout()
        assert t is not None and 1.9 < t < 2.0
        assert downstream_timeout(cap=0.5) == 0.5
    finally:
        DEADLINE.reset(token)


def test_expired_deadline_refuses_to_start_work() -> None:
    token = DEADLINE.set(time.monotonic() - 0.1)
    try:
        assert Deadline.current().expired
        with pytest.raises(DeadlineExceeded):
            downstream_timeout()
    finally:
        DEADLINE.reset(token)


def test_earliest() -> None:
    a, b, none = Deadline.after(1), Deadline.after(2), Deadline(None)
    assert a.earliest(b) is a and b.earliest(a) is a
    assert none.earliest(a) is a and a.earliest(none) is a
