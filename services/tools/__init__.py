"""The tool executor: runs agent tools concurrently with timeouts, retries, breakers and a cache.

Modules: ``registry`` (tool definitions, compiled argument validators),
``builtin/`` (one small file per tool; ``builtin.default_tools`` registers
them), ``executor`` (one call through every guard), ``session`` (one Execute
stream: calls multiplexed by id), ``servicer``, ``metrics``, ``config``, ``main``.
"""
