"""One real vLLM engine on the embedded model per test session (it takes ~40 s to start)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc.aio
import pytest

from services.inference.config import default_model_dir
from services.inference.servicer import InferenceServicer
from services.inference.session import SessionSettings
from services.inference.vllm_engine import VllmEngine, VllmSettings
from services.runtime.channel import create_channel
from services.runtime.config import ServiceConfig
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer


@dataclass
class VllmReplica:
    engine: VllmEngine
    server: MeshServer
    channel: grpc.aio.Channel


@pytest.fixture(scope="session")
async def vllm_replica() -> AsyncIterator[VllmReplica]:
    engine = VllmEngine(
        VllmSettings(model=default_model_dir(), model_id="SmolLM2-135M-Instruct", max_output_tokens=512)
    )
    await engine.start()
    servicer = InferenceServicer(engine, SessionSettings(replica_id="vllm-0", default_max_tokens=64))
    server = MeshServer(ServiceConfig(port=0), [servicer.service()], metrics=Metrics())
    await server.start()
    channel = create_channel(server.address)
    yield VllmReplica(engine, server, channel)
    await channel.close()
    await server.drain(grace=0)
    await engine.close()
