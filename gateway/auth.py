"""API-key authentication: bearer tokens mapped to tenants, stored hashed, compared in constant time.

Keys come from a file (one ``tenant key`` or ``tenant sha256:<hex>`` per line,
``#`` comments) and/or ``AGENTMESH_GATEWAY_API_KEYS`` (``tenant:key,...``).
Tenant names are checked as they load (``tenancy.check_tenant``): they end up
in Redis keys and cache keys, which must not be ambiguous.
Only sha256 digests are kept in memory. A presented key is hashed and compared
against every stored digest with ``hmac.compare_digest`` (no early exit), so
timing reveals neither which key nor how much of it matched.

The interceptor is an allow-list: only health and reflection are open, and
every other method — any service registered later included — needs a key.
Missing or invalid credentials → UNAUTHENTICATED. The tenant goes into a
contextvar for the servicer and into OpenTelemetry baggage (replacing any
``agentmesh.tenant`` a client sent).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import grpc.aio

from services.runtime.errors import Unauthenticated
from services.runtime.interceptors.base import CallNext, RpcInfo, RpcInterceptor
from services.runtime.interceptors.errors import abort_with
from services.runtime.tenancy import OPEN_PREFIXES, as_tenant, check_tenant

TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("agentmesh_tenant", default="")
#: The only methods callable without a key: probes and reflection (exact services, not a name prefix).
OPEN_METHOD_PREFIXES = OPEN_PREFIXES


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class KeyFormatError(ValueError):
    """A keys file or variable is malformed (the message names the line)."""


class ApiKeys:
    def __init__(self, entries: Iterable[tuple[str, bytes]] = ()) -> None:
        self._entries = list(entries)

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def load(cls, path: Path | None, env_value: str = "") -> ApiKeys:
        entries: list[tuple[str, bytes]] = []
        if path is not None:
            for n, raw in enumerate(path.read_text().splitlines(), 1):
                line = raw.split("#", 1)[0].strip()
                if not line:
                    continue
                parts = line.split()
                if len(parts) != 2:
                    raise KeyFormatError(f"{path}:{n}: expected 'tenant key' or 'tenant sha256:<hex>'")
                entries.append((cls._tenant(parts[0], f"{path}:{n}"), cls._parse_secret(parts[1], f"{path}:{n}")))
        for n, item in enumerate(p for p in env_value.split(",") if p.strip()):
            tenant, sep, secret = item.strip().partition(":")
            if not sep or not tenant or not secret:
                raise KeyFormatError(f"AGENTMESH_GATEWAY_API_KEYS item {n + 1}: expected tenant:key")
            where = f"AGENTMESH_GATEWAY_API_KEYS item {n + 1}"
            entries.append((cls._tenant(tenant, where), cls._parse_secret(secret, where)))
        return cls(entries)

    @staticmethod
    def _tenant(name: str, where: str) -> str:
        try:
            return check_tenant(name)
        except ValueError as exc:
            raise KeyFormatError(f"{where}: {exc}") from None

    @staticmethod
    def _parse_secret(secret: str, where: str) -> bytes:
        if secret.startswith("sha256:"):
            try:
                value = bytes.fromhex(secret.removeprefix("sha256:"))
            except ValueError:
                raise KeyFormatError(f"{where}: sha256 digest is not hex") from None
            if len(value) != 32:
                raise KeyFormatError(f"{where}: sha256 digest must be 64 hex characters")
            return value
        if len(secret) < 8:
            raise KeyFormatError(f"{where}: keys must be at least 8 characters")
        return digest(secret)

    def tenant_for(self, key: str) -> str | None:
        presented = digest(key)
        found: str | None = None
        for tenant, stored in self._entries:
            if hmac.compare_digest(presented, stored) and found is None:
                found = tenant
        return found


def bearer_token(metadata: Iterable[tuple[str, Any]]) -> str | None:
    for k, v in metadata:
        if k == "authorization" and isinstance(v, str):
            scheme, _, token = v.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


class AuthInterceptor(RpcInterceptor):
    """Authenticates every call except health and reflection (see module docstring)."""

    def __init__(self, keys: ApiKeys) -> None:
        self._keys = keys

    async def around(self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any], call_next: CallNext) -> Any:
        if info.method.startswith(OPEN_METHOD_PREFIXES):
            return await call_next()
        token = bearer_token(info.metadata)
        if token is None:
            await abort_with(context, Unauthenticated("missing credentials: send 'authorization: Bearer <api key>'"))
        tenant = self._keys.tenant_for(token or "")
        if tenant is None:
            await abort_with(context, Unauthenticated("invalid API key"))
            return None
        return await as_tenant(tenant, call_next, TENANT)
