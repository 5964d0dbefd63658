"""The router: the agent loop, durable sessions, replica picking, response cache, failover.

Modules, in the order a turn flows through them: ``servicer`` (thin gRPC layer)
→ ``converse`` (one stream's turns, each ending with one TurnCompleted) →
``agent_loop`` (one turn, orchestrated: session → tools → answer → record)
over ``planning`` (which tools, their arguments), ``tool_round`` (one round of
calls over ``tools_link``, the multiplexed Execute stream) and ``answer`` (the
answer's generation, its messages from ``prompt``); ``convert`` builds every
proto a turn sends and GetSession returns, from ``turn_progress`` and the
session records. ``generation`` (one generation with response cache and
failover) → ``picker`` (rendezvous hashing with bounded load) over
``replicas`` (the set of ``ReplicaLink``s, one multiplexed Generate stream per
inference replica); ``sessions`` keeps the event log in Redis Streams, in the
shape ``session_records`` defines.

Tool selection inside ``planning``: ``selector`` (nearest examples in the
``embedding`` space, ``no_tool_examples`` for "answer directly"), checked by
``intent_words``; ``planner`` writes the constrained-JSON prompts and
``grounding`` checks filled-in numbers. ``build`` assembles the parts from
``config``; ``main`` runs the process; ``metrics`` counts what happens.
"""
