"""gRPC's fork handlers off: every process here forks only to exec another program.

uvloop starts a subprocess with ``fork()`` then ``exec()``, and gRPC registers
``pthread_atfork`` handlers meant for a child that goes on using gRPC. While
other threads are inside gRPC the parent's handler is skipped (the log line
"fork_posix.cc … skipping fork() handlers") and the child can crash before
its ``exec``: under gRPC load, 5 to 6 of 300 spawns of ``true`` died of
SIGSEGV (-11) here, none with the handlers off (measured on grpcio 1.85.3).
The mesh spawns MCP stdio servers, curl and grpcurl in its tests, and vLLM's
engine core; none of those children uses the parent's gRPC, so the handlers
only cost (gRPC's own advice for fork-then-exec, ``doc/fork_support.md``).

grpcio reads the variable when it is imported, so ``exec_only`` runs before
any import of gRPC: in the ``__init__`` of each top-level package a process
starts from (``services``, ``gateway``, ``evals``, ``loadtest``, ``tests``),
which Python runs before any module of the package. Set in a test's body it
changed nothing (measured). A value set by the operator is kept.
"""

from __future__ import annotations

import os

VARIABLE = "GRPC_ENABLE_FORK_SUPPORT"


def exec_only() -> None:
    """Turn gRPC's fork handlers off for this process and its children, unless the environment says otherwise."""
    os.environ.setdefault(VARIABLE, "false")


__all__ = ["VARIABLE", "exec_only"]
