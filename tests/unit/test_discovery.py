"""Discovery: dns: targets resolve to every pod, and a failed lookup keeps the last good set (fake DNS)."""

from __future__ import annotations

import logging
import socket

import grpc.aio
import pytest

from gateway.routers import RouterPool
from services.router.replicas.addresses import ReplicaSet
from services.router.tools.link import ToolsLink
from services.runtime.resolver import Resolver
from tests.support.waiting import eventually


class FakeDns:
    """Answers with ``records``, or fails like kube-dns on a bad day when ``failing``."""

    def __init__(self, *ips: str) -> None:
        self.records = list(ips)
        self.failing = False

    async def __call__(self, host: str, port: int) -> list[tuple[int, str]]:
        if self.failing:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return [(socket.AF_INET6 if ":" in ip else socket.AF_INET, ip) for ip in self.records]


def channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target)  # nothing listens: the links keep trying, which is all we need


async def test_resolver_keeps_the_last_good_set_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    dns = FakeDns("10.0.0.1", "fd00::2")
    resolver = Resolver(["dns:svc:50052", "static:1"], dns)
    assert await resolver.resolve() == {"10.0.0.1:50052", "[fd00::2]:50052", "static:1"}
    dns.failing = True
    with caplog.at_level(logging.WARNING):
        assert await resolver.resolve() == {"10.0.0.1:50052", "[fd00::2]:50052", "static:1"}
    assert "cannot resolve svc:50052" in caplog.text and "keeping the last good set" in caplog.text
    dns.failing, dns.records = False, []
    assert await resolver.resolve() == {"10.0.0.1:50052", "[fd00::2]:50052", "static:1"}  # empty: kept too
    dns.records = ["10.0.0.3"]
    assert await resolver.resolve() == {"10.0.0.3:50052", "static:1"}


async def test_a_dns_failure_does_not_close_the_inference_links() -> None:
    dns = FakeDns("10.0.0.1", "10.0.0.2")
    replicas = ReplicaSet(["dns:inference:50054"], channel, lookup=dns)
    try:
        await replicas.refresh()
        before = dict(replicas.links)
        assert set(before) == {"10.0.0.1:50054", "10.0.0.2:50054"}
        dns.failing = True
        await replicas.refresh()
        assert replicas.links == before  # the same links, not closed and reopened
        dns.failing, dns.records = False, ["10.0.0.2"]
        await replicas.refresh()
        assert set(replicas.links) == {"10.0.0.2:50054"}
    finally:
        await replicas.close()


async def test_gateway_spreads_over_router_pods_and_retires_the_ones_that_leave() -> None:
    dns = FakeDns("10.0.1.1", "10.0.1.2")
    pool = RouterPool(["dns:router:50052"], channel, refresh_s=0.05, retire_after_s=60, lookup=dns)
    pool.start()
    try:
        await eventually(lambda: set(pool.targets) == {"10.0.1.1:50052", "10.0.1.2:50052"}, 5, "both pods")
        dns.failing = True
        await pool.refresh()
        assert set(pool.targets) == {"10.0.1.1:50052", "10.0.1.2:50052"}
        dns.failing, dns.records = False, ["10.0.1.2"]
        await eventually(lambda: pool.targets == ["10.0.1.2:50052"], 5, "one pod left")
        assert pool.channel("10.0.1.1:50052") is not None  # a stream that picked it just before still has it
    finally:
        await pool.close()


async def test_router_opens_one_execute_stream_per_tool_pod() -> None:
    dns = FakeDns("10.0.2.1")
    tools = ToolsLink("dns:tools:50053", channel, refresh_s=0.05, lookup=dns)
    tools.start()
    try:
        await eventually(lambda: set(tools.streams) == {"10.0.2.1:50053"}, 5, "the first pod")
        dns.records = ["10.0.2.1", "10.0.2.2"]  # the autoscaler adds a pod
        await eventually(lambda: set(tools.streams) == {"10.0.2.1:50053", "10.0.2.2:50053"}, 5, "the new pod")
        dns.failing = True
        await tools.refresh()
        assert set(tools.streams) == {"10.0.2.1:50053", "10.0.2.2:50053"}
    finally:
        await tools.close()
