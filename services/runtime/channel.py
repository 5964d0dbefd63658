"""The channel factory every client uses: gzip, agreed keepalive, retries, tracing, mesh mTLS."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import grpc.aio
from opentelemetry import trace

from services.runtime.interceptors.tracing import client_tracing_interceptors
from services.runtime.options import DEFAULT_MAX_MESSAGE_BYTES, IDEMPOTENT_METHODS, channel_options
from services.runtime.tls import MeshTls


def create_channel(
    target: str,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    compression: grpc.Compression = grpc.Compression.Gzip,
    idempotent_methods: Sequence[tuple[str, str]] = IDEMPOTENT_METHODS,
    interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
    tls: MeshTls | None = None,
) -> grpc.aio.Channel:
    """A grpc.aio channel to ``target`` with the shared options: mutual TLS with the
    mesh's identity when ``tls`` is given (see ``tls``), plaintext otherwise.

    ``compression`` is the default for every call's requests; servers built by
    ``create_server`` compress their responses with gzip as well.
    """
    chain = list(interceptors)
    if tracer_provider is not None:
        chain.extend(client_tracing_interceptors(tracer_provider))
    options = channel_options(max_message_bytes, idempotent_methods=idempotent_methods)
    if tls is not None:
        return grpc.aio.secure_channel(
            target,
            tls.channel_credentials(),
            options=[*options, *tls.channel_options()],
            compression=compression,
            interceptors=chain or None,
        )
    return grpc.aio.insecure_channel(target, options=options, compression=compression, interceptors=chain or None)
