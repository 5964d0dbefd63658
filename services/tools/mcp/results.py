"""An MCP ``tools/call`` result as a mesh tool's output: text and structured content in, one JSON object out.

In: ``CallToolResult`` (content blocks, optional structured content, ``isError``).
Out: the structured content when it is an object (as a built-in's output is),
with the text beside it under ``"text"``; else ``{"text": ...}`` and, for
structured content that is not an object, ``"structured"``; or
``McpToolError`` when the server says the call failed (``isError``), whose
message is the server's text, so the model reads why.

Text blocks are joined with blank lines; an embedded text resource counts as
text; images, audio, blobs and resource links become a one-line placeholder
(the model cannot read bytes). Servers built on the SDKs usually repeat the
structured content as JSON text: then the text is left out, not sent twice.
An output whose JSON is longer than the server's ``max_output_bytes`` is cut
to fit and says so in ``truncated`` (a 10 MB result must not become a 10 MB
prompt, or a message over the gRPC limit).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from services.runtime.cache import canonical_json
from services.tools.registry import ToolError

#: ``ToolResult.error_reason`` of an isError result.
REASON_TOOL_ERROR = "MCP_TOOL_ERROR"
#: Longest error text kept from an isError result.
MAX_ERROR_CHARS = 2000


class McpToolError(ToolError):
    """The MCP server answered the call with ``isError``: a tool error the model reads, not retried."""

    reason = REASON_TOOL_ERROR


def output_of(result: types.CallToolResult, *, server: str, max_bytes: int) -> dict[str, Any]:
    """The mesh output of ``result`` (see module docstring); McpToolError when it is an error."""
    text = "\n\n".join(part for part in (_text(block) for block in result.content) if part)
    if result.is_error:
        message = text or "the tool reported an error and gave no reason"
        if len(message) > MAX_ERROR_CHARS:
            message = message[:MAX_ERROR_CHARS] + " [cut]"
        raise McpToolError(f"{message} (MCP server {server})")
    structured = result.structured_content
    output: dict[str, Any] = {}
    if isinstance(structured, dict):
        output.update(structured)
    elif structured is not None:
        output["structured"] = structured
    if text and not (structured is not None and _repeats(text, structured)):
        output["text" if "text" not in output else "content_text"] = text
    return cut(output, max_bytes, text=text)


def cut(output: dict[str, Any], max_bytes: int, *, text: str = "") -> dict[str, Any]:
    """``output`` if its JSON fits in ``max_bytes``, else the result's ``text`` (or the output's JSON) cut to fit,
    with a note."""
    size = len(canonical_json(output).encode())
    if size <= max_bytes:
        return output
    whole = text or canonical_json(output)
    note = f"the tool's output was {size} bytes; only its first part is kept (limit {max_bytes} bytes)"
    room = max(0, max_bytes - len(canonical_json({"text": "", "truncated": note}).encode()))
    # JSON escaping can grow text (quotes, control characters): shrink until the whole object fits.
    kept = whole.encode()[:room].decode(errors="ignore")
    while kept and (over := len(canonical_json({"text": kept, "truncated": note}).encode()) - max_bytes) > 0:
        kept = kept[: len(kept) - over]
    return {"text": kept, "truncated": note}


def _text(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text
        return f"[resource {resource.uri} ({resource.mime_type or 'binary'}), not shown]"
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}]"
    return ""


def _repeats(text: str, structured: Any) -> bool:
    """Whether ``text`` is only the structured content again (as the SDKs write it)."""
    if structured == {"result": text}:
        return True
    try:
        parsed = json.loads(text)
    except ValueError:
        return False
    return bool(structured in (parsed, {"result": parsed}))
