"""One Converse stream on the router: turns one at a time, each ending with exactly one TurnCompleted.

The stream keeps reading while a turn runs in its own task, so a CancelTurn
(or the client going away) reaches it. How a turn ends decides its last
event, and the stream stays open after every one of them:

- answered: the agent loop's TurnCompleted (STOP or LENGTH);
- CancelTurn: the task is cancelled (the generation is aborted on its replica,
  tool calls in flight are cancelled), then TurnCompleted ABORTED with the
  usage so far;
- the turn's own ``timeout`` runs out: TurnCompleted ABORTED with a
  DEADLINE_EXCEEDED status;
- rejected (invalid StartTurn) or failed (no replica, a downstream error):
  TurnCompleted ERROR with the error's google.rpc.Status — the same status and
  rich details the error would have ended the stream with.

A StartTurn while a turn runs is a protocol error and ends the stream
(FAILED_PRECONDITION). A client that goes away cancels the turn; nothing is
sent then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import grpc.aio
from redis.exceptions import RedisError

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.router.agent_loop import AgentLoop, TurnRequest
from services.router.turn_events import TurnProgress, completed
from services.runtime.context import DEADLINE, current_request_id
from services.runtime.deadline import Deadline
from services.runtime.errors import AgentMeshError, DeadlineExceeded, FailedPrecondition, to_rpc_status
from services.runtime.interceptors.errors import from_downstream, from_store

log = logging.getLogger(__name__)

Send = Callable[[agent_pb2.ConverseResponse], Awaitable[None]]
Validate = Callable[[agent_pb2.StartTurn], Awaitable[None]]


class ConverseStream:
    """Drives one Converse stream: in, the client's requests; out, every turn's events through ``send``."""

    def __init__(self, loop: AgentLoop, validate: Validate, tenant: str, send: Send) -> None:
        self._loop = loop
        self._validate = validate
        self._tenant = tenant
        self._send = send

    async def run(self, requests: AsyncIterator[agent_pb2.ConverseRequest]) -> None:
        reading = requests.__aiter__()
        next_request: asyncio.Future[agent_pb2.ConverseRequest] = asyncio.ensure_future(reading.__anext__())
        turn: asyncio.Task[None] | None = None
        progress: TurnProgress | None = None
        try:
            while True:
                waits: set[asyncio.Future[Any]] = {next_request} if turn is None else {next_request, turn}
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if turn is not None and turn in done:
                    assert progress is not None
                    await self._end(turn, progress)
                    turn = progress = None
                if next_request not in done:
                    continue
                try:
                    request = next_request.result()
                except StopAsyncIteration:
                    if turn is not None and progress is not None:
                        await asyncio.wait({turn})
                        await self._end(turn, progress)
                    return
                next_request = asyncio.ensure_future(reading.__anext__())
                action = request.WhichOneof("action")
                if action == "start_turn":
                    if turn is not None:
                        raise FailedPrecondition("a turn is already running on this stream; cancel it first")
                    progress = TurnProgress(request.start_turn.turn_id or uuid.uuid4().hex)
                    turn = asyncio.create_task(self._run_turn(request.start_turn, progress))
                elif action == "cancel_turn" and turn is not None and progress is not None:
                    wanted = request.cancel_turn.turn_id
                    if not wanted or wanted == progress.turn_id:
                        turn.cancel()
                        await asyncio.wait({turn})
                        await self._end(turn, progress)
                        turn = progress = None
        finally:
            next_request.cancel()
            if turn is not None:  # the client went away (or the stream failed): nobody to tell
                turn.cancel()
                await asyncio.gather(turn, return_exceptions=True)

    async def _run_turn(self, start: agent_pb2.StartTurn, progress: TurnProgress) -> None:
        """Validate and run one turn, sending its events; its TurnCompleted is sent at most once."""
        await self._validate(start)
        turn_start = agent_pb2.StartTurn()
        turn_start.CopyFrom(start)
        turn_start.turn_id = progress.turn_id
        timeout = start.timeout.ToNanoseconds() / 1e9 if start.HasField("timeout") else None
        with _turn_deadline(timeout):
            async with asyncio.timeout(timeout):
                events = self._loop.run(TurnRequest(self._tenant, turn_start, current_request_id()), progress)
                async for event in events:
                    if event.HasField("turn_completed"):
                        progress.completed = True
                        # Shielded: a cancel racing the last event must not leave it half sent.
                        await asyncio.shield(self._send(event))
                    else:
                        await self._send(event)

    async def _end(self, turn: asyncio.Task[None], progress: TurnProgress) -> None:
        """Send the TurnCompleted of a turn that stopped before sending its own."""
        if progress.completed:
            if not turn.cancelled() and turn.exception() is not None:
                log.warning("turn %s failed after completing: %r", progress.turn_id, turn.exception())
            return
        progress.completed = True
        if turn.cancelled():
            await self._send(completed(progress, common_pb2.FINISH_REASON_ABORTED))
            return
        error = _as_mesh_error(turn.exception(), progress.turn_id)
        timed_out = isinstance(error, DeadlineExceeded)
        reason = common_pb2.FINISH_REASON_ABORTED if timed_out else common_pb2.FINISH_REASON_ERROR
        status = to_rpc_status(error, current_request_id())
        await self._send(completed(progress, reason, status=status))


def _as_mesh_error(exc: BaseException | None, turn_id: str) -> AgentMeshError:
    """What the client is told about a turn that ended with ``exc`` (None: ended without a TurnCompleted)."""
    if isinstance(exc, AgentMeshError) and type(exc) is not AgentMeshError:
        return exc
    if isinstance(exc, TimeoutError):
        return DeadlineExceeded("the turn ran past its timeout")
    if isinstance(exc, grpc.aio.AioRpcError):
        log.warning("turn %s: downstream call failed: %s %s", turn_id, exc.code().name, exc.details())
        return from_downstream(exc)
    if isinstance(exc, RedisError):
        return from_store(exc)
    log.error("turn %s failed", turn_id, exc_info=exc)
    return AgentMeshError("internal error")


@contextlib.contextmanager
def _turn_deadline(timeout: float | None) -> Iterator[None]:
    """Downstream calls of the turn get the sooner of the stream's and the turn's deadline."""
    if timeout is None:
        yield
        return
    token = DEADLINE.set(Deadline.current().earliest(Deadline.after(timeout)).expires_at)
    try:
        yield
    finally:
        DEADLINE.reset(token)
