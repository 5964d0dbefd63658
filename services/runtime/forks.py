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

The garbage collector is paused across every fork too, and stays paused in the
child. uvloop's child runs Python's after-fork callbacks (``PyOS_AfterFork_Child``:
threading's, the locks' reinit, and those of every library imported since)
before its ``exec``, and a collection triggered there freed objects other
threads of the parent had been using: grpcurl children of the test session died
of SIGSEGV in ``TaskObj_dealloc`` (``make test``, once in ``threading``'s
callback, and once — with the collector resumed by the child callback registered
here — in a callback registered after it, which ran with the collector on again).
CPython's own ``subprocess`` runs no Python in the child for the same reason. So
the collector is paused before the fork (``os.register_at_fork``), resumed in the
parent after it, and in the child only by a ``fork`` multiprocessing worker,
which goes on running Python: multiprocessing's own after-fork hooks run in its
bootstrap, after every ``os``-level callback. A bare ``os.fork()`` child that
goes on running Python without ``exec`` (none here) would run without the
collector.
"""

from __future__ import annotations

import gc
import multiprocessing.util
import os

VARIABLE = "GRPC_ENABLE_FORK_SUPPORT"

_paused: list[bool] = []  # per fork in progress: whether the collector was enabled before it


def _pause() -> None:
    _paused.append(gc.isenabled())
    gc.disable()


def _resume() -> None:
    if _paused and _paused.pop():
        gc.enable()


def exec_only() -> None:
    """Turn gRPC's fork handlers off for this process and its children, unless the environment says otherwise,
    and pause the garbage collector across forks (once per process)."""
    os.environ.setdefault(VARIABLE, "false")
    if not _registered:
        os.register_at_fork(before=_pause, after_in_parent=_resume)
        multiprocessing.util.register_after_fork(_WORKER, _worker_resumes)
        _registered.append(True)


class _Worker:
    """What multiprocessing's after-fork registry holds (weakly): one per process, kept by this module."""


_WORKER = _Worker()
_registered: list[bool] = []


def _worker_resumes(_: _Worker) -> None:
    """In a ``fork`` multiprocessing worker, after every after-fork callback: the collector runs again."""
    _resume()


__all__ = ["VARIABLE", "exec_only"]
