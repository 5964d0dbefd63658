"""AgentMesh's tests (``make test``)."""

from services.runtime.forks import exec_only

exec_only()  # before anything here imports gRPC: its children reach their exec (``services/runtime/forks.py``)
