"""Support for running the mesh in one process, shared by the tests and the benchmarks (``loadtest``).

``mesh`` starts simulator replicas, a tool executor, routers and gateways on
loopback; ``turns`` drives a Converse turn to its end; ``proxy`` counts the bytes
on a connection. It sits above the services, beside ``loadtest``: it may import
any of them, and nothing under ``services`` or ``gateway`` imports it.
"""
