"""`agentmesh up` refuses two listeners on one port before it starts anything, and the test helpers' free ports
never repeat within a process (CI once gave the gateway and the inference service the same port)."""

from __future__ import annotations

import argparse

from meshkit.up import free_port
from services.cli import up


def _clash(*argv: str) -> str | None:
    parser = argparse.ArgumentParser()
    up.add_arguments(parser)
    args = parser.parse_args(list(argv))
    return up.port_clash(up.plan(args), args.gateway_http_port)


def test_distinct_ports_pass() -> None:
    assert _clash("--gateway-port", "41001", "--router-port", "41002", "--tools-port", "41003") is None


def test_two_services_on_one_port_are_named() -> None:
    assert _clash("--gateway-port", "41001", "--inference-port", "41001") == (
        "the inference port and the gateway port are both 41001"
    )


def test_the_http_and_metrics_ports_are_checked_too() -> None:
    assert _clash("--gateway-http-port", "41004", "--gateway-port", "41004") == (
        "the gateway port and the gateway HTTP port are both 41004"
    )
    assert _clash("--metrics-port-base", "41010", "--router-port", "41011") == (
        "the router port and the router metrics port are both 41011"
    )


def test_free_port_never_repeats() -> None:
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
