"""Client side of grpc.health.v1: wait until a server reports SERVING."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.runtime.tls import MeshTls


async def wait_serving(
    target: str,
    *,
    within_s: float = 60.0,
    service: str = "",
    still_starting: Callable[[], bool] = lambda: True,
    tls: MeshTls | None = None,
) -> None:
    """Poll ``target``'s health until ``service`` is SERVING.

    Raises TimeoutError after ``within_s``, or RuntimeError as soon as
    ``still_starting()`` turns false (e.g. the server's process exited).
    ``tls``: ask as a mesh member, for a server that takes only mTLS peers.
    """
    deadline = time.monotonic() + within_s
    channel = (
        grpc.aio.secure_channel(target, tls.channel_credentials(), options=tls.channel_options())
        if tls is not None
        else grpc.aio.insecure_channel(target)
    )
    async with channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if not still_starting():
                raise RuntimeError(f"{target} stopped before it was SERVING")
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=1.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.1)
    raise TimeoutError(f"{target} was not SERVING within {within_s:.0f} s")
