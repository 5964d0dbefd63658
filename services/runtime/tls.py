"""Mesh identity: mutual TLS between the mesh's own services.

When ``--tls-cert``, ``--tls-key`` and ``--tls-ca`` are set (all three or
none), every internal server accepts only clients that present a certificate
signed by that CA, and every channel a service opens presents its own and
checks the server's against the same CA. The gateway's public port is not
affected (Envoy terminates client TLS); its channels to routers are.

Peers dial each other by address (a headless Service resolves to pod IPs), so
the name checked in a server's certificate is ``--tls-server-name`` when set
(one mesh-wide DNS name in every certificate's SANs), else the target's host.

Kubernetes' gRPC probes cannot present a certificate, so with mTLS on a server
also serves ``grpc.health.v1`` alone, in plaintext, on ``--health-port``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from services.runtime.config import ServiceConfig


@dataclass(frozen=True)
class MeshTls:
    """PEM material of one mesh member: its certificate chain and key, and the mesh CA."""

    cert_chain: bytes
    private_key: bytes
    root_ca: bytes
    server_name: str = ""

    @classmethod
    def from_config(cls, config: ServiceConfig) -> MeshTls | None:
        """The config's TLS files (checked when the config loaded); None when mTLS is off."""
        if not config.tls_cert:
            return None
        return cls(
            cert_chain=Path(config.tls_cert).read_bytes(),
            private_key=Path(config.tls_key).read_bytes(),
            root_ca=Path(config.tls_ca).read_bytes(),
            server_name=config.tls_server_name,
        )

    def server_credentials(self) -> grpc.ServerCredentials:
        """Require and verify a client certificate from the mesh CA."""
        return grpc.ssl_server_credentials(
            [(self.private_key, self.cert_chain)], root_certificates=self.root_ca, require_client_auth=True
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """Present this member's certificate; trust only the mesh CA."""
        return grpc.ssl_channel_credentials(self.root_ca, self.private_key, self.cert_chain)

    def channel_options(self) -> list[tuple[str, str]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
