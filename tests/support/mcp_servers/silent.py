"""A test "MCP server" that reads its stdin and never answers: it never initialises."""

from __future__ import annotations

import sys

for _line in sys.stdin:
    pass
