"""The engine interface the inference service serves, and the data that flows through it.

In: a ``GenerationRequest`` already validated against the contract
(``convert.request_from_proto``). The engine ``prepare``s it (tokenise, apply
the chat template, check the context window; raising ``InvalidArgument``), then
``generate`` yields ``GenerationUpdate``s: the text and token ids new since the
previous update, the last one carrying ``Finished``. Cancelling the consumer of
``generate`` aborts the request inside the engine; nothing keeps running.

Errors: ``InvalidArgument`` for input the engine cannot take, ``EngineDead``
(an ``Unavailable``) once the engine has died.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from services.runtime.errors import InvalidArgument, Unavailable


class EngineDead(Unavailable):
    """The engine process died; every request fails and health says NOT_SERVING."""

    def __init__(self, message: str = "the inference engine is not running") -> None:
        super().__init__(message, retry_after_s=1.0, reason="ENGINE_DEAD")


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters with every default resolved."""

    temperature: float
    top_p: float
    top_k: int  # 0 disables
    max_tokens: int
    seed: int | None
    stop: tuple[str, ...]
    #: OpenAI's additive penalties, in [-2, 2] (0: none), and vLLM's multiplicative one, > 0 (1: none).
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0


#: What a scoring runs (``GenerationRequest.continuation``): one greedy step, whose token is no output.
SCORING = Sampling(temperature=0.0, top_p=1.0, top_k=0, max_tokens=1, seed=None, stop=())


@dataclass(frozen=True)
class ChatTurn:
    """One chat message; ``role`` is system, user, assistant or tool (``tool_name`` names the tool)."""

    role: str
    content: str
    tool_name: str = ""


@dataclass(frozen=True)
class GenerationRequest:
    """One generation, as the engine sees it."""

    request_id: str
    prompt: str | tuple[ChatTurn, ...]
    sampling: Sampling
    #: vLLM convention: lower runs first (P0 → 0, P1 → 1, P2 → 2).
    priority: int
    json_schema: str | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    #: Prefix-cache partition: only requests with the same salt share cached blocks ("" = shared).
    cache_salt: str = ""
    #: Score this text after the prompt instead of generating (``SubmitGeneration.scoring``); None: generate.
    continuation: str | None = None

    def __post_init__(self) -> None:
        # A scoring generates nothing, whoever built the request: every engine runs it as ``SCORING``.
        if self.continuation is not None and self.sampling != SCORING:
            object.__setattr__(self, "sampling", SCORING)


@dataclass(frozen=True)
class PreparedRequest:
    """A request the engine accepted: its prompt token ids and resolved settings."""

    request: GenerationRequest
    prompt_token_ids: tuple[int, ...]
    #: With a continuation to score: where its tokens start in ``prompt_token_ids`` (they end it).
    scored_from: int | None = None


class FinishReason(enum.Enum):
    STOP = "stop"
    LENGTH = "length"
    ABORTED = "aborted"
    ERROR = "error"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int


@dataclass(frozen=True)
class ContinuationScore:
    """A scored continuation: the summed natural-log probability of its tokens, and how many there are."""

    logprob: float
    tokens: int


@dataclass(frozen=True)
class Finished:
    """How a generation ended (on its last update)."""

    reason: FinishReason
    usage: Usage
    queue_time_s: float | None = None
    #: The continuation's score, when the request scored one.
    continuation: ContinuationScore | None = None


@dataclass(frozen=True)
class GenerationUpdate:
    """Output new since the previous update of the same request."""

    text: str
    token_ids: tuple[int, ...]
    finished: Finished | None = None


@dataclass(frozen=True)
class Load:
    """The engine's load figures, the same for every engine."""

    running: int
    waiting: int
    kv_cache_usage: float
    prefix_cache_hit_rate: float
    max_running: int


@dataclass(frozen=True)
class ModelInfo:
    model_id: str
    engine: str
    engine_version: str
    max_model_len: int
    max_output_tokens: int
    kv_block_size: int
    supports_structured_output: bool


def prompt_field(request: GenerationRequest) -> str:
    """The contract field holding the request's prompt, for error messages."""
    return "submit.text" if isinstance(request.prompt, str) else "submit.chat.messages"


def check_fits(request: GenerationRequest, prompt_tokens: int, max_model_len: int) -> None:
    """Raise InvalidArgument unless the prompt plus max_tokens fits the context window."""
    field = prompt_field(request)
    if prompt_tokens == 0:
        raise InvalidArgument.field(field, "the prompt has no tokens")
    if prompt_tokens >= max_model_len:
        raise InvalidArgument.field(
            field, f"the prompt has {prompt_tokens} tokens; the model's context is {max_model_len}"
        )
    max_tokens = request.sampling.max_tokens
    if prompt_tokens + max_tokens > max_model_len:
        raise InvalidArgument.field(
            "submit.sampling.max_tokens",
            f"prompt ({prompt_tokens} tokens) + max_tokens ({max_tokens}) exceeds the context ({max_model_len})",
        )


class Engine(abc.ABC):
    """A token generator behind the inference service."""

    @property
    @abc.abstractmethod
    def info(self) -> ModelInfo:
        """What the engine serves and its limits (valid after ``start``)."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Load the model and warm up; return when requests can be served quickly."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop the engine and free its resources."""

    @abc.abstractmethod
    def prepare(self, request: GenerationRequest) -> PreparedRequest:
        """Tokenise and check the request against the model; raise InvalidArgument if it cannot run."""

    @abc.abstractmethod
    def generate(self, prepared: PreparedRequest, engine_request_id: str) -> AsyncGenerator[GenerationUpdate, None]:
        """Stream the request's output. ``engine_request_id`` is unique across callers."""

    @abc.abstractmethod
    def load(self) -> Load:
        """Current load figures."""

    @abc.abstractmethod
    def unfinished_requests(self) -> int:
        """Requests the engine still tracks (0 when idle: nothing leaked)."""

    @property
    @abc.abstractmethod
    def dead(self) -> bool:
        """True once the engine can no longer serve."""
