"""The built-in tools, registered in one place: ``default_tools``.

Adding a tool is one small file here exporting a ``ToolDefinition`` (or a
``make_tool`` factory when it needs configuration) and one line below.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.tools.builtin import calculator, clock, http_get, kb_search, unit_convert
from services.tools.registry import ToolDefinition


def default_tools(*, http_allowlist: Sequence[str] = ()) -> list[ToolDefinition]:
    return [
        calculator.TOOL,
        clock.make_tool(),
        unit_convert.TOOL,
        kb_search.make_tool(),
        http_get.make_tool(http_allowlist),
    ]
