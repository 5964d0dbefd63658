"""clock: the current time in a place or IANA time zone (from the system's tz database).

The argument is what the user named: a zone's city ("Tokyo", "new york"), a
country or a city of another zone ("India", "San Francisco", ``places.py``),
an abbreviation ("PST"), or an IANA name in any case ("asia/tokyo"). Its
schema marks it to be copied from the conversation when a known place is in
it (the router's fill then picks among the places the user wrote instead of
composing a zone name); the output names the zone actually used. Anything
else is a ``ToolError`` that says what to send instead.
"""

from __future__ import annotations

import datetime as dt
import functools
import zoneinfo
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from services.tools.builtin.places import place_pattern, zone_for
from services.tools.registry import ToolDefinition, ToolError, ToolExample


def resolve_zone(name: str) -> ZoneInfo:
    """The zone ``name`` means: an exact IANA name, a case-insensitive one, a place ``places.zone_for`` knows
    (a zone's city, a country, a big city of another zone, "PST"), or the city of an area/city name whose
    area is wrong (a small model writes "Asia/Berlin" for Berlin)."""
    if "/" not in name and (place := zone_for(name)):  # "Singapore", "Japan", "EST": the place, not the legacy
        return ZoneInfo(place)  # link of that name (tz "EST" has no daylight saving time; people mean New York)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    exact = _zones_by_lower_name().get(name.strip().lower())
    match = exact or zone_for(name)
    if match is None and "/" in name:  # "Asia/Berlin": a real city under the wrong area is still that city
        match = zone_for(name.rsplit("/", 1)[1])
    if match is None:
        raise ToolError(f"unknown time zone {name!r}; name a city, a country or an IANA zone such as 'Asia/Tokyo'")
    return ZoneInfo(match)


@functools.cache
def _zones_by_lower_name() -> dict[str, str]:
    """Lower-cased IANA names → the IANA name, built once (the tz database does not change while we run)."""
    return {n.lower(): n for n in zoneinfo.available_timezones()}


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


# The place as the user wrote it; a question that names no place gets UTC: the tool cannot know where
# the user is.
EXAMPLES = (
    _ex("What time is it in Tokyo?", "Tokyo"),
    _ex("what's the time in new york right now", "new york"),
    _ex("Current time in London please", "London"),
    _ex("what time is it in paris", "paris"),
    _ex("Tell me the time in Los Angeles.", "Los Angeles"),
    _ex("What's the local time in Berlin?", "Berlin"),
    _ex("Is it morning in Sydney right now?", "Sydney"),
    _ex("What time is it in India?", "India"),
    _ex("hey what time is it over in chicago", "chicago"),
    _ex("Can you tell me the current time in Dubai?", "Dubai"),
    _ex("what's the time in beijing", "beijing"),
    _ex("Is it late in Singapore now?", "Singapore"),
    _ex("Is it already tomorrow in Tokyo?", "Tokyo"),
    _ex("What day of the week is it in Auckland?", "Auckland"),
    _ex("what's today's date in São Paulo", "São Paulo"),
    _ex("Is it still Friday in Hawaii?", "Hawaii"),
    _ex("time in Moscow?", "Moscow"),
    _ex("What time is it in Toronto", "Toronto"),
    _ex("What's the date today?", "UTC"),
    _ex("What day is it?", "UTC"),
    _ex("what time is it in UTC", "UTC"),
    _ex("What's the time right now?", "UTC"),
    # Asked sideways: whether it is day or night there, whether people are up or places open.
    _ex("Would my cousin in Madrid be awake at this hour?", "Madrid"),
    _ex("Are the shops in Istanbul open at this hour?", "Istanbul"),
    _ex("Is it too early to call my aunt in Lima?", "Lima"),
    _ex("Is it evening in Cairo yet?", "Cairo"),
    _ex("Is it the middle of the night in Manila?", "Manila"),
    _ex("is it lunchtime yet in Bangkok", "Bangkok"),
    _ex("Is it too late to phone my boss in Denver?", "Denver"),
    _ex("Is my friend in Vancouver likely asleep?", "Vancouver"),
    _ex("What hour is it in Lagos?", "Lagos"),
    _ex("Is it a good moment to call the office in Jakarta?", "Jakarta"),
    _ex("What does the clock say in Vienna at the moment?", "Vienna"),
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
    "Will it be sunny in Madrid this weekend?",
    "What's the forecast for tomorrow?",
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
        description="Current date and time in a city, country or IANA time zone, e.g. 'Tokyo' or 'Europe/Paris'.",
        parameters={
            "type": "object",
            "properties": {
                "timezone": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64,
                    "description": "the place asked about as the user wrote it, or an IANA zone; UTC if none",
                    "default": "UTC",
                    "x-agentmesh-copy": place_pattern(),
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
