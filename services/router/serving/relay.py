"""The router's end of a gateway's Relay stream: many Complete requests on one call, their events batched.

Data flow::

    gateway ──start/cancel──▶ RelaySession.received ──task per id──▶ complete_events(request)
    gateway ◀──RelayFrames── writer task (one message per loop turn) ◀── pending events by id ◀┘

Why: a Complete of its own costs the gateway a client call and the router a
server call — HTTP/2 stream, headers, the interceptor chain, a task per call —
and each relayed message costs both a read/write pair. On one stream a request
costs a message, and the events of every request that advanced in the same
loop turn leave in one message (the generator's flush ticks are aligned across
requests, ``runtime/flush.py``, so at a steady cadence they do).

What a call of its own gets from metadata and the interceptor chain, a relayed
request gets from its ``RelayStart``, per request (the stream outlives any one
of them): the tenant (same rules, UNAUTHENTICATED when missing or invalid), the
request id, the deadline (enforced here, inherited downstream), a SERVER span
named like the Complete RPC, child of the gateway's span, and the same RPC
metrics as a Complete call. Its failure is mapped to a status exactly as a
call's would be (``as_status_error``) and sent as the request's last frame; the
stream and its other requests go on. The per-id dispatch, cancellation and
half-close are ``runtime/mux_server.py``'s.

The Relay method itself is open to the tenant interceptor (its requests name
their tenants) and, like every router method, reachable only from inside the
mesh (SECURITY.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
from opentelemetry import baggage, trace

from agentmesh.agent.v1 import agent_pb2, relay_pb2, relay_pb2_grpc
from services.runtime.context import DEADLINE, REQUEST_ID
from services.runtime.errors import (
    AgentMeshError,
    Cancelled,
    DeadlineExceeded,
    InvalidArgument,
    Unauthenticated,
    to_rpc_status,
)
from services.runtime.interceptors.errors import as_status_error
from services.runtime.interceptors.metrics import MethodRecorder
from services.runtime.interceptors.request_id import new_request_id
from services.runtime.interceptors.tracing import INSTRUMENTATION, extract_context, server_span, set_server_status
from services.runtime.metrics import Metrics
from services.runtime.mux_server import MuxServer
from services.runtime.server import Service
from services.runtime.tenancy import TENANT, TENANT_BAGGAGE, valid_tenant

log = logging.getLogger(__name__)

SERVICE_NAME = relay_pb2.DESCRIPTOR.services_by_name["RelayService"].full_name
#: What a relayed request is, in spans and metrics: the Complete RPC it stands for.
COMPLETE_SERVICE = agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name
COMPLETE_SPAN = f"{COMPLETE_SERVICE}/Complete"
MAX_ID_CHARS = 64

Complete = Callable[[agent_pb2.CompleteRequest], AsyncIterator[agent_pb2.CompleteResponse]]


@dataclass
class _Pending:
    """A request's events not yet sent, and whether its last frame (with ``status``) is among them."""

    events: list[bytes] = field(default_factory=list)
    end: bool = False
    status: bytes = b""


class RelaySession(MuxServer[relay_pb2.RelayRequest, relay_pb2.RelayResponse]):
    """See module docstring. One instance per Relay call."""

    def __init__(
        self,
        complete: Complete,
        write: Callable[[relay_pb2.RelayResponse], Any],
        *,
        tracer: trace.Tracer,
        recorder: MethodRecorder | None,
    ) -> None:
        super().__init__(write, name="relay")
        self._complete = complete
        self._tracer = tracer
        self._recorder = recorder
        self._pending: dict[str, _Pending] = {}

    async def run(self, requests: AsyncIterator[relay_pb2.RelayRequest]) -> None:
        await self.send(relay_pb2.RelayResponse(ready=relay_pb2.RelayReady()))
        writer = asyncio.create_task(self.write_coalesced(self._frames), name="relay-writer")
        try:
            await super().run(requests)
            await self.send_built(self._frames)  # the gateway half-closed and every request finished
        finally:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)

    async def received(self, message: relay_pb2.RelayRequest) -> None:
        action = message.WhichOneof("action")
        if action == "start":
            self._start(message.start)
        elif action == "cancel" and not self.cancel(message.cancel.id):
            log.debug("cancel of unknown relay request %r ignored", message.cancel.id)

    def _start(self, start: relay_pb2.RelayStart) -> None:
        rid = start.id
        error: AgentMeshError | None = None
        if not rid or len(rid) > MAX_ID_CHARS:
            error = InvalidArgument.field("start.id", f"must be 1-{MAX_ID_CHARS} characters")
        elif self.is_live(rid) or rid in self._pending:
            error = InvalidArgument.field("start.id", "duplicates a live request on this stream")
        elif not start.tenant:
            error = Unauthenticated("no tenant: set start.tenant (the gateway does)", reason="TENANT_MISSING")
        elif not valid_tenant(start.tenant):
            error = Unauthenticated("start.tenant: not a valid tenant name", reason="TENANT_INVALID")
        if error is not None:
            self._end(rid, error, start.request_id)
            return
        self.start(rid, self._serve(start))

    async def _serve(self, start: relay_pb2.RelayStart) -> None:
        """One request, in its own task (so the context variables set here are its own)."""
        rid = start.id
        request_id = start.request_id or new_request_id()
        REQUEST_ID.set(request_id)
        TENANT.set(start.tenant)
        timeout = start.timeout.ToNanoseconds() / 1e9 if start.HasField("timeout") else None
        DEADLINE.set(None if timeout is None else time.monotonic() + timeout)
        parent = baggage.set_baggage(TENANT_BAGGAGE, start.tenant, extract_context(dict(start.trace_context)))
        attributes = {
            "rpc.system": "grpc",
            "rpc.service": COMPLETE_SERVICE,
            "rpc.method": "Complete",
            "agentmesh.request_id": request_id,
            "agentmesh.relay_id": rid,
        }
        began = self._recorder.started() if self._recorder is not None else 0.0
        code = grpc.StatusCode.OK
        with server_span(self._tracer, COMPLETE_SPAN, parent, attributes) as span:
            try:
                async with asyncio.timeout(timeout):
                    async for event in self._complete(start.request):
                        self._pending_of(rid).events.append(event.SerializeToString())
                        self.wake_writer()
                self._end(rid, None, request_id)
            except TimeoutError:
                code = self._end(rid, DeadlineExceeded(f"request {request_id} ran past its deadline"), request_id)
            except asyncio.CancelledError:
                code = grpc.StatusCode.CANCELLED
                if not self.cancelled(rid):
                    raise  # the stream is going away: nobody to tell
                self._end(rid, Cancelled("the request was cancelled"), request_id)
            except Exception as exc:
                code = self._end(rid, as_status_error(exc, COMPLETE_SPAN), request_id)
            finally:
                if self._recorder is not None:
                    self._recorder.ended(began, code)
                set_server_status(span, code)

    # -- frames -----------------------------------------------------------

    def _pending_of(self, rid: str) -> _Pending:
        pending = self._pending.get(rid)
        if pending is None:
            pending = self._pending[rid] = _Pending()
        return pending

    def _end(self, rid: str, error: AgentMeshError | None, request_id: str) -> grpc.StatusCode:
        """Queue the request's last frame (with ``error``'s status, if any); the code it ended with."""
        pending = self._pending_of(rid)
        pending.end = True
        if error is not None:
            pending.status = to_rpc_status(error, request_id or None).SerializeToString()
        self.wake_writer()
        return grpc.StatusCode.OK if error is None else error.code

    def _frames(self) -> relay_pb2.RelayResponse | None:
        """Everything pending, one frame per request (built when the stream is free)."""
        if not self._pending:
            return None
        frames = [
            relay_pb2.RelayFrame(id=rid, events=p.events, end=p.end, status=p.status)
            for rid, p in self._pending.items()
        ]
        self._pending.clear()
        return relay_pb2.RelayResponse(frames=relay_pb2.RelayFrames(frames=frames))


class RelayServicer(relay_pb2_grpc.RelayServiceServicer):
    """Serves Relay streams with ``complete`` (the AgentService's Complete, minus the call)."""

    def __init__(
        self, complete: Complete, *, metrics: Metrics | None = None, tracer_provider: trace.TracerProvider | None = None
    ) -> None:
        self._complete = complete
        self._recorder = (
            None if metrics is None else MethodRecorder(metrics, COMPLETE_SERVICE, "Complete", "unary_stream")
        )
        self._tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(INSTRUMENTATION)
        self._sessions: set[RelaySession] = set()

    def service(self) -> Service:
        return Service(SERVICE_NAME, lambda server: relay_pb2_grpc.add_RelayServiceServicer_to_server(self, server))

    async def announce_draining(self) -> None:
        """Tell every gateway to start no new request here; the ones in flight finish."""
        notice = relay_pb2.RelayResponse(draining=relay_pb2.RelayDraining(reason="router shutting down"))
        await asyncio.gather(*(s.send(notice) for s in list(self._sessions)), return_exceptions=True)

    # A coroutine that writes with context.write, where the generated stub assumes a generator.
    async def Relay(  # type: ignore[override]
        self,
        request_iterator: AsyncIterator[relay_pb2.RelayRequest],
        context: grpc.aio.ServicerContext[relay_pb2.RelayRequest, relay_pb2.RelayResponse],
    ) -> None:
        session = RelaySession(self._complete, context.write, tracer=self._tracer, recorder=self._recorder)
        self._sessions.add(session)
        try:
            await session.run(request_iterator)
        finally:
            self._sessions.discard(session)
