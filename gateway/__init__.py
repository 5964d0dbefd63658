"""The gateway: AgentMesh's public edge.

It serves the same ``agentmesh.agent.v1.AgentService`` as the router and
forwards to router replicas, enforcing policy on the way: API-key auth
(``auth``), per-tenant rate limits shared through Redis (``ratelimit``),
priority admission with SLO-aware shedding under an adaptive concurrency
limit (``admission``), and session affinity with failover (``routers``,
``servicer``). ``main`` runs it.
"""

from services.runtime.forks import exec_only

exec_only()  # before anything here imports gRPC: its children reach their exec (``services/runtime/forks.py``)
