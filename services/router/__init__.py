"""The router: the agent loop, durable sessions, replica picking, response cache, failover.

The folder is the router's parts, one subpackage each, in the order a turn
flows through them:

- ``serving/``: the gRPC layer — ``servicer`` (AgentService), ``converse``
  (one stream's turns, each ending with one TurnCompleted), ``relay`` (the
  gateway's batched Complete stream), ``convert`` (every proto a turn sends
  and GetSession returns).
- ``turn/``: one agent turn — ``agent_loop`` (session → plan → tools →
  answer → record), ``tool_round`` (one round of calls), ``client_tools``
  (calls the client runs), ``answer`` and its messages from ``prompt``,
  ``progress`` (what a turn has done so far, for its usage report).
- ``planning/``: which tools a message needs and their arguments (its own
  docstring walks one message through the pipeline).
- ``tools/``: the tool executors — ``link`` (one multiplexed Execute stream
  per executor), ``lists`` (each tenant's tools, kept current), ``planners``
  (one planner per distinct tool list).
- ``sessions/``: ``store`` (the event log in Redis Streams, per tenant) in the
  shape ``records`` defines.
- ``replicas/``: ``generation`` (one generation: response cache, replica
  choice, streaming, failover) → ``picker`` (rendezvous hashing with bounded
  load) over ``addresses`` (the set of replicas) and ``link`` (one
  multiplexed Generate stream per inference replica).

At the top: ``build`` assembles the parts from ``config``; ``main`` runs the
process; ``metrics`` counts what happens.
"""
