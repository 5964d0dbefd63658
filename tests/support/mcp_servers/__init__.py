"""Real MCP servers written for the tests, run as processes over stdio or streamable HTTP.

``workbench.py``: the SDK's ``MCPServer`` with tools for every case (a call,
isError, progress, cancellation, list_changed, a large result, a hang).
``chatty.py``: hand-written, prints a line that is not JSON-RPC on its first
start. ``paged.py``: the SDK's low-level server
listing its tools over several pages, one with a schema that is not JSON
Schema. ``silent.py``: reads stdin and never answers (a server that never
initialises). ``stages.py``: one tool without arguments that reports
progress (for turns planned on the simulator engine). Each leaves marks (files) in ``$MCP_TEST_MARKS`` so a test can see
what reached the server.
"""
