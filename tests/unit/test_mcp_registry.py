"""Tools that come and go (an MCP server's), through the registry and the executor's guards, with fake tools."""

from __future__ import annotations

import asyncio
from typing import Any

from services.tools.calls import CallProgress, CallRequest, CallStatus, report_progress
from services.tools.executor import REASON_PERMISSION_DENIED, REASON_UNAVAILABLE, BreakerPolicy, ToolExecutor
from services.tools.registry import ToolDefinition, ToolRegistry, ToolUnavailable

OBJ: dict[str, Any] = {"type": "object"}


async def ok(args: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


def mcp_tool(name: str, **kw: Any) -> ToolDefinition:
    return ToolDefinition(name, kw.pop("description", ""), OBJ, kw.pop("fn", ok), server=kw.pop("server", "srv"), **kw)


async def test_replacing_a_servers_tools_wakes_watchers_only_when_they_changed() -> None:
    registry = ToolRegistry([ToolDefinition("calculator", "", OBJ, ok)])
    start = registry.revision
    assert registry.replace_source("srv", [mcp_tool("srv__a"), mcp_tool("srv__b")]) == []
    changed = registry.revision
    assert changed > start and {t.name for t in registry} == {"calculator", "srv__a", "srv__b"}
    registry.replace_source("srv", [mcp_tool("srv__a", fn=ok), mcp_tool("srv__b")])  # new closures, same tools
    assert registry.revision == changed
    waiter = asyncio.ensure_future(registry.wait_changed(changed))
    await asyncio.sleep(0)
    assert not waiter.done()
    clashes = registry.replace_source("srv", [mcp_tool("srv__a", description="new"), mcp_tool("calculator")])
    assert [t.name for t in clashes] == ["calculator"]
    assert await asyncio.wait_for(waiter, 1) > changed
    assert registry.get("calculator") is not None and registry.get("calculator").server == ""  # type: ignore[union-attr]
    registry.remove_source("srv")
    assert [t.name for t in registry] == ["calculator"]


async def test_tenants_hide_and_refuse_and_a_down_backend_fails_before_the_breaker() -> None:
    down = {"why": ""}
    registry = ToolRegistry([mcp_tool("srv__t", tenants=frozenset({"acme"}), unavailable=lambda: down["why"])])
    executor = ToolExecutor(registry, breaker=BreakerPolicy(failure_threshold=1, reset_timeout_s=60))
    assert [t.name for t in registry.visible_to("acme")] == ["srv__t"] and registry.visible_to("beta") == []

    denied = await executor.execute(CallRequest("1", "srv__t", "{}", tenant="beta"))
    assert (denied.status, denied.reason) == (CallStatus.PERMISSION_DENIED, REASON_PERMISSION_DENIED)
    assert (await executor.execute(CallRequest("2", "srv__t", "{}", tenant="acme"))).status is CallStatus.OK

    down["why"] = "MCP server srv is unavailable (its process exited); it is being restarted"
    for i in range(3):  # never counted against the breaker: the server has its own restart
        refused = await executor.execute(CallRequest(f"d{i}", "srv__t", "{}", tenant="acme"))
        assert (refused.status, refused.reason, refused.error_message) == (
            CallStatus.UNAVAILABLE,
            REASON_UNAVAILABLE,
            down["why"],
        )
    down["why"] = ""
    assert (await executor.execute(CallRequest("3", "srv__t", "{}", tenant="acme"))).status is CallStatus.OK


async def test_a_backend_that_goes_away_mid_call_is_unavailable_and_not_retried() -> None:
    calls = []

    async def gone(args: dict[str, Any]) -> None:
        calls.append(1)
        raise ToolUnavailable("MCP server srv went away during the call")

    executor = ToolExecutor(ToolRegistry([mcp_tool("srv__g", fn=gone, max_attempts=3)]), backoff=lambda a: 0)
    outcome = await executor.execute(CallRequest("1", "srv__g", "{}"))
    assert (outcome.status, outcome.reason, len(calls)) == (CallStatus.UNAVAILABLE, REASON_UNAVAILABLE, 1)
    assert executor.breakers["srv__g"].allow()


async def test_a_name_in_a_down_servers_namespace_is_unavailable_not_unknown() -> None:
    executor = ToolExecutor(
        ToolRegistry(), unknown_tool=lambda name: "MCP server srv is still starting" if name.startswith("srv__") else ""
    )
    assert (await executor.execute(CallRequest("1", "srv__x", "{}"))).status is CallStatus.UNAVAILABLE
    assert (await executor.execute(CallRequest("2", "other", "{}"))).status is CallStatus.NOT_FOUND


async def test_the_tools_of_one_server_share_its_bulkhead_and_report_progress() -> None:
    running = {"now": 0, "most": 0}
    release = asyncio.Event()

    async def busy(args: dict[str, Any]) -> dict[str, Any]:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        report_progress(CallProgress(1, 2, "half"))
        await release.wait()
        running["now"] -= 1
        return {}

    registry = ToolRegistry()
    registry.replace_source("srv", [mcp_tool(f"srv__{n}", fn=busy, max_concurrency=2) for n in "abc"])
    executor = ToolExecutor(registry)  # tools registered after it was made get guards on first use
    seen: list[CallProgress] = []
    two_reported = asyncio.Event()

    def sink(progress: CallProgress) -> None:
        seen.append(progress)
        if len(seen) == 2:
            two_reported.set()

    calls = [
        asyncio.ensure_future(executor.execute(CallRequest(n, f"srv__{n}", "{}", timeout_s=5), on_progress=sink))
        for n in "abc"
    ]
    await asyncio.wait_for(two_reported.wait(), 5)
    await asyncio.sleep(0.05)  # room for a third to start, were the bulkhead not shared
    assert running["most"] == 2  # the third waits for the server's bulkhead
    release.set()
    assert all(o.status is CallStatus.OK for o in await asyncio.gather(*calls))
    assert seen[0] == CallProgress(1, 2, "half") and len(seen) == 3
