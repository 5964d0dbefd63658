"""Configuration of the inference service (flags and AGENTMESH_INFERENCE_* variables)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.runtime.cache_dir import cache_dir
from services.runtime.config import ConfigError, ServiceConfig, fraction, non_negative, opt, port, positive


def default_model_dir() -> str:
    """Where `make setup` provisions the embedded SmolLM2 model."""
    return str(cache_dir() / "models" / "SmolLM2-135M-Instruct")


@dataclass(frozen=True)
class InferenceConfig(ServiceConfig):
    """AgentMesh inference service: one engine replica (vLLM or the simulator)."""

    ENV_PREFIX = "AGENTMESH_INFERENCE_"
    SERVICE_NAME = "inference"

    port: int = opt(50054, "gRPC port", check=port)
    metrics_port: int = opt(9154, "Prometheus /metrics port (0 picks a free one, -1 disables)")
    engine: str = opt(
        "vllm", "engine: vllm, or simulator (explicit only; never a fallback)", choices=("vllm", "simulator")
    )
    replica_id: str = opt("", "id in load reports (default: host:port)")
    default_max_tokens: int = opt(256, "max_tokens when a request sets none", check=positive)
    max_output_tokens: int = opt(1024, "largest max_tokens a request may ask for", check=positive)
    load_report_interval_s: float = opt(0.5, "seconds between load reports on an idle stream", check=positive)
    coalesce_frames: bool = opt(True, "merge the deltas of one engine step into one frame (false: for benchmarks)")
    # vLLM engine arguments (defaults: the embedded model on CPU).
    model: str = opt("", "model folder (default: the provisioned SmolLM2-135M-Instruct)")
    model_id: str = opt("SmolLM2-135M-Instruct", "model name reported to callers")
    dtype: str = opt(
        "float32",
        "weights dtype (float32 on CPU; bfloat16/float16 on GPU)",
        choices=("auto", "float32", "bfloat16", "float16"),
    )
    max_model_len: int = opt(2048, "context length in tokens", check=positive)
    max_num_seqs: int = opt(32, "most sequences in one batch", check=positive)
    max_num_batched_tokens: int = opt(0, "token budget per step (0: vLLM's default)", check=non_negative)
    gpu_memory_utilization: float = opt(0.9, "GPU memory fraction for weights and KV cache", check=fraction)
    tensor_parallel_size: int = opt(1, "GPUs per replica", check=positive)
    enforce_eager: bool = opt(True, "disable CUDA graphs / torch.compile (faster start; needed on CPU)")
    cpu_kv_cache_gib: float = opt(1.0, "KV cache size on CPU (VLLM_CPU_KVCACHE_SPACE)", check=positive)
    block_size: int = opt(0, "KV block size in tokens (0: the platform's default; 128 on CPU)", check=non_negative)
    warmup: bool = opt(True, "run warm-up generations before reporting SERVING")
    # Simulator latency model.
    sim_prefill_s_per_token: float = opt(
        0.0002, "simulator: prefill seconds per uncached prompt token", check=non_negative
    )
    sim_decode_base_s: float = opt(0.010, "simulator: decode step seconds at batch size 0", check=non_negative)
    sim_decode_per_seq_s: float = opt(0.0005, "simulator: extra step seconds per running sequence", check=non_negative)
    sim_max_batch: int = opt(32, "simulator: most running sequences", check=positive)
    sim_block_size: int = opt(16, "simulator: tokens per prefix-cache block", check=positive)
    sim_cache_blocks: int = opt(4096, "simulator: prefix-cache capacity in blocks", check=positive)
    sim_output_tokens: int = opt(64, "simulator: tokens generated per request (before max_tokens)", check=positive)

    sim_time_scale: float = opt(
        1.0, "simulator: real seconds per simulated second (0 runs as fast as possible)", check=non_negative
    )

    def validate(self) -> None:
        if self.max_output_tokens >= self.max_model_len and self.engine == "vllm":
            raise ConfigError(
                f"--max-output-tokens: {self.max_output_tokens} must be below --max-model-len ({self.max_model_len})"
            )
        if self.default_max_tokens > self.max_output_tokens:
            raise ConfigError(
                f"--default-max-tokens: {self.default_max_tokens} exceeds "
                f"--max-output-tokens ({self.max_output_tokens})"
            )
        if self.engine == "vllm":
            model = Path(self.model or default_model_dir())
            if not (model / "config.json").is_file():
                raise ConfigError(f"--model: {model} is not a model folder (run `make setup` to provision it)")
