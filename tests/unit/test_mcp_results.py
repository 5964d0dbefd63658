"""An MCP call result as a mesh tool's output: text and structured content, isError, placeholders, the cut."""

from __future__ import annotations

import json

import mcp_types as types
import pytest

from services.runtime.cache import canonical_json
from services.tools.mcp.results import REASON_TOOL_ERROR, McpToolError, cut, output_of


def result(*content: types.ContentBlock, structured: object = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured, is_error=error)


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_structured_content_is_the_output_and_its_json_echo_is_not_sent_twice() -> None:
    assert output_of(result(text('{"a": 1}'), structured={"a": 1}), server="s", max_bytes=1000) == {"a": 1}
    assert output_of(result(text("3"), structured={"result": 3}), server="s", max_bytes=1000) == {"result": 3}
    assert output_of(result(text("done"), structured={"result": "done"}), server="s", max_bytes=1000) == {
        "result": "done"
    }
    both = output_of(result(text("Created."), structured={"id": 7}), server="s", max_bytes=1000)
    assert both == {"id": 7, "text": "Created."}
    assert output_of(result(text("a"), text("b")), server="s", max_bytes=1000) == {"text": "a\n\nb"}
    assert output_of(result(structured=[1, 2]), server="s", max_bytes=1000) == {"structured": [1, 2]}


def test_content_the_model_cannot_read_becomes_a_placeholder() -> None:
    image = types.ImageContent(type="image", data="AAAA", mime_type="image/png")
    resource = types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri="file:///a.txt", text="inside")
    )
    out = output_of(result(text("see"), image, resource), server="s", max_bytes=1000)
    assert out == {"text": "see\n\n[image image/png, 3 bytes, not shown]\n\ninside"}


def test_is_error_is_a_tool_error_with_the_servers_words() -> None:
    with pytest.raises(McpToolError) as caught:
        output_of(result(text("the calendar is locked"), error=True), server="cal", max_bytes=1000)
    assert str(caught.value) == "the calendar is locked (MCP server cal)"
    assert caught.value.reason == REASON_TOOL_ERROR
    with pytest.raises(McpToolError, match="gave no reason"):
        output_of(result(error=True), server="cal", max_bytes=1000)
    with pytest.raises(McpToolError) as long:
        output_of(result(text("e" * 10_000), error=True), server="cal", max_bytes=1000)
    assert len(str(long.value)) < 2100


@pytest.mark.parametrize("limit", [200, 4096, 65536])
def test_a_large_output_is_cut_to_fit_and_says_so(limit: int) -> None:
    out = output_of(result(text('x"\n' * 1_000_000)), server="s", max_bytes=limit)
    assert len(canonical_json(out).encode()) <= limit
    assert out["text"].startswith('x"\n') and "3000000 bytes" not in out["truncated"]
    assert f"limit {limit} bytes" in out["truncated"]
    small = {"text": "fits"}
    assert cut(small, 100) is small
    structured = cut({"rows": ["y" * 50] * 100}, 300)
    assert json.loads(canonical_json(structured))["text"].startswith('{"rows":')
