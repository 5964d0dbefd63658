"""A runnable probe service: the shared launcher around ProbeAgent, for process-level tests.

``python -m tests.support.probe_service --port 0`` behaves as any mesh
service's entry point: config errors and start-up failures print one line.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from services.runtime.config import RedisConfig
from services.runtime.launch import run_service
from services.runtime.lifecycle import Kit, Parts
from services.runtime.redis import connect_redis
from services.runtime.server import MeshServer
from tests.support.probe_agent import ProbeAgent


@dataclass(frozen=True)
class ProbeConfig(RedisConfig):
    """Probe service for runtime tests."""

    ENV_PREFIX = "AGENTMESH_PROBE_"
    SERVICE_NAME = "probe"


async def service_parts(config: ProbeConfig, kit: Kit) -> Parts:
    """ProbeAgent under the services' own lifecycle; prints its address once it listens, for the test to read."""
    redis = await connect_redis(config.redis_url, required=config.redis_required, timeout_s=1.0)
    if redis is not None:
        kit.close_after_drain(redis.aclose)

    async def announce(server: MeshServer) -> None:
        print(f"listening on {server.address}", flush=True)

    return Parts([ProbeAgent().service()], warm_up=announce)


def main() -> int:
    return run_service(ProbeConfig, service_parts)


if __name__ == "__main__":
    sys.exit(main())
