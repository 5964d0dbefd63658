"""The inference service's parts from its config: the engine (simulator or vLLM), its servicer and watchdog.

Start-up order (``lifecycle.serve``): listen (health NOT_SERVING, so probes get an answer while the
engine loads) → start and warm the engine → SERVING. A watchdog flips health
to NOT_SERVING if the engine dies (in-flight requests fail UNAVAILABLE on their
own). SIGTERM/SIGINT: announce draining on open streams, drain, close the engine.
"""

from __future__ import annotations

import asyncio
import logging

import prometheus_client

from services.inference.config import InferenceConfig, default_model_dir
from services.inference.engine import Engine
from services.inference.metrics import InferenceMetrics
from services.inference.servicer import InferenceServicer
from services.inference.session import SessionSettings
from services.inference.simulator import SimulatorEngine, SimulatorSettings
from services.inference.vllm_engine import VllmEngine, VllmSettings
from services.runtime.lifecycle import Kit, Parts
from services.runtime.server import MeshServer
from services.runtime.tls import MeshTls

log = logging.getLogger(__name__)


def build_engine(config: InferenceConfig) -> Engine:
    """The engine the config names (no fallback from one to the other)."""
    if config.engine == "simulator":
        return SimulatorEngine(
            SimulatorSettings(
                prefill_s_per_token=config.sim_prefill_s_per_token,
                decode_base_s=config.sim_decode_base_s,
                decode_per_seq_s=config.sim_decode_per_seq_s,
                max_batch=config.sim_max_batch,
                block_size=config.sim_block_size,
                cache_blocks=config.sim_cache_blocks,
                max_model_len=config.max_model_len,
                max_output_tokens=config.max_output_tokens,
                output_tokens=config.sim_output_tokens,
                time_scale=config.sim_time_scale,
                model_id=f"simulator/{config.model_id}",
            )
        )
    return VllmEngine(
        VllmSettings(
            model=config.model or default_model_dir(),
            model_id=config.model_id,
            dtype=config.dtype,
            max_model_len=config.max_model_len,
            max_num_seqs=config.max_num_seqs,
            max_num_batched_tokens=config.max_num_batched_tokens,
            gpu_memory_utilization=config.gpu_memory_utilization,
            tensor_parallel_size=config.tensor_parallel_size,
            enforce_eager=config.enforce_eager,
            cpu_kv_cache_gib=config.cpu_kv_cache_gib,
            block_size=config.block_size,
            max_output_tokens=config.max_output_tokens,
            warmup=config.warmup,
        )
    )


async def watch_engine(engine: Engine, server: MeshServer, interval_s: float = 1.0) -> None:
    """Flip health to NOT_SERVING once the engine dies (engines expose a flag, not an event)."""
    while not engine.dead:  # noqa: ASYNC110
        await asyncio.sleep(interval_s)
    log.error("the inference engine died; reporting NOT_SERVING")
    await server.set_serving(False)


async def service_parts(config: InferenceConfig, kit: Kit) -> Parts:
    """The inference service for ``lifecycle.serve``: SERVING once the engine is warm, until it dies."""
    engine = build_engine(config)
    kit.close_after_drain(engine.close)
    draining = False
    servicer = InferenceServicer(
        engine,
        SessionSettings(
            replica_id=config.replica_id or config.address,
            default_max_tokens=config.default_max_tokens,
            load_interval_s=config.load_report_interval_s,
            coalesce=config.coalesce_frames,
        ),
        # vLLM counts per-request latencies and tokens itself (vllm:*); the simulator does not.
        InferenceMetrics(kit.metrics, engine.load, per_request=config.engine != "vllm"),
        is_draining=lambda: draining,
        tracer=kit.tracer_provider.get_tracer("agentmesh.inference"),
    )

    async def warm_up(_: MeshServer) -> None:
        await engine.start()
        log.info("engine %s ready: %s", engine.info.engine, engine.info.model_id)

    async def announce_draining() -> None:
        nonlocal draining
        draining = True
        servicer.announce_draining()

    return Parts(
        [servicer.service()],
        tls=MeshTls.from_config(config),
        warm_up=warm_up,
        watch=lambda server: watch_engine(engine, server),
        announce_draining=announce_draining,
        metrics_also=[prometheus_client.REGISTRY] if config.engine == "vllm" else [],  # vLLM registers vllm:* there
    )
