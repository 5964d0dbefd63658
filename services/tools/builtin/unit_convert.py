"""unit_convert: length, mass, volume, temperature, speed and area units, under many spellings.

Each unit has one canonical name (``km``, ``lb``, ``fl oz``, ``C``, ``km/h``,
``m2``) and aliases: full names, abbreviations, symbols (``°F``, ``℃``,
``ft²``) and plurals (an alias ending in a letter also matches with an "s").
Lookup ignores case, dots and extra spaces, and a leading "degrees"/"deg"/"°"
("degrees celsius", "deg F", "°C"). US customary volumes (cup, pint, quart,
gallon, fl oz) are the US ones; the imperial ones are ``imp pt`` and ``imp gal``.
"ton" alone is refused as ambiguous (metric, US or UK) rather than guessed.

Every unit converts by a factor to its dimension's base unit (metre, kilogram,
litre, kelvin, metre per second, square metre); temperatures also carry an
offset, K = (value + offset) * factor. Errors are ``ToolError``s the agent can
act on: an unknown unit names the supported ones, and converting between
dimensions says which two met.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from services.tools.numbers import significant
from services.tools.registry import ToolDefinition, ToolError, ToolExample


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
)
AMBIGUOUS = {"ton": "say 't' (metric ton), 'short ton' (US) or 'long ton' (UK)"}
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


def convert(value: float, source: str, target: str) -> float:
    src, dst = unit(source), unit(target)
    if src.dimension != dst.dimension:
        raise ToolError(f"cannot convert {src.dimension} ({source}) to {dst.dimension} ({target})")
    base = src.to_base(value)
    if src.dimension == "temperature":
        if base < 0:
            raise ToolError("below absolute zero")
        # The offsets cancel in floating point (32 F is 5.7e-14 C unrounded); no thermometer reads 1e-10 degrees.
        return round(dst.from_base(base), 10)
    return dst.from_base(base)


def summarize(output: Any) -> str:
    """'5 kg = 11.0231 lb.', in the units as they were written; empty when the output is not ours."""
    if not isinstance(output, dict):
        return ""
    value, result = output.get("value"), output.get("result")
    source, target = output.get("from_unit"), output.get("to_unit")
    numbers = [n for n in (value, result) if isinstance(n, (int, float)) and not isinstance(n, bool)]
    if len(numbers) != 2 or not isinstance(source, str) or not isinstance(target, str):
        return ""
    return f"{significant(numbers[0], 10)} {source.strip()} = {significant(numbers[1], 6)} {target.strip()}."


_AMOUNT = re.compile(r"^(?P<number>[-+−]?(?:\d{1,3}(?:,\d{3})+|\d*)(?:\.\d+)?)(?P<unit>.*)$")
#: Amounts people write as words ("a gallon", "two cups"); anything longer reads better as digits.
_AMOUNT_WORDS = {"a": 1.0, "an": 1.0, "one": 1.0, "two": 2.0, "three": 3.0, "four": 4.0, "five": 5.0, "ten": 10.0}
#: What a quantity looks like: an amount in digits or one of the words above, then a unit of one or two words.
_QUANTITY = rf"^(?:[-+−]?\.?\d[\d.,]*\s*|(?:{'|'.join(_AMOUNT_WORDS)}) )[^\d\s.,]\S*(?: [^\d\s]\S*)?$"


def parse_quantity(text: str) -> tuple[float, str]:
    """``"3 gallons"`` → ``(3.0, "gallons")``: the amount and the unit as written (checked by :func:`unit`).

    The fill copies the quantity from the message instead of splitting it into a
    number and a canonical unit name: a small model copies a span reliably, and
    it mixed up which unit was the source when it had to pick two names (measured
    on the dev split: 5 of 8 unit fills reversed or duplicated a unit).
    """
    stripped = " ".join(text.split())
    match = _AMOUNT.match(stripped)
    number, rest = (match.group("number"), match.group("unit").strip()) if match else ("", stripped)
    if not any(c.isdigit() for c in number):
        word, _, after = rest.partition(" ")
        if number or word.lower() not in _AMOUNT_WORDS:
            raise ToolError(f"quantity {text!r} has no amount; write it as a number and a unit, such as '3 gallons'")
        value, rest = _AMOUNT_WORDS[word.lower()], after.strip()
    else:
        value = float(number.replace(",", "").replace("−", "-"))
    if not rest:
        raise ToolError(f"quantity {text!r} has no unit; write it as a number and a unit, such as '3 gallons'")
    if not math.isfinite(value):
        raise ToolError("the amount must be a finite number")
    return value, rest


async def unit_convert(args: dict[str, Any]) -> dict[str, Any]:
    value, source = parse_quantity(str(args["quantity"]))
    target = str(args["to_unit"])
    result = convert(value, source, target)
    return {
        "value": value,
        "from_unit": source,
        "to_unit": target,
        # 12 significant digits: float noise off, and a tiny result (1 nm in miles) is not rounded to 0.
        "result": float(f"{result:.12g}"),
    }


def _ex(text: str, quantity: str, target: str) -> ToolExample:
    return ToolExample(text, {"quantity": quantity, "to_unit": target})


EXAMPLES = (
    _ex("Convert 5 km to miles.", "5 km", "miles"),
    _ex("How many pounds is 3 kg?", "3 kg", "pounds"),
    _ex("what's 70 kg in lbs", "70 kg", "lbs"),
    _ex("I weigh 165 pounds, how much is that in kilos?", "165 pounds", "kilos"),
    _ex("How many liters are in 2 gallons?", "2 gallons", "liters"),
    _ex("convert 100 feet to meters", "100 feet", "meters"),
    _ex("Convert 26.2 miles to kilometers", "26.2 miles", "kilometers"),
    _ex("What is 30 degrees Celsius in Fahrenheit?", "30 degrees Celsius", "Fahrenheit"),
    _ex("What's 98.6 F in Celsius?", "98.6 F", "Celsius"),
    _ex("what's -40 celsius in fahrenheit", "-40 celsius", "fahrenheit"),
    _ex("Convert 300 K to celsius", "300 K", "celsius"),
    _ex("how tall is 180 cm in inches", "180 cm", "inches"),
    _ex("How many ounces in 500 grams?", "500 grams", "ounces"),
    _ex("My recipe says 8 oz of flour, how many grams is that?", "8 oz", "grams"),
    _ex("I weigh 12 stone, what's that in kg?", "12 stone", "kg"),
    _ex("How many cups is 500 ml?", "500 ml", "cups"),
    _ex("How many fluid ounces are in 2 liters?", "2 liters", "fluid ounces"),
    _ex("how many pints in 4 litres", "4 litres", "pints"),
    _ex("How many quarts in 3 gallons", "3 gallons", "quarts"),
    _ex("How much is 1 metric ton in pounds", "1 metric ton", "pounds"),
    _ex("Convert 10 nautical miles to km", "10 nautical miles", "km"),
    _ex("what is 60 mph in km/h", "60 mph", "km/h"),
    _ex("a 20 km/h wind, how fast is that in knots?", "20 km/h", "knots"),
    _ex("how many square feet is 50 square meters", "50 square meters", "square feet"),
    _ex("Convert 2.5 acres to hectares", "2.5 acres", "hectares"),
    _ex("How many teaspoons are in 2 tablespoons?", "2 tablespoons", "teaspoons"),
    _ex("How many inches are in a foot?", "a foot", "inches"),
)

NEGATIVE_EXAMPLES = (
    "What is the metric system?",
    "Why does the US use miles?",
    "What's the difference between mass and weight?",
    "Who invented the thermometer?",
    "How heavy is an adult elephant?",
    "How far is the Moon from Earth?",
    "Which countries still use Fahrenheit?",
    "Explain how the kilogram is defined",
    "What is 12 times 8?",
    "What time is it in Tokyo?",
    "Write a poem about a long road",
)

TOOL = ToolDefinition(
    name="unit_convert",
    description=(
        "Convert a value between units of length, mass, volume, temperature, speed or area (km to mi, F to C)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "quantity": {
                "type": "string",
                "minLength": 1,
                "maxLength": 48,
                "description": "the amount with its unit, copied from the message (such as '3 gallons')",
                "x-agentmesh-copy": _QUANTITY,
            },
            "to_unit": {
                "type": "string",
                "minLength": 1,
                "maxLength": 32,
                "description": "the unit the user wants the answer in, as they wrote it",
                "x-agentmesh-copy": r"^[^\d\s][^\d]*$",
            },
        },
        "required": ["quantity", "to_unit"],
        "additionalProperties": False,
    },
    fn=unit_convert,
    timeout_s=1.0,
    cache_ttl_s=3600.0,
    examples=EXAMPLES,
    negative_examples=NEGATIVE_EXAMPLES,
    summarize=summarize,
)
