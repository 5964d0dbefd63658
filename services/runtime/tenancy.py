"""Who a request is for: the tenant the gateway authenticated, carried through the mesh.

The gateway sets ``x-agentmesh-tenant`` metadata from the API key (a client's own
header is dropped there). Every internal server runs ``TenantInterceptor``: a
call to a protected method without a valid tenant is refused with
UNAUTHENTICATED (reason ``TENANT_MISSING`` or ``TENANT_INVALID``) — there is no
default tenant, so a caller that forgets it cannot read someone else's data.
The tenant goes into ``TENANT`` for the domain (cache keys, session keys,
prefix-cache salt) and into OpenTelemetry baggage (``agentmesh.tenant``) so
spans further down, and the sampler, see it.

Tenant names are 1-64 characters of ``[A-Za-z0-9._-]``: no ``:``, braces or
spaces, so keys built as ``<tenant>:<rest>`` are injective and a name cannot
break a Redis hash tag.
"""

from __future__ import annotations

import contextvars
import hashlib
import re
from typing import Any

import grpc.aio
from opentelemetry import baggage
from opentelemetry import context as otel_context

from services.runtime.errors import Unauthenticated
from services.runtime.interceptors.base import CallNext, RpcInfo, RpcInterceptor
from services.runtime.interceptors.errors import abort_with

TENANT_HEADER = "x-agentmesh-tenant"
#: Baggage entry naming the tenant (set by the gateway's tracing context, re-set by every server).
TENANT_BAGGAGE = "agentmesh.tenant"
#: The tenant of the RPC being served ("" outside one).
TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("agentmesh_mesh_tenant", default="")
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
#: The only services callable without a tenant (or, at the gateway, a key): probes and reflection.
#: Whole service names with their closing "/", so no service registered later matches by accident.
OPEN_PREFIXES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)


def valid_tenant(name: str) -> bool:
    """Whether ``name`` is an acceptable tenant name (see module docstring)."""
    return bool(_NAME.match(name))


def check_tenant(name: str) -> str:
    """``name`` if valid, else ValueError saying why (for key files and key builders)."""
    if not valid_tenant(name):
        raise ValueError(f"tenant {name!r} must be 1-64 characters of letters, digits, '.', '_' or '-'")
    return name


def prefix_cache_salt(tenant: str) -> str:
    """The tenant's prefix-cache partition: a digest, so engine logs and metrics never name tenants."""
    return hashlib.sha256(f"agentmesh-prefix:{tenant}".encode()).hexdigest()[:32]


def current_tenant() -> str:
    """The tenant of the RPC being served ("" outside one)."""
    return TENANT.get()


async def as_tenant(tenant: str, call_next: CallNext, var: contextvars.ContextVar[str] = TENANT) -> Any:
    """Run the rest of the call as ``tenant``: in ``var`` for the servicer and in the trace baggage for the
    next hop (replacing whatever the caller sent), both restored afterwards."""
    reset = var.set(tenant)
    token = otel_context.attach(baggage.set_baggage(TENANT_BAGGAGE, tenant))
    try:
        return await call_next()
    finally:
        otel_context.detach(token)
        var.reset(reset)


class TenantInterceptor(RpcInterceptor):
    """Requires a valid ``x-agentmesh-tenant`` on every method except ``open_prefixes``."""

    def __init__(self, open_prefixes: tuple[str, ...] = OPEN_PREFIXES) -> None:
        self._open = open_prefixes

    async def around(self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any], call_next: CallNext) -> Any:
        if info.method.startswith(self._open):
            return await call_next()
        tenant = info.header(TENANT_HEADER) or ""
        if not tenant:
            await abort_with(
                context,
                Unauthenticated(f"no tenant: set {TENANT_HEADER} (the gateway does)", reason="TENANT_MISSING"),
            )
        if not valid_tenant(tenant):
            await abort_with(
                context, Unauthenticated(f"{TENANT_HEADER}: not a valid tenant name", reason="TENANT_INVALID")
            )
        return await as_tenant(tenant, call_next)


class _StampTenant:
    """Adds ``x-agentmesh-tenant`` to calls that carry none: for operators' tools and test
    harnesses that call a router directly, as the gateway would."""

    def __init__(self, tenant: str) -> None:
        self._tenant = check_tenant(tenant)

    async def _stamp(self, continuation: Any, details: grpc.aio.ClientCallDetails, request: Any) -> Any:
        metadata = grpc.aio.Metadata(*tuple(details.metadata or ()))
        if not metadata.get_all(TENANT_HEADER):
            metadata[TENANT_HEADER] = self._tenant
        new = grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )
        return await continuation(new, request)


class _UnaryUnary(_StampTenant, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await self._stamp(continuation, client_call_details, request)


class _UnaryStream(_StampTenant, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await self._stamp(continuation, client_call_details, request)


class _StreamStream(_StampTenant, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        return await self._stamp(continuation, client_call_details, request_iterator)


def stamp_tenant(tenant: str) -> list[grpc.aio.ClientInterceptor]:
    """Client interceptors that send ``tenant`` on every call that names none."""
    return [_UnaryUnary(tenant), _UnaryStream(tenant), _StreamStream(tenant)]
