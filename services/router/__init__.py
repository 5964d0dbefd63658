"""The router: the agent loop, durable sessions, replica picking, response cache, failover.

Modules, in the order a turn flows through them: ``servicer`` (thin gRPC layer)
→ ``agent_loop`` (one turn: plan → tools → answer) using ``prompt`` (messages
and history compression), ``planner`` (structured-output tool choice),
``tools_link`` (multiplexed Execute stream), ``generation`` (one generation
with response cache and failover) → ``picker`` (rendezvous hashing with
bounded load) over ``replicas`` (the set of ``ReplicaLink``s, one multiplexed
Generate stream per inference replica); ``sessions`` keeps the event log in
Redis Streams.
"""
