"""One Converse stream on the router: turns one at a time, each ending with exactly one TurnCompleted.

The reading is the shared runtime's (``services/runtime/converse_loop.py``),
which keeps reading while a turn runs in its own task, so a CancelTurn (or the
client going away) reaches it; this file is the router's side of it. How a turn ends decides its last
event, and the stream stays open after every one of them:

- answered: the agent loop's TurnCompleted (STOP or LENGTH), or TOOL_CALLS for a
  turn that ends at its client tool calls (the results of those it waits for
  arrive as SubmitToolResults, handed to the turn's mailbox);
- CancelTurn: the task is cancelled (the generation is aborted on its replica,
  tool calls in flight are cancelled), then TurnCompleted ABORTED with the
  usage so far;
- the turn's own ``timeout`` runs out: TurnCompleted ABORTED with a
  DEADLINE_EXCEEDED status;
- rejected (invalid StartTurn) or failed (no replica, a downstream error):
  TurnCompleted ERROR with the error's google.rpc.Status — the same status and
  rich details the error would have ended the stream with.

A StartTurn while a turn runs is a protocol error and ends the stream
(FAILED_PRECONDITION) — but a turn whose TurnCompleted has gone out has
ended for the client, and the next StartTurn waits for its task to finish
closing. A client that goes away cancels the turn; nothing is
sent then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import grpc.aio
from redis.exceptions import RedisError

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.router.serving.convert import completed
from services.router.turn.agent_loop import AgentLoop, TurnRequest
from services.router.turn.progress import TurnProgress
from services.runtime.context import DEADLINE, current_request_id
from services.runtime.converse_loop import read_converse
from services.runtime.deadline import Deadline
from services.runtime.errors import AgentMeshError, DeadlineExceeded, FailedPrecondition, to_rpc_status
from services.runtime.interceptors.errors import from_downstream, from_store

log = logging.getLogger(__name__)

Send = Callable[[agent_pb2.ConverseResponse], Awaitable[None]]
#: Raises for a StartTurn the tenant (the second argument) may not start.
Validate = Callable[[agent_pb2.StartTurn, str], Awaitable[None]]


class ConverseStream:
    """The router's side of ``read_converse``: in, the client's requests; out, every turn's events through ``send``."""

    def __init__(self, loop: AgentLoop, validate: Validate, tenant: str, send: Send) -> None:
        self._loop = loop
        self._validate = validate
        self._tenant = tenant
        self._send = send
        self._turn: asyncio.Task[None] | None = None
        self._progress = TurnProgress("")

    async def run(self, requests: AsyncIterator[agent_pb2.ConverseRequest]) -> None:
        await read_converse(requests, self)

    def running(self) -> asyncio.Task[None] | None:
        return self._turn

    async def work_ended(self, work: asyncio.Task[None]) -> bool:
        await self._end(work)
        return False

    async def start_turn(self, request: agent_pb2.ConverseRequest) -> None:
        if self._turn is not None and self._progress.completed:
            # Its TurnCompleted is out, so for the client it has ended: the next StartTurn may arrive while the
            # task still closes its generators. Wait for that (it sends nothing more), then start the next.
            await asyncio.wait({self._turn})
            await self._end(self._turn)
        if self._turn is not None:
            raise FailedPrecondition("a turn is already running on this stream; cancel it first")
        self._progress = TurnProgress(request.start_turn.turn_id or uuid.uuid4().hex)
        self._turn = asyncio.create_task(self._run_turn(request.start_turn, self._progress))

    async def cancel_turn(self, request: agent_pb2.ConverseRequest) -> None:
        wanted = request.cancel_turn.turn_id
        if self._turn is not None and (not wanted or wanted == self._progress.turn_id):
            self._turn.cancel()
            await asyncio.wait({self._turn})
            await self._end(self._turn)

    async def submit_tool_results(self, request: agent_pb2.ConverseRequest) -> None:
        """Hand the results to the running turn's mailbox; results for another turn, or none waiting, are dropped."""
        wanted = request.tool_results.turn_id
        mailbox = self._progress.client_calls
        if self._turn is None or mailbox is None or (wanted and wanted != self._progress.turn_id):
            log.info("client tool results for turn %r with no such turn waiting; dropped", wanted)
            return
        mailbox.deliver(request.tool_results)

    async def half_closed(self) -> None:
        if self._turn is not None:
            await asyncio.wait({self._turn})
            await self._end(self._turn)

    async def close(self, *, clean: bool) -> None:
        if self._turn is not None:  # the client went away (or the stream failed): nobody to tell
            self._turn.cancel()
            await asyncio.gather(self._turn, return_exceptions=True)

    async def _run_turn(self, start: agent_pb2.StartTurn, progress: TurnProgress) -> None:
        """Validate and run one turn, sending its events; its TurnCompleted is sent at most once."""
        await self._validate(start, self._tenant)
        turn_start = agent_pb2.StartTurn()
        turn_start.CopyFrom(start)
        turn_start.turn_id = progress.turn_id
        timeout = start.timeout.ToNanoseconds() / 1e9 if start.HasField("timeout") else None
        turn = self._loop.run(TurnRequest(self._tenant, turn_start, current_request_id()), progress)
        # Closed here, in this task, however the loop ends: a cancel that lands in ``send`` would otherwise
        # leave the turn's generators suspended inside their spans, to be closed by the garbage collector in
        # another task (OpenTelemetry: "Failed to detach context ... created in a different Context"), and
        # the generation below them would be aborted only then.
        with _turn_deadline(timeout):
            async with asyncio.timeout(timeout), contextlib.aclosing(turn) as events:
                async for event in events:
                    if event.HasField("turn_completed"):
                        progress.completed = True
                        await _send_whole(self._send(event))
                    else:
                        await self._send(event)

    async def _end(self, turn: asyncio.Task[None]) -> None:
        """The turn stopped: send its TurnCompleted if it stopped before sending its own."""
        self._turn = None
        progress = self._progress
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


async def _send_whole(sending: Awaitable[None]) -> None:
    """Send the turn's last event even if the turn is cancelled meanwhile, so it never goes half sent.

    A cancel that interrupts the wait (the client went away) leaves the send to finish on its own; its
    failure then has nobody to tell, and is retrieved here rather than logged as never retrieved.
    """
    task = asyncio.ensure_future(sending)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        raise


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
