"""The shared service runtime every AgentMesh server and client stands on.

Config, server and channel factories, interceptors (request id, tracing,
metrics, deadlines, errors), the error taxonomy, deadline propagation,
telemetry, Redis connection, both sides of a multiplexed stream
(``mux_client``, ``mux_server``), the Converse read loop (``converse_loop``),
discovery (``resolver``, ``peers``) and the service lifecycle (``lifecycle``).
Services import from here; this package imports only the generated contracts
and third-party libraries.
"""
