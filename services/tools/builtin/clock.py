"""clock: the current time in a named IANA time zone (from the system's tz database)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from services.tools.registry import ToolDefinition, ToolError


def make_tool(now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> ToolDefinition:
    async def clock(args: dict[str, Any]) -> dict[str, Any]:
        name = str(args.get("timezone") or "UTC")
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ToolError(f"unknown time zone {name!r}; use an IANA name such as 'Asia/Tokyo'") from None
        local = now().astimezone(zone)
        return {
            "timezone": name,
            "iso": local.isoformat(timespec="seconds"),
            "time": local.strftime("%H:%M"),
            "date": local.strftime("%Y-%m-%d"),
            "weekday": local.strftime("%A"),
            "utc_offset": local.strftime("%z"),
        }

    return ToolDefinition(
        name="clock",
        description="Current date and time in an IANA time zone, e.g. 'Asia/Tokyo' or 'Europe/Paris'.",
        parameters={
            "type": "object",
            "properties": {"timezone": {"type": "string", "minLength": 1, "maxLength": 64}},
            "required": ["timezone"],
            "additionalProperties": False,
        },
        fn=clock,
        timeout_s=1.0,
        cache_ttl_s=0.0,  # the answer changes every second
    )
