"""Place names → IANA time zones, for the clock: the zone cities of the tz database plus what people say instead.

People ask for the time in a place, not in a zone: "Tokyo", "new york", but
also "India", "San Francisco", "Beijing" or "PST", which are no zone's city.
``zone_for`` maps any of them to a zone; ``place_pattern`` is one regular
expression that matches exactly the names ``zone_for`` knows, so the clock's
schema can tell the router's fill to copy a place the user wrote (an enum of
the message's spans that are places) rather than compose a zone name.

Only geographic zones of depth two (Area/City) and Argentina's cities count as
cities: the deeper US zones are county seats ("Indiana/Tell_City",
"North_Dakota/Center") whose names are everyday words. Zone cities that are
common English words ("Easter", "Wake", "Midway", "Christmas") are left out of
the copyable names too; their IANA names still work.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import zoneinfo

AREAS = frozenset(["Africa", "America", "Antarctica", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific"])

#: Zone cities that read as ordinary words in a message: never copied as a place.
_WORDLIKE = frozenset(
    [
        "casey",
        "center",
        "christmas",
        "davis",
        "easter",
        "godthab",
        "macquarie",
        "mawson",
        "midway",
        "palmer",
        "reunion",
        "rothera",
        "stanley",
        "syowa",
        "troll",
        "vostok",
        "wake",
    ]
)

#: What people name instead of a zone city: countries, big cities of a zone named after another, abbreviations.
ALIASES: dict[str, str] = {
    # countries and regions
    "japan": "Asia/Tokyo",
    "china": "Asia/Shanghai",
    "india": "Asia/Kolkata",
    "korea": "Asia/Seoul",
    "south korea": "Asia/Seoul",
    "taiwan": "Asia/Taipei",
    "thailand": "Asia/Bangkok",
    "vietnam": "Asia/Ho_Chi_Minh",
    "indonesia": "Asia/Jakarta",
    "philippines": "Asia/Manila",
    "pakistan": "Asia/Karachi",
    "israel": "Asia/Jerusalem",
    "uae": "Asia/Dubai",
    "turkey": "Europe/Istanbul",
    "russia": "Europe/Moscow",
    "uk": "Europe/London",
    "england": "Europe/London",
    "britain": "Europe/London",
    "scotland": "Europe/London",
    "ireland": "Europe/Dublin",
    "france": "Europe/Paris",
    "germany": "Europe/Berlin",
    "italy": "Europe/Rome",
    "spain": "Europe/Madrid",
    "portugal": "Europe/Lisbon",
    "netherlands": "Europe/Amsterdam",
    "holland": "Europe/Amsterdam",
    "belgium": "Europe/Brussels",
    "switzerland": "Europe/Zurich",
    "austria": "Europe/Vienna",
    "sweden": "Europe/Stockholm",
    "norway": "Europe/Oslo",
    "denmark": "Europe/Copenhagen",
    "finland": "Europe/Helsinki",
    "poland": "Europe/Warsaw",
    "greece": "Europe/Athens",
    "ukraine": "Europe/Kyiv",
    "iceland": "Atlantic/Reykjavik",
    "egypt": "Africa/Cairo",
    "kenya": "Africa/Nairobi",
    "nigeria": "Africa/Lagos",
    "south africa": "Africa/Johannesburg",
    "morocco": "Africa/Casablanca",
    "brazil": "America/Sao_Paulo",
    "argentina": "America/Argentina/Buenos_Aires",
    "chile": "America/Santiago",
    "peru": "America/Lima",
    "colombia": "America/Bogota",
    "mexico": "America/Mexico_City",
    "canada": "America/Toronto",
    "australia": "Australia/Sydney",
    "new zealand": "Pacific/Auckland",
    "hawaii": "Pacific/Honolulu",
    "alaska": "America/Anchorage",
    "california": "America/Los_Angeles",
    "texas": "America/Chicago",
    "florida": "America/New_York",
    # cities whose zone is named after another city
    "beijing": "Asia/Shanghai",
    "hong kong": "Asia/Hong_Kong",
    "mumbai": "Asia/Kolkata",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "bangalore": "Asia/Kolkata",
    "bengaluru": "Asia/Kolkata",
    "chennai": "Asia/Kolkata",
    "osaka": "Asia/Tokyo",
    "kyoto": "Asia/Tokyo",
    "abu dhabi": "Asia/Dubai",
    "hanoi": "Asia/Bangkok",
    "saigon": "Asia/Ho_Chi_Minh",
    "ho chi minh city": "Asia/Ho_Chi_Minh",
    "tel aviv": "Asia/Jerusalem",
    "san francisco": "America/Los_Angeles",
    "seattle": "America/Los_Angeles",
    "portland": "America/Los_Angeles",
    "san diego": "America/Los_Angeles",
    "las vegas": "America/Los_Angeles",
    "la": "America/Los_Angeles",
    "boston": "America/New_York",
    "miami": "America/New_York",
    "atlanta": "America/New_York",
    "washington": "America/New_York",
    "washington dc": "America/New_York",
    "philadelphia": "America/New_York",
    "nyc": "America/New_York",
    "new york city": "America/New_York",
    "dallas": "America/Chicago",
    "houston": "America/Chicago",
    "austin": "America/Chicago",
    "minneapolis": "America/Chicago",
    "montreal": "America/Toronto",
    "ottawa": "America/Toronto",
    "calgary": "America/Edmonton",
    "rio de janeiro": "America/Sao_Paulo",
    "rio": "America/Sao_Paulo",
    "são paulo": "America/Sao_Paulo",
    "munich": "Europe/Berlin",
    "frankfurt": "Europe/Berlin",
    "hamburg": "Europe/Berlin",
    "barcelona": "Europe/Madrid",
    "milan": "Europe/Rome",
    "venice": "Europe/Rome",
    "florence": "Europe/Rome",
    "geneva": "Europe/Zurich",
    "manchester": "Europe/London",
    "edinburgh": "Europe/London",
    "st petersburg": "Europe/Moscow",
    "saint petersburg": "Europe/Moscow",
    "kiev": "Europe/Kyiv",
    "melbourne": "Australia/Melbourne",
    "cape town": "Africa/Johannesburg",
    # abbreviations people use for zones
    "utc": "UTC",
    "gmt": "Etc/GMT",
    "pst": "America/Los_Angeles",
    "pdt": "America/Los_Angeles",
    "pacific time": "America/Los_Angeles",
    "est": "America/New_York",
    "edt": "America/New_York",
    "eastern time": "America/New_York",
    "cst": "America/Chicago",
    "cdt": "America/Chicago",
    "central time": "America/Chicago",
    "mst": "America/Denver",
    "mountain time": "America/Denver",
    "cet": "Europe/Paris",
    "ist": "Asia/Kolkata",
    "jst": "Asia/Tokyo",
}


def fold(name: str) -> str:
    """A place name as looked up: lower case, spaces for underscores, single spaces, accents kept as written
    and also folded ("são paulo" and "sao paulo" both work)."""
    return " ".join(name.replace("_", " ").split()).lower().strip(" .,")


def _unaccented(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


@functools.cache
def cities() -> dict[str, str]:
    """Zone city names ("tokyo", "new york", "buenos aires") → the IANA name."""
    out: dict[str, str] = {}
    for name in sorted(zoneinfo.available_timezones()):
        parts = name.split("/")
        if parts[0] not in AREAS or not (len(parts) == 2 or parts[:2] == ["America", "Argentina"]):
            continue
        out.setdefault(fold(parts[-1]), name)
    return out


def zone_for(name: str) -> str | None:
    """The IANA zone a place name means (a zone city, an alias, either without accents), or None."""
    wanted = fold(name)
    for key in (wanted, _unaccented(wanted)):
        found = ALIASES.get(key) or cities().get(key)
        if found:
            return found
    return None


@functools.cache
def place_pattern() -> str:
    """A regular expression (case-insensitive, whole value) matching every name ``zone_for`` knows, except
    the word-like zone cities; spaces in a name match spaces or underscores."""
    names = {n for n in cities() if n not in _WORDLIKE} | set(ALIASES)
    alternatives = sorted((re.escape(n).replace(r"\ ", r"[ _]") for n in names), key=lambda n: (-len(n), n))
    return r"(?i)^(?:" + "|".join(alternatives) + r")$"
