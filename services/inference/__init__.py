"""The inference service: token generation from one engine replica over multiplexed streams.

Modules: ``engine`` (the interface and the data flowing through it),
``vllm_engine`` and ``simulator`` (the two engines; ``vllm_stats`` and
``sim_text`` beside them), ``chat`` (chat-template messages), ``convert`` (proto ↔
domain, with input validation), ``session`` (one Generate stream: many
requests in, coalesced frames out), ``servicer`` (thin gRPC layer),
``metrics``, ``config``, ``build`` (the parts from the config) and ``main``
(the process).
"""
