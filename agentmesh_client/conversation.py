"""A session on one Converse stream, and its turns as async iterators of typed events.

``Conversation`` owns the bidirectional call (opened at the first turn, reopened after a failure with the
session id it learned) and runs one turn at a time; with ``create``, its turns ask the server to create the
session under the caller's id (``StartTurn.create_session``) until one is accepted. ``Turn`` sends its
StartTurn when first iterated and yields events until that turn's ``TurnCompleted``: every StartTurn ends
with exactly one, cancelled, timed out, rejected and failed turns included, so a finished turn leaves the
stream ready for the next.

- A turn rejected before it started (rate limit, shedding, a gateway with no router) is sent again, same
  turn id, after the server's pushback, as ``RetryPolicy`` allows; the last rejection is the turn's
  ``TurnCompleted`` with ``error`` set. A failure after ``TurnStarted`` is never retried.
- ``Turn.cancel()`` may be called from another task while the turn is iterated: it sends CancelTurn and
  drops the turn's later text; the turn still ends with its ``TurnCompleted`` (``aborted``).
- A read is never cancelled to stop waiting (in grpc.aio that cancels the whole call): leaving the loop
  early cancels the turn and drains it to its end; a consumer task that is itself cancelled takes the call
  down with it, and the next turn opens a new stream on the same session.
- A failure that ends the stream (UNAUTHENTICATED, a server shutdown) raises the taxonomy's exception.
- A turn with client tools yields ``ClientToolCalls`` and waits for their results: sent by its
  ``tool_handler`` as the event arrives, or by the caller with ``submit_tool_results``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import grpc
import grpc.aio

from agentmesh.agent.v1 import agent_pb2
from agentmesh_client.client_tools import ClientToolResult, ToolHandler, run_calls
from agentmesh_client.events import ClientToolCalls, TextDelta, TurnCompleted, TurnEvent, TurnStarted, turn_event_of
from agentmesh_client.retry import RetryPolicy, error_of_call
from services.runtime.deadline import Deadline
from services.runtime.errors import AgentMeshError, FailedPrecondition, ResourceExhausted, Unavailable

ConverseCall = grpc.aio.StreamStreamCall[agent_pb2.ConverseRequest, agent_pb2.ConverseResponse]
OpenCall = Callable[[float | None], ConverseCall]
#: How long leaving a turn early waits for its TurnCompleted before giving up on the stream.
DRAIN_WAIT_S = 5.0


class Conversation:
    """One session, one Converse stream (see module docstring). Use ``async with`` or call ``close()``."""

    def __init__(
        self, open_call: OpenCall, retry: RetryPolicy, session_id: str, deadline: Deadline, *, create: bool = False
    ) -> None:
        self._open = open_call
        self._retry = retry
        self._deadline = deadline
        self._call: ConverseCall | None = None
        self._active: Turn | None = None
        self.session_id = session_id
        #: Whether a turn of the session was accepted (TurnStarted) on this conversation: it exists.
        self.accepted = False
        self._create = create and bool(session_id)

    @property
    def create(self) -> bool:
        """Whether the next turn asks to create the session ``session_id`` (until one is accepted)."""
        return self._create and not self.accepted

    async def __aenter__(self) -> Conversation:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def turn(
        self,
        message: str,
        *,
        start: agent_pb2.StartTurn | None = None,
        turn_id: str = "",
        tool_handler: ToolHandler | None = None,
    ) -> Turn:
        """A turn saying ``message``; ``start`` carries the other StartTurn fields (see ``AgentClient.turn``);
        ``tool_handler`` runs the calls of its client tools (``services/router/turn/client_tools.py``)."""
        request = agent_pb2.StartTurn()
        if start is not None:
            request.CopyFrom(start)
        request.message = message
        request.turn_id = turn_id or request.turn_id or uuid.uuid4().hex
        return Turn(self, request, tool_handler)

    async def close(self) -> None:
        """End the stream politely (half-close), cancelling it if the server does not finish promptly."""
        call, self._call = self._call, None
        if call is None or call.done():
            return
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            await call.done_writing()
        call.cancel()

    # -- used by Turn ----------------------------------------------------------

    async def _begin(self, turn: Turn) -> ConverseCall:
        if self._active is not None and self._active is not turn and not self._active.finished:
            await self._active.aclose()
        self._active = turn
        if self._call is None or self._call.done():
            self._call = self._open(self._deadline.timeout())
        turn.start.session_id = self.session_id or turn.start.session_id
        turn.start.create_session = self.create or turn.start.create_session
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):  # the read reports why
            await self._call.write(agent_pb2.ConverseRequest(start_turn=turn.start))
        return self._call

    def _broken(self) -> None:
        """The stream failed or was cancelled: the next turn opens a new one."""
        if self._call is not None:
            self._call.cancel()
        self._call = None


@dataclass
class TurnResult:
    """A whole turn, gathered: what ``Turn.collect()`` returns."""

    events: Sequence[TurnEvent]
    completed: TurnCompleted

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def session_id(self) -> str:
        return next((e.session_id for e in self.events if isinstance(e, TurnStarted)), "")


class Turn:
    """One turn's events, as an async iterator (see module docstring)."""

    def __init__(
        self, conversation: Conversation, start: agent_pb2.StartTurn, tool_handler: ToolHandler | None = None
    ) -> None:
        self._conversation = conversation
        self.start = start
        self._handler = tool_handler
        self._handling: set[asyncio.Task[None]] = set()
        self.finished = False
        #: The turn's TurnCompleted, once it has been yielded.
        self.completed: TurnCompleted | None = None
        self._cancelled = False
        self._call: ConverseCall | None = None
        self._events: AsyncIterator[TurnEvent] | None = None

    @property
    def turn_id(self) -> str:
        return self.start.turn_id

    def __aiter__(self) -> AsyncIterator[TurnEvent]:
        if self._events is None:
            self._events = self._run()
        return self._events

    async def collect(self) -> TurnResult:
        """Every event of the turn; raises the turn's error when it was rejected or failed."""
        events = [event async for event in self]
        completed = events[-1]
        assert isinstance(completed, TurnCompleted)
        if completed.error is not None:
            raise completed.error
        return TurnResult(events, completed)

    async def cancel(self) -> None:
        """Ask the server to cancel this turn (once); it still ends with its TurnCompleted."""
        if self._cancelled or self.finished:
            return
        self._cancelled = True
        if self._call is not None and not self._call.done():
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                await self._call.write(
                    agent_pb2.ConverseRequest(cancel_turn=agent_pb2.CancelTurn(turn_id=self.turn_id))
                )

    async def submit_tool_results(self, results: Sequence[ClientToolResult]) -> None:
        """Send the results of client tool calls this turn is waiting for (``ClientToolCalls``)."""
        if self._call is None or self._call.done() or self.finished:
            raise FailedPrecondition("the turn is not running; results can only go to a turn that waits for them")
        request = agent_pb2.SubmitToolResults(turn_id=self.turn_id, results=[r.to_proto() for r in results])
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):  # the read reports why
            await self._call.write(agent_pb2.ConverseRequest(tool_results=request))

    async def _handle(self, calls: ClientToolCalls) -> None:
        """Run ``calls`` through the turn's handler and send the results back."""
        assert self._handler is not None
        results = await run_calls(self._handler, calls.calls)
        if not self.finished:
            await self.submit_tool_results(results)

    async def aclose(self) -> None:
        """Stop early: cancel the turn and read it to its end, so the stream can carry the next one."""
        if self.finished:
            return
        if self._events is None or self._call is None:
            self.finished = True
            return
        await self.cancel()
        try:
            async with asyncio.timeout(DRAIN_WAIT_S):
                async for _ in self._events:
                    pass
        except Exception:  # a timeout or a failed stream: the next turn opens a new one
            self._conversation._broken()
            self.finished = True

    async def _run(self) -> AsyncIterator[TurnEvent]:
        attempt = 0
        try:
            while True:
                started = False
                call = self._call = await self._conversation._begin(self)
                while True:
                    try:
                        message = await self._read(call)
                    except (ResourceExhausted, Unavailable) as error:
                        wait = None if started else self._retry_delay(error, attempt)
                        if wait is None:
                            raise
                        self._conversation._broken()
                        await asyncio.sleep(wait)
                        attempt += 1
                        break
                    event = turn_event_of(message)
                    if isinstance(event, TurnStarted):
                        started = True
                        self._conversation.session_id = event.session_id
                        self._conversation.accepted = True  # it exists now: later turns continue it
                    if isinstance(event, TextDelta) and (self._cancelled or event.turn_id != self.turn_id):
                        continue  # late text of a cancelled turn, or of an earlier one
                    if isinstance(event, TurnCompleted) and event.turn_id == self.turn_id:
                        wait = None if started or event.error is None else self._retry_delay(event.error, attempt)
                        if wait is None:
                            self.finished = True
                            self.completed = event
                            yield event
                            return
                        await asyncio.sleep(wait)
                        attempt += 1
                        break
                    if isinstance(event, ClientToolCalls) and self._handler is not None:
                        task = asyncio.create_task(self._handle(event))
                        self._handling.add(task)
                        task.add_done_callback(self._handling.discard)
                    if event is not None and not isinstance(event, TurnCompleted):
                        yield event
        except BaseException:
            if not self.finished:
                self._conversation._broken()
            raise
        finally:
            self.finished = True
            for task in list(self._handling):
                task.cancel()

    def _retry_delay(self, error: AgentMeshError, attempt: int) -> float | None:
        conversation = self._conversation
        return conversation._retry.delay(error, attempt, conversation._deadline.remaining())

    async def _read(self, call: ConverseCall) -> agent_pb2.ConverseResponse:
        try:
            message = await call.read()
        except grpc.aio.AioRpcError as exc:
            raise error_of_call(exc) from None
        if message is grpc.aio.EOF:
            raise Unavailable("the server closed the stream before the turn completed")
        assert isinstance(message, agent_pb2.ConverseResponse)
        return message
