"""clock: the current time in a named IANA time zone (from the system's tz database).

A name that is not an IANA zone but is a zone's city ("Tokyo", "new york") or
an IANA name in the wrong case ("asia/tokyo") is resolved to that zone, since a
small model filling the argument often writes the city the user wrote; the
output names the zone actually used. Anything else is a ``ToolError``.
"""

from __future__ import annotations

import datetime as dt
import functools
import zoneinfo
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from services.tools.registry import ToolDefinition, ToolError, ToolExample

_AREAS = frozenset(["Africa", "America", "Antarctica", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific"])


@functools.cache
def _zones_by_lower_name() -> dict[str, str]:
    """Lower-cased IANA names and city parts ("new_york", "new york") → the IANA name; built on first need."""
    names = zoneinfo.available_timezones()
    index = {name.lower(): name for name in names}
    # Cities only from the geographic areas, so "Eastern" never lands on a legacy alias ("Canada/Eastern").
    for name in sorted(n for n in names if n.split("/", 1)[0] in _AREAS):
        city = name.rsplit("/", 1)[-1].lower()
        index.setdefault(city, name)
        index.setdefault(city.replace("_", " "), name)
    return index


def resolve_zone(name: str) -> ZoneInfo:
    """The zone ``name`` means: an exact IANA name, else a case-insensitive name or city match (also the city
    of an area/city name whose area is wrong: a small model writes "Asia/Berlin" for Berlin)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    by_name = _zones_by_lower_name()
    wanted = " ".join(name.split()).lower()
    match = by_name.get(wanted)
    if match is None and "/" in wanted:  # "Asia/Berlin": a real city under the wrong area is still that city
        match = by_name.get(wanted.rsplit("/", 1)[1].replace("_", " "))
    if match is None:
        raise ToolError(f"unknown time zone {name!r}; use an IANA name such as 'Asia/Tokyo'")
    return ZoneInfo(match)


def summarize(output: Any) -> str:
    """'In Asia/Tokyo it is 14:03 on Monday, 2026-11-30.'; empty when the output is not the clock's."""
    if not isinstance(output, dict):
        return ""
    fields = [output.get(k) for k in ("timezone", "time", "weekday", "date")]
    if not all(isinstance(f, str) and f for f in fields):
        return ""
    zone, time, weekday, date = fields
    return f"In {zone} it is {time} on {weekday}, {date}."


def _ex(text: str, timezone: str) -> ToolExample:
    return ToolExample(text, {"timezone": timezone})


# A question that names no place gets UTC: the tool cannot know where the user is.
EXAMPLES = (
    _ex("What time is it in Tokyo?", "Asia/Tokyo"),
    _ex("what's the time in new york right now", "America/New_York"),
    _ex("Current time in London please", "Europe/London"),
    _ex("what time is it in paris", "Europe/Paris"),
    _ex("Tell me the time in Los Angeles.", "America/Los_Angeles"),
    _ex("What's the local time in Berlin?", "Europe/Berlin"),
    _ex("Is it morning in Sydney right now?", "Australia/Sydney"),
    _ex("What time is it in India?", "Asia/Kolkata"),
    _ex("hey what time is it over in chicago", "America/Chicago"),
    _ex("Can you tell me the current time in Dubai?", "Asia/Dubai"),
    _ex("what's the time in beijing", "Asia/Shanghai"),
    _ex("Is it late in Singapore now?", "Asia/Singapore"),
    _ex("What day of the week is it in Auckland?", "Pacific/Auckland"),
    _ex("what's today's date in São Paulo", "America/Sao_Paulo"),
    _ex("Is it still Friday in Hawaii?", "Pacific/Honolulu"),
    _ex("time in Moscow?", "Europe/Moscow"),
    _ex("What time is it in Toronto", "America/Toronto"),
    _ex("What's the date today?", "UTC"),
    _ex("What day is it?", "UTC"),
    _ex("what time is it in UTC", "UTC"),
    _ex("What's the time right now?", "UTC"),
)

NEGATIVE_EXAMPLES = (
    "What is a time zone?",
    "Tell me a story about time travel",
    "Why do we have daylight saving time?",
    "How long is the flight from Tokyo to London?",
    "What's the history of Greenwich Mean Time?",
    "How do mechanical clocks work?",
    "What does the phrase 'time flies' mean?",
    "Is it better to study in the morning or at night?",
    "How many hours are in a week?",
    "Recommend a good watch for running",
    # A place name alone is not a time question: these are about the place.
    "What's the weather like in London today?",
    "What is the most famous landmark in Tokyo?",
    "Who is the mayor of Berlin?",
    "What currency do they use in Japan?",
    "What is the population of New York City?",
)


def make_tool(now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> ToolDefinition:
    async def clock(args: dict[str, Any]) -> dict[str, Any]:
        zone = resolve_zone(str(args.get("timezone") or "UTC"))
        local = now().astimezone(zone)
        return {
            "timezone": zone.key,
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
            "properties": {
                "timezone": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64,
                    "description": "IANA time zone of the place asked about, e.g. Europe/Berlin; UTC if none",
                }
            },
            "required": ["timezone"],
            "additionalProperties": False,
        },
        fn=clock,
        timeout_s=1.0,
        cache_ttl_s=0.0,  # the answer changes every second
        examples=EXAMPLES,
        negative_examples=NEGATIVE_EXAMPLES,
        summarize=summarize,
    )
