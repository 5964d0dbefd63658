"""The tool executor: runs agent tools concurrently with timeouts, retries, breakers and a cache.

Modules: ``registry`` (tool definitions, compiled argument validators),
``builtin/`` (one small file per tool; ``builtin.default_tools`` registers
them), ``calls`` (what flows into and out of a call), ``executor`` (one call
through every guard), ``convert`` (proto ↔ calls), ``session`` (one Execute
stream: calls multiplexed by id), ``servicer``, ``metrics``, ``config``,
``build``, ``main``; ``numbers`` formats figures for the tools' summaries and
``kb/`` holds the knowledge-base text ``builtin`` searches.
"""
