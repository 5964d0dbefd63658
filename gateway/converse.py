"""One client Converse stream relayed to one router, with admission and token charges per turn.

Every StartTurn takes an admission ticket (after the tenant's rate limit) and
is forwarded with a turn id — the client's, or one the gateway chooses — so
the router's TurnCompleted for that turn (which every StartTurn ends with,
cancelled and failed turns included) names the ticket to give back. Tickets
are keyed by turn id, never by arrival order: a cancelled turn frees its slot
when its TurnCompleted (ABORTED) arrives, and its usage so far is charged to
the tenant like any other turn's. A turn refused by the rate limit or shed by
admission ends with a TurnCompleted carrying that status, and the stream stays
open.

The relay does not re-serialize: router events reach the client as the
router's bytes; only TurnCompleted is decoded (found by its leading field tag).
When the client goes away mid-turn, the relay cancels the turns still running
on the router and waits briefly for their TurnCompleted, so their usage is
charged and their slots freed, before closing the router stream.

The reading of the client's requests is the shared runtime's
(``services/runtime/converse_loop.py``, as on the router); ``ConverseRelay``
is the gateway's side of it: what a StartTurn, a CancelTurn, a half-close and
the end of the router's stream mean here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import grpc.aio
from google.protobuf import duration_pb2
from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from gateway.admission import Ticket
from gateway.routers import RouterPool
from gateway.turn_tickets import TurnTickets
from services.runtime.context import current_request_id
from services.runtime.converse_loop import read_converse
from services.runtime.deadline import downstream_timeout
from services.runtime.errors import AgentMeshError, ResourceExhausted, Unavailable, to_rpc_status
from services.runtime.interceptors.tracing import end_client_span, start_client_span
from services.runtime.status_decode import rich_error_of

log = logging.getLogger(__name__)

#: The first byte of a serialized ConverseResponse whose event is turn_completed (field 5, length-delimited).
TURN_COMPLETED_TAG = bytes([(5 << 3) | 2])
#: How long a stream whose client left waits for the router's TurnCompleted of its cancelled turns.
CANCEL_WAIT_S = 5.0
#: Retry hint given when a router dies under a stream (the restart or failover takes about this long).
ROUTER_LOST_RETRY_S = 1.0
CONVERSE = f"/{agent_pb2.DESCRIPTOR.services_by_name['AgentService'].full_name}/Converse"

Send = Callable[[bytes], Awaitable[None]]
Admit = Callable[[str, common_pb2.Priority.ValueType], Awaitable[Ticket]]
Finish = Callable[[str, Ticket | None, common_pb2.Usage, float | None], Awaitable[None]]
Release = Callable[[Ticket], None]
#: The stream to the router: requests as protos, responses as the router's bytes.
RouterCall = grpc.aio.StreamStreamCall[agent_pb2.ConverseRequest, bytes]


def raw(data: bytes) -> bytes:
    """The identity (de)serializer: relayed messages stay the router's bytes."""
    return data


def encode(request: agent_pb2.ConverseRequest) -> bytes:
    """The request serializer, typed for the request (the relay writes StartTurn, CancelTurn and SubmitToolResults)."""
    return request.SerializeToString()


class RouterFailed(Exception):
    """A router call failed; carries the status to pass to the client."""

    def __init__(self, error: grpc.aio.AioRpcError) -> None:
        super().__init__(error.details())
        self.error = error


def ttft_of(duration: duration_pb2.Duration) -> float | None:
    seconds = duration.ToNanoseconds() / 1e9
    return seconds if seconds > 0 else None


class ConverseRelay:
    """The gateway's side of ``read_converse``: relays one Converse stream (see module docstring).

    ``send`` writes bytes to the client; ``admit``, ``finish`` and ``release`` are the gateway's policy.
    """

    def __init__(
        self,
        routers: RouterPool,
        tenant: str,
        metadata: tuple[tuple[str, str], ...],
        *,
        send: Send,
        admit: Admit,
        finish: Finish,
        release: Release,
        tracer: trace.Tracer | None = None,
    ) -> None:
        """``tracer``: the CLIENT span of the router stream (the router channels carry no tracing interceptors)."""
        self._routers = routers
        self._tracer = tracer
        self._span: trace.Span | None = None
        self._span_code = grpc.StatusCode.CANCELLED  # until the router's stream ends
        self._tenant = tenant
        self._metadata = metadata
        self._send = send
        self._admit = admit
        self._finish = finish
        self._release = release
        self._tickets = TurnTickets()
        self._client_gone = False
        self._downstream: RouterCall | None = None
        self._pump: asyncio.Task[None] | None = None

    async def _to_client(self, data: bytes) -> None:
        """Write to the client; once it is gone, keep relaying nothing but keep reading the router."""
        if self._client_gone:
            return
        try:
            await self._send(data)
        except Exception as exc:  # a write to a cancelled call: the client left, its turns still end
            log.debug("client write failed (%r); the stream's turns are being ended", exc)
            self._client_gone = True

    async def run(self, requests: AsyncIterator[agent_pb2.ConverseRequest]) -> None:
        await read_converse(requests, self)

    def running(self) -> asyncio.Task[None] | None:
        return self._pump

    async def work_ended(self, work: asyncio.Task[None]) -> bool:
        work.result()  # the router ended the stream: pass its status on (or finish cleanly)
        return True

    async def start_turn(self, request: agent_pb2.ConverseRequest) -> None:
        start = request.start_turn
        if not start.turn_id:
            start.turn_id = uuid.uuid4().hex  # the key of the turn's ticket, echoed by the router
        if not await self._take_ticket(start):
            return
        if self._downstream is None:
            self._downstream, accepted = await self._open(request)
            await self._check_first(accepted)
            await self._to_client(accepted)
            self._pump = asyncio.create_task(self._relay(self._downstream))
        else:
            await self._downstream.write(request)

    async def cancel_turn(self, request: agent_pb2.ConverseRequest) -> None:
        if self._downstream is not None:
            await self._downstream.write(request)

    async def submit_tool_results(self, request: agent_pb2.ConverseRequest) -> None:
        """Client tool results go to the router as they are, like a CancelTurn (the turn waiting there reads them)."""
        if self._downstream is not None:
            await self._downstream.write(request)

    async def half_closed(self) -> None:
        if self._downstream is not None:
            await self._downstream.done_writing()
        if self._pump is not None:
            await self._pump

    async def close(self, *, clean: bool) -> None:
        if not clean:
            await self._cancel_running()
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        if self._downstream is not None:
            self._downstream.cancel()
        if self._span is not None:
            end_client_span(self._span, self._span_code)
            self._span = None
        for ticket in self._tickets.drain():
            self._release(ticket)

    async def _take_ticket(self, start: agent_pb2.StartTurn) -> bool:
        """Rate limit and admit the turn; a refusal ends the turn in band (the stream goes on)."""
        try:
            ticket = await self._admit(self._tenant, start.priority)
        except (ResourceExhausted, Unavailable) as refused:
            await self._to_client(_refused(start.turn_id, refused))
            return False
        self._tickets.add(start.turn_id, ticket)
        return True

    async def _check_first(self, first: bytes) -> None:
        """A first turn the router refused (TurnCompleted at once) gives its ticket back here."""
        if first[:1] == TURN_COMPLETED_TAG:
            await self._completed(first)

    async def _cancel_running(self) -> None:
        """The client left mid-turn: cancel its turns on the router and wait for their TurnCompleted."""
        self._client_gone = True
        downstream, pump = self._downstream, self._pump
        if downstream is None or pump is None or pump.done() or not self._tickets.turn_ids():
            return
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError, RuntimeError):
            for turn_id in self._tickets.turn_ids():
                await downstream.write(agent_pb2.ConverseRequest(cancel_turn=agent_pb2.CancelTurn(turn_id=turn_id)))
            await downstream.done_writing()
        await asyncio.wait({pump}, timeout=CANCEL_WAIT_S)

    async def _open(self, first: agent_pb2.ConverseRequest) -> tuple[RouterCall, bytes]:
        """Open a stream on the session's router, failing over until one answers the first turn."""
        key = first.start_turn.session_id or uuid.uuid4().hex
        last: grpc.aio.AioRpcError | None = None
        order = self._routers.order(key)
        if not order:
            raise Unavailable("no router is available", retry_after_s=1.0)
        for target in order:
            converse = self._routers.channel(target).stream_stream(
                CONVERSE, request_serializer=encode, response_deserializer=raw
            )
            span, metadata = start_client_span(self._tracer, CONVERSE, self._metadata)
            call = converse(metadata=metadata, timeout=downstream_timeout())
            try:
                accepted = await _first_reply(call, first)
            except BaseException as exc:
                if span is not None:
                    code = exc.code() if isinstance(exc, grpc.aio.AioRpcError) else grpc.StatusCode.CANCELLED
                    end_client_span(span, code)
                if not isinstance(exc, grpc.aio.AioRpcError):
                    raise
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    raise RouterFailed(exc) from None
                log.warning("router %s unavailable before the turn started; trying the next", target)
                self._routers.mark_down(target)
                last = exc
                continue
            self._span = span
            return call, accepted
        assert last is not None
        raise RouterFailed(last)

    async def _relay(self, downstream: RouterCall) -> None:
        """The router's events to the client, as the router's bytes; a TurnCompleted also settles its turn."""
        try:
            while isinstance(event := await downstream.read(), bytes):  # else EOF: the router ended the stream
                if event[:1] == TURN_COMPLETED_TAG:  # the one message per turn decoded
                    # Settled before the client hears of it: a client that starts its next turn on
                    # TurnCompleted finds the slot free and the finished turn's tokens charged.
                    await self._completed(event)
                await self._to_client(event)
            self._span_code = grpc.StatusCode.OK
        except grpc.aio.AioRpcError as exc:
            self._span_code = exc.code()
            if exc.code() == grpc.StatusCode.CANCELLED:
                return
            if exc.code() == grpc.StatusCode.UNAVAILABLE and rich_error_of(exc).retry_after_s is None:
                # The router died mid-stream ("Socket closed"; its own refusals carry retry info): say
                # when to retry. A retried turn id runs at most once (the session records it).
                raise Unavailable(
                    "the router serving this stream went away; retry the turn with the same turn id",
                    retry_after_s=ROUTER_LOST_RETRY_S,
                ) from None
            raise RouterFailed(exc) from None

    async def _completed(self, event: bytes) -> None:
        done = agent_pb2.ConverseResponse.FromString(event).turn_completed
        ticket = self._tickets.pop(done.turn_id)
        if ticket is None:
            log.warning("TurnCompleted for turn %s, which holds no ticket on this stream", done.turn_id)
        await self._finish(self._tenant, ticket, done.usage, ttft_of(done.time_to_first_token))


async def _first_reply(call: RouterCall, first: agent_pb2.ConverseRequest) -> bytes:
    """The router's answer to the stream's first StartTurn; a call that ended first raises with its status."""
    try:
        await call.write(first)
        reply = await call.read()
    except asyncio.InvalidStateError:  # the call ended before the write: a dead router's connection
        reply = grpc.aio.EOF
    if isinstance(reply, bytes):
        return reply
    code, details = await call.code(), await call.details()
    raise grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


def _refused(turn_id: str, error: AgentMeshError) -> bytes:
    """The TurnCompleted of a turn the gateway refused, with the refusal's status."""
    done = agent_pb2.TurnCompleted(
        turn_id=turn_id,
        finish_reason=common_pb2.FINISH_REASON_ERROR,
        status=to_rpc_status(error, current_request_id()).SerializeToString(),
    )
    return agent_pb2.ConverseResponse(turn_completed=done).SerializeToString()
