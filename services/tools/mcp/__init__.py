"""Bring your own tools: the tool executor as an MCP client of every server in its MCP config.

Modules, in the order a tool travels: ``config`` (the ``mcpServers`` JSON,
validated once), ``connection`` (one server kept connected: initialise, list,
watch, call, restart), ``definitions`` (its tools as registry definitions),
``results`` (a call's result as output), ``mount`` (all servers, kept in step
with the registry). The executor's guards (``services/tools/executor.py``)
treat the mounted tools exactly as built-ins.
"""
