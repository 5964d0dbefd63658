"""A runnable probe service: the shared launcher around ProbeAgent, for process-level tests.

``python -m tests.support.probe_service --port 0`` behaves as any mesh
service's entry point: config errors and start-up failures print one line.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from services.runtime.config import RedisConfig
from services.runtime.launch import run_service
from services.runtime.metrics import Metrics
from services.runtime.redis import connect_redis
from services.runtime.server import MeshServer, stop_signals
from tests.support.probe_agent import ProbeAgent


@dataclass(frozen=True)
class ProbeConfig(RedisConfig):
    """Probe service for runtime tests."""

    ENV_PREFIX = "AGENTMESH_PROBE_"
    SERVICE_NAME = "probe"


async def serve(config: ProbeConfig) -> None:
    stop = stop_signals()
    redis = await connect_redis(config.redis_url, required=config.redis_required, timeout_s=1.0)
    server = MeshServer(config, [ProbeAgent().service()], metrics=Metrics())
    await server.start()
    print(f"listening on {server.address}", flush=True)
    await stop
    await server.drain()
    if redis is not None:
        await redis.aclose()


def main() -> int:
    return run_service(ProbeConfig, serve)


if __name__ == "__main__":
    sys.exit(main())
