"""What a running turn has done so far, kept so a turn that stops early still reports its usage.

A ``TurnProgress`` holds a turn's id, token counters, timings and tool rounds.
The agent loop, the tool phase and the answer fill it in as they go; the
Converse stream keeps it, so a turn that is cancelled, times out or fails can
still end with a ``TurnCompleted`` (``convert.completed``) that carries its
usage so far — the gateway charges the tenant from that message, and a client
learns why the turn ended. Usage so far is exact for every generation that
finished, and estimated (4 characters per token, as history compression does)
for the answer that was streaming when the turn stopped: an aborted engine
request reports no counts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.router.metrics import RouterMetrics
from services.router.replicas.generation import GenerationDone
from services.router.turn.client_tools import ClientCalls
from services.router.turn.prompt import Message, estimate_tokens


@dataclass
class TurnCounters:
    """What a turn's generations cost, summed over choose, fill and answer."""

    usage: common_pb2.Usage = field(default_factory=common_pb2.Usage)
    generations: int = 0

    def add(self, done: GenerationDone, metrics: RouterMetrics | None) -> None:
        self.generations += 1
        self.usage.prompt_tokens += done.usage.prompt_tokens
        self.usage.completion_tokens += done.usage.completion_tokens
        self.usage.cached_prompt_tokens += done.usage.cached_prompt_tokens
        if metrics is not None:
            metrics.prompt_tokens.inc(done.usage.prompt_tokens)
            metrics.cached_prompt_tokens.inc(done.usage.cached_prompt_tokens)


@dataclass
class TurnProgress:
    """A turn as it runs; in: what the agent loop has done, out: the numbers of the turn's ``TurnCompleted``."""

    turn_id: str
    queued_s: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    counters: TurnCounters = field(default_factory=TurnCounters)
    ttft_s: float = 0.0
    planning_s: float = 0.0
    tools_s: float = 0.0
    answering_s: float = 0.0
    rounds: int = 0
    method: agent_pb2.ToolSelection.ValueType = agent_pb2.TOOL_SELECTION_UNSPECIFIED
    #: The answer generation in flight: its prompt and the text streamed so far (cleared once it finishes).
    answer_prompt: list[Message] = field(default_factory=list)
    answer_text: list[str] = field(default_factory=list)
    #: Set once the turn's TurnCompleted is on its way to the client: it is never sent twice.
    completed: bool = False
    #: The turn's mailbox for its client tools' results (None: the turn brought no client tools).
    client_calls: ClientCalls | None = None
    #: The plan called client tools and the turn ends there (StartTurn.end_at_client_calls).
    ended_at_client_calls: bool = False

    def usage_so_far(self) -> common_pb2.Usage:
        usage = common_pb2.Usage()
        usage.CopyFrom(self.counters.usage)
        if self.answer_prompt:
            usage.prompt_tokens += estimate_tokens(self.answer_prompt)
            usage.completion_tokens += (sum(len(t) for t in self.answer_text) + 3) // 4
        return usage
