"""The unit table of unit_convert: length, mass, volume, temperature, speed, area and time, under many spellings.

Each unit has one canonical name (``km``, ``lb``, ``fl oz``, ``C``, ``km/h``,
``m2``, ``h``) and aliases: full names, abbreviations, symbols (``°F``, ``℃``,
``ft²``) and plurals (an alias ending in a letter also matches with an "s").
Lookup ignores case, dots and extra spaces, and a leading "degrees"/"deg"/"°"
("degrees celsius", "deg F", "°C"). US customary volumes (cup, pint, quart,
gallon, fl oz) are the US ones; the imperial ones are ``imp pt`` and ``imp gal``.
"ton" alone is refused as ambiguous (metric, US or UK) rather than guessed, and
so is "year" (365 or 365.25 days).

Every unit converts by a factor to its dimension's base unit (metre, kilogram,
litre, kelvin, metre per second, square metre, second: the time units' lengths are the shared
``services.runtime.time_units`` table); temperatures also carry
an offset, K = (value + offset) * factor. Errors are ``ToolError``s the agent
can act on: an unknown unit names the supported ones, and converting between
dimensions says which two met; between a volume and ounces, the ounces are
fluid ounces ("ounces in a liter"). ``unit_pattern`` matches every name the table
knows, so the tool's schema can have the router copy a unit the user wrote.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from services.runtime.time_units import SECONDS
from services.tools.registry import ToolError


@dataclass(frozen=True)
class Unit:
    """A unit: its canonical name, dimension, and how to get to the dimension's base unit."""

    name: str
    dimension: str
    factor: float
    aliases: str = ""  # "|"-separated
    offset: float = 0.0

    def to_base(self, value: float) -> float:
        return (value + self.offset) * self.factor

    def from_base(self, value: float) -> float:
        return value / self.factor - self.offset


UNITS = (
    Unit("mm", "length", 0.001, "millimeter|millimetre"),
    Unit("cm", "length", 0.01, "centimeter|centimetre"),
    Unit("m", "length", 1.0, "meter|metre"),
    Unit("km", "length", 1000.0, "kilometer|kilometre|klick"),
    Unit("in", "length", 0.0254, "inch|inches|″"),
    Unit("ft", "length", 0.3048, "foot|feet|′"),
    Unit("yd", "length", 0.9144, "yard"),
    Unit("mi", "length", 1609.344, "mile|statute mile"),
    Unit("nmi", "length", 1852.0, "nautical mile|naut mi"),
    Unit("nm", "length", 1e-9, "nanometer|nanometre"),
    Unit("um", "length", 1e-6, "µm|μm|micrometer|micrometre|micron"),
    Unit("mg", "mass", 1e-6, "milligram|milligramme"),
    Unit("g", "mass", 0.001, "gram|gramme|gm"),
    Unit("kg", "mass", 1.0, "kilogram|kilogramme|kilo"),
    Unit("t", "mass", 1000.0, "tonne|metric ton|metric tonne"),
    Unit("oz", "mass", 0.028349523125, "ounce"),
    Unit("lb", "mass", 0.45359237, "pound|lbs"),
    Unit("st", "mass", 6.35029318, "stone"),
    Unit("short ton", "mass", 907.18474, "us ton"),
    Unit("long ton", "mass", 1016.0469088, "imperial ton|uk ton"),
    Unit("ml", "volume", 0.001, "milliliter|millilitre|cc|cm3|cm³|cubic centimeter|cubic centimetre"),
    Unit("cl", "volume", 0.01, "centiliter|centilitre"),
    Unit("dl", "volume", 0.1, "deciliter|decilitre"),
    Unit("L", "volume", 1.0, "liter|litre|ltr"),
    Unit("m3", "volume", 1000.0, "m³|cubic meter|cubic metre"),
    Unit("tsp", "volume", 0.00492892159375, "teaspoon"),
    Unit("tbsp", "volume", 0.01478676478125, "tablespoon"),
    Unit("fl oz", "volume", 0.0295735295625, "floz|fluid ounce|fl ounce|us fl oz"),
    Unit("cup", "volume", 0.2365882365, "us cup"),
    Unit("pt", "volume", 0.473176473, "pint|us pint"),
    Unit("qt", "volume", 0.946352946, "quart|us quart"),
    Unit("gal", "volume", 3.785411784, "gallon|us gallon|us gal"),
    Unit("imp pt", "volume", 0.56826125, "imperial pint|uk pint"),
    Unit("imp gal", "volume", 4.54609, "imperial gallon|uk gallon|uk gal"),
    Unit("in3", "volume", 0.016387064, "in³|cu in|cubic inch|cubic inches"),
    Unit("ft3", "volume", 28.316846592, "ft³|cu ft|cubic foot|cubic feet"),
    Unit("C", "temperature", 1.0, "celsius|centigrade", offset=273.15),
    Unit("F", "temperature", 5 / 9, "fahrenheit", offset=459.67),
    Unit("K", "temperature", 1.0, "kelvin"),
    Unit("m/s", "speed", 1.0, "mps|m/sec|meter per second|meters per second|metre per second|metres per second"),
    Unit(
        "km/h",
        "speed",
        1 / 3.6,
        "kph|kmh|kmph|km/hr|km per hour|kilometer per hour|kilometers per hour|kilometre per hour|kilometres per hour",
    ),
    Unit("mph", "speed", 0.44704, "mi/h|mi/hr|mile per hour|miles per hour"),
    Unit("kn", "speed", 1852 / 3600, "knot"),
    Unit("ft/s", "speed", 0.3048, "fps|ft/sec|foot per second|feet per second"),
    Unit("cm2", "area", 1e-4, "cm²|sq cm|square centimeter|square centimetre"),
    Unit("m2", "area", 1.0, "m²|sq m|sqm|square meter|square metre"),
    Unit("km2", "area", 1e6, "km²|sq km|square kilometer|square kilometre"),
    Unit("in2", "area", 0.00064516, "in²|sq in|square inch|square inches"),
    Unit("ft2", "area", 0.09290304, "ft²|sq ft|sqft|square foot|square feet"),
    Unit("yd2", "area", 0.83612736, "yd²|sq yd|square yard"),
    Unit("mi2", "area", 2589988.110336, "mi²|sq mi|square mile"),
    Unit("acre", "area", 4046.8564224, "ac"),
    Unit("ha", "area", 10000.0, "hectare"),
    Unit("ms", "time", SECONDS["millisecond"], "millisecond|msec"),
    Unit("s", "time", SECONDS["second"], "second|sec"),
    Unit("min", "time", SECONDS["minute"], "minute"),
    Unit("h", "time", SECONDS["hour"], "hour|hr"),
    Unit("day", "time", SECONDS["day"], ""),
    Unit("week", "time", SECONDS["week"], "wk"),
)
AMBIGUOUS = {
    "ton": "say 't' (metric ton), 'short ton' (US) or 'long ton' (UK)",
    "year": "say how many days (365, or 365.25 on average)",
}
_DEGREES = re.compile(r"^(?:degrees?|deg|°)\s*")


def _key(name: str) -> str:
    """How a unit name is looked up: lower case, no dots, single spaces, no "degrees" in front."""
    key = name.replace("℃", "°C").replace("℉", "°F").replace("º", "°").replace(".", "").lower()
    key = " ".join(key.split())
    stripped = _DEGREES.sub("", key)
    return stripped or key


def _index(units: tuple[Unit, ...]) -> dict[str, Unit]:
    index: dict[str, Unit] = {}
    for unit in units:
        for alias in (unit.name, *filter(None, unit.aliases.split("|"))):
            key = _key(alias)
            if index.setdefault(key, unit) is not unit:
                raise ValueError(f"unit alias {alias!r} names both {index[key].name!r} and {unit.name!r}")
    for unit in units:  # plurals last: a real alias always wins over a made-up plural
        for alias in (unit.name, *filter(None, unit.aliases.split("|"))):
            key = _key(alias)
            if len(key) > 1 and key[-1].isalpha() and not key.endswith("s"):
                index.setdefault(key + "s", unit)
    return index


BY_NAME = _index(UNITS)


def unit(name: str) -> Unit:
    """The unit ``name`` means (see module docstring), or a ToolError naming the supported units."""
    key = _key(name)
    found = BY_NAME.get(key)
    if found is not None:
        return found
    ambiguous = AMBIGUOUS.get(key.removesuffix("s"))
    if ambiguous is not None:
        raise ToolError(f"ambiguous unit {name!r}; {ambiguous}")
    raise ToolError(f"unknown unit {name!r}; supported: {', '.join(u.name for u in UNITS)}")


def known(name: str) -> str:
    """``name``, or its first word when only that is a unit ("6 feet tall", "3 miles away")."""
    first, _, rest = name.strip().partition(" ")
    if _key(name) not in BY_NAME and rest and _key(first) in BY_NAME:
        return first
    return name


def convert(value: float, source: str, target: str) -> float:
    src, dst = unit(source), unit(target)
    # "ounces in a liter": between a volume and ounces, the ounces are fluid ounces.
    if {src.dimension, dst.dimension} == {"mass", "volume"} and "oz" in (src.name, dst.name):
        src, dst = (BY_NAME["fl oz"] if u.name == "oz" else u for u in (src, dst))
    if src.dimension != dst.dimension:
        raise ToolError(f"cannot convert {src.dimension} ({source}) to {dst.dimension} ({target})")
    base = src.to_base(value)
    if src.dimension == "temperature":
        if base < 0:
            raise ToolError("below absolute zero")
        # The offsets cancel in floating point (32 F is 5.7e-14 C unrounded); no thermometer reads 1e-10 degrees.
        return round(dst.from_base(base), 10)
    return dst.from_base(base)


@functools.cache
def unit_names() -> str:
    """A regular expression (no anchors) for every unit name and plural ``unit`` knows, with or without
    "degrees" in front."""
    names = sorted({re.escape(k) for k in BY_NAME}, key=lambda n: (-len(n), n))
    return r"(?:(?:degrees?|deg)\s+|°\s*)?(?:" + "|".join(names) + r")\.?"


def unit_pattern() -> str:
    """A regular expression (case-insensitive, whole value) for a known unit: what a copied target unit may be."""
    return rf"(?i)^{unit_names()}$"
