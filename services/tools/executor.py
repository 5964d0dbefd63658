"""One tool call through every guard: lookup, argument checks, cache, breaker, bulkhead, attempts.

In: a ``CallRequest`` (tool name, raw JSON arguments, optional time budget).
Out: a ``CallOutcome`` (both in ``calls``) — always; a failing tool becomes a failed outcome with a
reason the agent can read, never an exception that could end a stream.

Order of guards, cheapest first::

    unknown tool → tenant allowed → size → JSON → schema (JSON pointer)
    → cache (L1, L2) → backend available → circuit breaker → bulkhead (waits
    within the budget) → attempts: each attempt under the tool's timeout;
    failures and timeouts of idempotent tools are retried with full-jitter
    backoff while budget lasts

A tool of an MCP server (``services/tools/mcp/``) goes through the same guards:
its tenants allow-list refuses other tenants with PERMISSION_DENIED, a server
that is down fails the call at once with UNAVAILABLE (``ToolUnavailable``, also
raised mid-call when the server goes away), and the tools of one server share
one bulkhead of the server's size. Breakers and bulkheads of tools registered
later (a server's tools/list_changed) are made on their first call. Progress the
tool reports reaches ``on_progress`` (``calls.PROGRESS`` in the call's task).

A ``ToolError`` is the tool working as designed on input it cannot serve
(division by zero): it is not retried and does not count against the breaker.
Timeouts and unexpected exceptions do both.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from services.runtime.cache import TwoLevelCache, cache_key, canonical_json
from services.runtime.deadline import Deadline
from services.runtime.resilience import BreakerState, CircuitBreaker, full_jitter_backoff
from services.tools.calls import PROGRESS, CallOutcome, CallRequest, CallStatus, ProgressSink
from services.tools.metrics import ToolMetrics
from services.tools.registry import ToolDefinition, ToolError, ToolRegistry, ToolUnavailable

#: ``ToolResult.error_reason`` values set by the executor itself.
REASON_PERMISSION_DENIED = "PERMISSION_DENIED"
REASON_UNAVAILABLE = "MCP_SERVER_UNAVAILABLE"

#: Why a name that no tool has belongs to a backend that is down ("" when it does not): UNAVAILABLE, not NOT_FOUND.
UnknownTool = Callable[[str], str]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BreakerPolicy:
    failure_threshold: int = 5
    reset_timeout_s: float = 10.0


class ToolExecutor:
    """Runs tool calls for any number of streams; guards are per tool and shared."""

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        cache: TwoLevelCache | None = None,
        metrics: ToolMetrics | None = None,
        max_argument_bytes: int = 64 * 1024,
        breaker: BreakerPolicy = BreakerPolicy(),
        backoff: Callable[[int], float] = full_jitter_backoff,
        unknown_tool: UnknownTool | None = None,
    ) -> None:
        self.registry = registry
        self._cache = cache
        self._metrics = metrics
        self._max_argument_bytes = max_argument_bytes
        self._backoff = backoff
        self._breaker_policy = breaker
        self._unknown_tool = unknown_tool
        self.breakers: dict[str, CircuitBreaker] = {}
        self._bulkheads: dict[str, asyncio.Semaphore] = {}
        for tool in registry:
            self._breaker(tool)
            self._bulkhead(tool)

    def _breaker(self, tool: ToolDefinition) -> CircuitBreaker:
        breaker = self.breakers.get(tool.name)
        if breaker is None:
            breaker = self.breakers[tool.name] = CircuitBreaker(
                failure_threshold=self._breaker_policy.failure_threshold,
                reset_timeout_s=self._breaker_policy.reset_timeout_s,
                on_change=self._breaker_observer(tool.name),
            )
            if self._metrics is not None:
                self._metrics.breaker_state.labels(tool.name).set(BreakerState.CLOSED)
        return breaker

    def _bulkhead(self, tool: ToolDefinition) -> asyncio.Semaphore:
        """The tool's own, or its MCP server's (shared by the server's tools; ":" is in no tool name)."""
        key = f"mcp:{tool.server}" if tool.server else tool.name
        bulkhead = self._bulkheads.get(key)
        if bulkhead is None:
            bulkhead = self._bulkheads[key] = asyncio.Semaphore(tool.max_concurrency)
        return bulkhead

    def _breaker_observer(self, tool: str) -> Callable[[BreakerState], None]:
        def observe(state: BreakerState) -> None:
            log.warning("circuit breaker of tool %s is now %s", tool, state.name)
            if self._metrics is not None:
                self._metrics.breaker_state.labels(tool).set(state)

        return observe

    async def execute(self, request: CallRequest, *, on_progress: ProgressSink | None = None) -> CallOutcome:
        """Run one call through every guard; ``on_progress`` gets the progress its tool reports (never blocks)."""
        start = time.perf_counter()
        tool = self.registry.get(request.tool_name)
        if tool is None:
            down = self._unknown_tool(request.tool_name) if self._unknown_tool is not None else ""
            if down:
                outcome = self._outcome(request, start, CallStatus.UNAVAILABLE, error=down, reason=REASON_UNAVAILABLE)
                return self._record(outcome)
            known = ", ".join(sorted(t.name for t in self.registry.visible_to(request.tenant)))
            outcome = self._outcome(
                request,
                start,
                CallStatus.NOT_FOUND,
                error=f"no tool named {request.tool_name!r} (tools: {known})",
            )
            return self._record(outcome)
        if not tool.allows(request.tenant):
            outcome = self._outcome(
                request,
                start,
                CallStatus.PERMISSION_DENIED,
                error=f"tool {tool.name} is not available to this tenant"
                + (f" (MCP server {tool.server} serves only its allowed tenants)" if tool.server else ""),
                reason=REASON_PERMISSION_DENIED,
            )
            return self._record(outcome, tool)
        if self._metrics is not None:
            self._metrics.in_flight.labels(tool.name).inc()
        progress = PROGRESS.set(on_progress)
        try:
            outcome = await self._execute(tool, request, start)
        except asyncio.CancelledError:
            self._record(self._outcome(request, start, CallStatus.CANCELLED, error="the call was cancelled"), tool)
            raise
        finally:
            PROGRESS.reset(progress)
            if self._metrics is not None:
                self._metrics.in_flight.labels(tool.name).dec()
        return self._record(outcome, tool)

    async def _execute(self, tool: ToolDefinition, request: CallRequest, start: float) -> CallOutcome:
        if len(request.arguments_json.encode()) > self._max_argument_bytes:
            return self._outcome(
                request,
                start,
                CallStatus.INVALID_ARGUMENT,
                error=f"arguments are larger than {self._max_argument_bytes} bytes",
            )
        try:
            args = json.loads(request.arguments_json or "{}")
        except json.JSONDecodeError as exc:
            return self._outcome(
                request, start, CallStatus.INVALID_ARGUMENT, error=f"arguments are not valid JSON: {exc.msg}"
            )
        problem = ToolRegistry.check_arguments(tool, args)
        if problem is not None:
            return self._outcome(
                request,
                start,
                CallStatus.INVALID_ARGUMENT,
                error=f"argument {problem.pointer or '(root)'}: {problem.message}",
                field=problem.pointer,
            )

        use_cache = self._cache is not None and tool.cache_ttl_s > 0 and not request.bypass_cache
        key = cache_key("tool", request.tenant, tool.name, tool.version, args)
        if use_cache:
            assert self._cache is not None
            cached, level = await self._cache.get(key)
            if self._metrics is not None:
                self._metrics.record_cache(tool.name, level)
            if cached is not None:
                output = cached.decode()
                return self._outcome(
                    request, start, CallStatus.OK, output=output, cached=True, summary=_summary(tool, output)
                )

        down = tool.why_unavailable()
        if down:
            return self._outcome(request, start, CallStatus.UNAVAILABLE, error=down, reason=REASON_UNAVAILABLE)
        breaker = self._breaker(tool)
        if not breaker.allow():
            return self._outcome(
                request,
                start,
                CallStatus.UNAVAILABLE,
                error=f"tool {tool.name} is failing; circuit open, retry in {breaker.retry_after_s():.1f} s",
            )

        budget = Deadline.after(request.timeout_s if request.timeout_s is not None else self._default_budget(tool))
        bulkhead = self._bulkhead(tool)
        try:
            async with asyncio.timeout(budget.remaining()):
                await bulkhead.acquire()
        except TimeoutError:
            return self._outcome(
                request,
                start,
                CallStatus.RESOURCE_EXHAUSTED,
                error=f"tool {tool.name} is at its concurrency limit ({tool.max_concurrency})",
            )
        try:
            return await self._attempts(tool, request, args, budget, start, key if use_cache else None)
        finally:
            bulkhead.release()

    @staticmethod
    def _default_budget(tool: ToolDefinition) -> float:
        """Room for every attempt plus backoff when the caller gives no budget."""
        return tool.timeout_s * tool.attempts + 2.0 * (tool.attempts - 1)

    async def _attempts(  # noqa: PLR0917 - private, called once
        self,
        tool: ToolDefinition,
        request: CallRequest,
        args: Any,
        budget: Deadline,
        start: float,
        cache_key_: str | None,
    ) -> CallOutcome:
        breaker = self._breaker(tool)
        status, error = CallStatus.FAILED, ""
        attempt = 0
        for attempt in range(1, tool.attempts + 1):
            left = budget.remaining()
            if left is not None and left <= 0:
                break
            down = tool.why_unavailable()
            if down:  # went down between attempts
                return self._outcome(
                    request, start, CallStatus.UNAVAILABLE, error=down, attempts=attempt - 1, reason=REASON_UNAVAILABLE
                )
            try:
                async with asyncio.timeout(min(tool.timeout_s, left) if left is not None else tool.timeout_s):
                    result = await tool.fn(args)
                output = canonical_json(result)
            except ToolError as exc:
                breaker.record_success()  # the tool works; this input does not
                return self._outcome(
                    request, start, CallStatus.FAILED, error=str(exc), attempts=attempt, reason=exc.reason
                )
            except ToolUnavailable as exc:
                return self._outcome(
                    request, start, CallStatus.UNAVAILABLE, error=str(exc), attempts=attempt, reason=REASON_UNAVAILABLE
                )
            except TimeoutError:
                breaker.record_failure()
                status, error = CallStatus.TIMEOUT, f"tool {tool.name} timed out after {tool.timeout_s:g} s"
            except (TypeError, ValueError) as exc:  # unserialisable output or a bug in the tool
                breaker.record_failure()
                log.exception("tool %s failed", tool.name)
                status, error = CallStatus.FAILED, f"tool {tool.name} failed: {type(exc).__name__}"
            except Exception as exc:
                breaker.record_failure()
                log.warning("tool %s attempt %d failed: %r", tool.name, attempt, exc)
                status, error = (
                    CallStatus.FAILED,
                    f"tool {tool.name} failed: {type(exc).__name__}: {exc}"[:500],
                )
            else:
                breaker.record_success()
                if cache_key_ is not None and self._cache is not None:
                    await self._cache.set(cache_key_, output.encode(), tool.cache_ttl_s)
                return self._outcome(
                    request, start, CallStatus.OK, output=output, attempts=attempt, summary=_summary(tool, output)
                )
            if attempt < tool.attempts:
                if not breaker.allow():
                    break
                delay = self._backoff(attempt)
                left = budget.remaining()
                if left is not None and delay >= left:
                    break
                if self._metrics is not None:
                    self._metrics.retries.labels(tool.name).inc()
                await asyncio.sleep(delay)
        return self._outcome(request, start, status, error=error, attempts=attempt)

    @staticmethod
    def _outcome(
        request: CallRequest,
        start: float,
        status: CallStatus,
        *,
        output: str = "",
        error: str = "",
        field: str = "",
        cached: bool = False,
        attempts: int = 0,
        summary: str = "",
        reason: str = "",
    ) -> CallOutcome:
        return CallOutcome(
            call_id=request.call_id,
            tool_name=request.tool_name,
            status=status,
            output_json=output,
            error_message=error,
            error_field=field,
            latency_s=time.perf_counter() - start,
            cached=cached,
            attempts=attempts,
            summary=summary,
            reason=reason,
        )

    def _record(self, outcome: CallOutcome, tool: ToolDefinition | None = None) -> CallOutcome:
        if self._metrics is not None:
            self._metrics.calls.labels(outcome.tool_name, outcome.status.value).inc()
            self._metrics.latency.labels(outcome.tool_name).observe(outcome.latency_s)
            if outcome.status is not CallStatus.OK:
                self._metrics.errors.labels(outcome.tool_name, outcome.status.value).inc()
            if tool is not None and tool.server:
                self._metrics.record_mcp_call(tool.server, outcome.tool_name, outcome.status.value, outcome.latency_s)
        return outcome


def _summary(tool: ToolDefinition, output_json: str) -> str:
    """The tool's one-sentence statement of its output; a summarizer bug costs the sentence, not the call."""
    if tool.summarize is None:
        return ""
    try:
        return tool.summarize(json.loads(output_json))
    except Exception:
        log.exception("summarizer of tool %s failed", tool.name)
        return ""
