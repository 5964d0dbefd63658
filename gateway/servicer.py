"""The gateway's AgentService: policy on every call, then forwarding to a router.

Per Complete, and per StartTurn on a Converse stream: rate limit (tenant
budget in Redis) → priority admission (may queue or shed) → forward. The
admission slot is held until the turn or completion ends; its TTFT feeds the
adaptive limit and its tokens are charged to the tenant's token bucket. A
Converse stream's turns are relayed by ``converse.py`` (tickets and charges by
turn id). A Complete whose client leaves before ``finished`` is charged an
estimate (4 characters per token of the prompt and of the text relayed), since
its exact usage never arrives.

Forwarding: a Converse stream is bound to one router, chosen by rendezvous
hash of the session id (new sessions: of the request id), so a session stays
on its router while that router is healthy. If the router fails before the
turn is accepted, the next router is tried; after that, a router failure ends
the stream with the router's status. Cancellation and deadlines pass through
(the downstream call is cancelled with the client's, and gets its remaining
time). Router errors reach the client with their status and rich details; the
tenant travels as ``x-agentmesh-tenant``, never the client's credentials.

Complete requests travel on the router's Relay stream (``router_link.py``:
one call per router for all of them, the events of every request that
advanced in one router loop turn in one message); a Converse stream is a call
of its own (it lives as long as the session's client does). Either way the
relay does not re-serialize: responses travel from the router to the client
as the router's bytes (identity serializers), and the gateway decodes only the
one message per turn it needs (turn completed, with usage and TTFT), found by
its leading field tag. A relayed request's failure reaches the client as the
router's call would have ended: its status, message and rich details.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc, relay_pb2
from agentmesh.common.v1 import common_pb2
from gateway.admission import AdmissionController, Ticket
from gateway.auth import TENANT
from gateway.converse import ConverseRelay, RouterFailed, raw, ttft_of
from gateway.ratelimit import RateLimiter
from gateway.router_link import RelayFailed, RouterLost
from gateway.routers import RouterPool
from services.runtime.context import current_request_id
from services.runtime.converse_loop import OpenStreams
from services.runtime.deadline import downstream_timeout
from services.runtime.errors import (
    RETRY_PUSHBACK_KEY,
    STATUS_DETAILS_KEY,
    ResourceExhausted,
    Unavailable,
    retry_pushback,
)
from services.runtime.interceptors.request_id import HEADER as REQUEST_ID_HEADER
from services.runtime.interceptors.tracing import end_client_span, start_client_span
from services.runtime.mux_client import StreamDown
from services.runtime.protoutil import duration
from services.runtime.server import Service

log = logging.getLogger(__name__)

SERVICE_NAME = agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name
TENANT_HEADER = "x-agentmesh-tenant"
COMPLETE = f"/{SERVICE_NAME}/Complete"
#: The first byte of a serialized CompleteResponse whose event is finished (field 3, length-delimited): the
#: only Complete message the relay decodes.
FINISHED_TAG = bytes([(3 << 3) | 2])
PRIORITY = {
    common_pb2.PRIORITY_UNSPECIFIED: 1,
    common_pb2.PRIORITY_P0: 0,
    common_pb2.PRIORITY_P1: 1,
    common_pb2.PRIORITY_P2: 2,
}


async def pass_through(context: grpc.aio.ServicerContext[Any, Any], error: grpc.aio.AioRpcError) -> None:
    """End the client's call with the router's status and rich details."""
    keep = (STATUS_DETAILS_KEY, RETRY_PUSHBACK_KEY, REQUEST_ID_HEADER)
    trailing = tuple((k, v) for k, v in (error.trailing_metadata() or ()) if k in keep)
    await context.abort(error.code(), error.details() or "", trailing)


async def abort_with_status(context: grpc.aio.ServicerContext[Any, Any], failed: RelayFailed) -> None:
    """End the client's call with a relayed request's status, as the router would have ended a call of its
    own: the same code, message and rich details, request id and retry pushback included."""
    rich = failed.rich
    trailing: list[tuple[str, str | bytes]] = [(STATUS_DETAILS_KEY, failed.status)]
    if rich.request_id:
        trailing.append((REQUEST_ID_HEADER, rich.request_id))
    if rich.retry_after_s is not None and rich.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        trailing.append(retry_pushback(rich.retry_after_s))
    await context.abort(rich.code, rich.message, tuple(trailing))


class GatewayServicer(agent_pb2_grpc.AgentServiceServicer):
    def __init__(
        self,
        routers: RouterPool,
        limiter: RateLimiter,
        admission: AdmissionController,
        *,
        tracer: trace.Tracer | None = None,
    ) -> None:
        """``tracer`` makes the CLIENT spans of calls to routers (their channels carry no tracing interceptors)."""
        self._routers = routers
        self._tracer = tracer
        self._limiter = limiter
        self._admission = admission
        self._open_streams: OpenStreams[bytes] = OpenStreams()

    def service(self) -> Service:
        """AgentService with pass-through (bytes) responses for the two streaming methods."""
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "Converse": grpc.stream_stream_rpc_method_handler(
                self.Converse, request_deserializer=agent_pb2.ConverseRequest.FromString, response_serializer=raw
            ),
            "Complete": grpc.unary_stream_rpc_method_handler(
                self.Complete, request_deserializer=agent_pb2.CompleteRequest.FromString, response_serializer=raw
            ),
            "GetSession": grpc.unary_unary_rpc_method_handler(
                self.GetSession,
                request_deserializer=agent_pb2.GetSessionRequest.FromString,
                response_serializer=agent_pb2.GetSessionResponse.SerializeToString,
            ),
            "ListTools": grpc.unary_unary_rpc_method_handler(
                self.ListTools,
                request_deserializer=agent_pb2.ListToolsRequest.FromString,
                response_serializer=agent_pb2.ListToolsResponse.SerializeToString,
            ),
        }
        generic = grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)
        return Service(SERVICE_NAME, lambda server: server.add_generic_rpc_handlers((generic,)))

    async def announce_draining(self) -> None:
        notice = agent_pb2.ConverseResponse(draining=agent_pb2.DrainNotice(reason="gateway shutting down"))
        notice.draining.retry_after.FromSeconds(1)
        await self._open_streams.announce(notice.SerializeToString())

    # -- policy -------------------------------------------------------------

    async def _admit(self, tenant: str, priority: common_pb2.Priority.ValueType) -> Ticket:
        decision = await self._limiter.check(tenant)
        if not decision.allowed:
            raise ResourceExhausted(
                f"rate limit exceeded for tenant {tenant}; retry in {decision.retry_after_s:.2f}s",
                retry_after_s=decision.retry_after_s,
                reason="RATE_LIMITED",
            )
        return await self._admission.acquire(PRIORITY.get(priority, 1))

    async def _finish(self, tenant: str, ticket: Ticket | None, usage: common_pb2.Usage, ttft: float | None) -> None:
        if ticket is not None:
            self._admission.release(ticket, ttft)
        try:
            await self._limiter.charge(tenant, usage.prompt_tokens + usage.completion_tokens)
        except Exception:  # a budget we fail to charge must not fail an answered request
            log.warning("could not charge %d tokens to %s", usage.prompt_tokens + usage.completion_tokens, tenant)

    def _metadata(self, tenant: str) -> tuple[tuple[str, str], ...]:
        return ((TENANT_HEADER, tenant), (REQUEST_ID_HEADER, current_request_id()))

    def _candidates(self, key: str) -> list[str]:
        order = self._routers.order(key)
        if not order:
            raise Unavailable("no router is available", retry_after_s=1.0)
        return order

    # -- Converse -----------------------------------------------------------

    async def Converse(  # type: ignore[override]
        self,
        request_iterator: AsyncIterator[agent_pb2.ConverseRequest],
        context: grpc.aio.ServicerContext[agent_pb2.ConverseRequest, bytes],  # bytes: the serializer is raw
    ) -> None:
        tenant = TENANT.get()
        async with self._open_streams.open(context, request_iterator) as send:
            relay = ConverseRelay(
                self._routers,
                tenant,
                self._metadata(tenant),
                send=send,
                admit=self._admit,
                finish=self._finish,
                release=self._admission.release,
                tracer=self._tracer,
            )
            try:
                await relay.run(request_iterator)
            except RouterFailed as failed:
                await pass_through(context, failed.error)

    # -- Complete, GetSession, ListTools ---------------------------------------

    async def Complete(  # type: ignore[override]  # relays the router's bytes (see module docstring)
        self,
        request: agent_pb2.CompleteRequest,
        context: grpc.aio.ServicerContext[agent_pb2.CompleteRequest, agent_pb2.CompleteResponse],
    ) -> AsyncIterator[bytes]:
        tenant = TENANT.get()
        ticket = await self._admit(tenant, request.priority)
        relayed_bytes = sent = 0
        finished = False
        try:
            last: str | None = None
            for target in self._candidates(uuid.uuid4().hex):
                span, carrier = start_client_span(self._tracer, COMPLETE, ())
                start = relay_pb2.RelayStart(
                    id=uuid.uuid4().hex,
                    request=request,
                    tenant=tenant,
                    request_id=current_request_id(),
                    trace_context=dict(carrier),
                )
                timeout = downstream_timeout()
                if timeout is not None:
                    start.timeout.CopyFrom(duration(timeout))
                code = grpc.StatusCode.CANCELLED  # unless the request ends first
                relayed = self._routers.link(target).complete(start)
                try:
                    async for message in relayed:
                        sent += 1
                        relayed_bytes += len(message)
                        yield message
                        if message[:1] == FINISHED_TAG:
                            finished = True
                            f = agent_pb2.CompleteResponse.FromString(message).finished
                            await self._finish(tenant, ticket, f.usage, ttft_of(f.time_to_first_token))
                    code = grpc.StatusCode.OK
                    return
                except RelayFailed as failed:
                    code = failed.rich.code
                    await abort_with_status(context, failed)
                except (StreamDown, RouterLost) as exc:
                    code = grpc.StatusCode.UNAVAILABLE
                    if sent:  # the client has part of an answer: it is the client's to retry
                        await context.abort(code, f"the router failed mid-answer: {exc}")
                    self._routers.mark_down(target)
                    last = str(exc)
                finally:
                    await relayed.aclose()  # here, in this task, even when the client went away mid-answer
                    if span is not None:
                        end_client_span(span, code)
            raise Unavailable(f"no router took the request ({last})", retry_after_s=1.0)
        finally:
            if sent and not finished:  # dropped or failed mid-answer: charge what it cost, estimated
                prompt_chars = len(request.prompt) + len(request.system_prompt)
                estimate = common_pb2.Usage(prompt_tokens=(prompt_chars + 3) // 4, completion_tokens=relayed_bytes // 4)
                await asyncio.shield(self._finish(tenant, ticket, estimate, None))
            self._admission.release(ticket)

    async def GetSession(
        self,
        request: agent_pb2.GetSessionRequest,
        context: grpc.aio.ServicerContext[agent_pb2.GetSessionRequest, agent_pb2.GetSessionResponse],
    ) -> agent_pb2.GetSessionResponse:
        reply: agent_pb2.GetSessionResponse = await self._unary("GetSession", request, context, request.session_id)
        return reply

    async def ListTools(
        self,
        request: agent_pb2.ListToolsRequest,
        context: grpc.aio.ServicerContext[agent_pb2.ListToolsRequest, agent_pb2.ListToolsResponse],
    ) -> agent_pb2.ListToolsResponse:
        reply: agent_pb2.ListToolsResponse = await self._unary("ListTools", request, context, "tools")
        return reply

    async def _unary(self, method: str, request: Any, context: grpc.aio.ServicerContext[Any, Any], key: str) -> Any:
        tenant = TENANT.get()
        last: grpc.aio.AioRpcError | None = None
        for target in self._candidates(key):
            stub = agent_pb2_grpc.AgentServiceStub(self._routers.channel(target))
            span, metadata = start_client_span(self._tracer, f"/{SERVICE_NAME}/{method}", self._metadata(tenant))
            code = grpc.StatusCode.CANCELLED
            try:
                reply = await getattr(stub, method)(request, metadata=metadata, timeout=downstream_timeout())
                code = grpc.StatusCode.OK
                return reply
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    await pass_through(context, exc)
                self._routers.mark_down(target)
                last = exc
            finally:
                if span is not None:
                    end_client_span(span, code)
        assert last is not None
        await pass_through(context, last)
        return None
