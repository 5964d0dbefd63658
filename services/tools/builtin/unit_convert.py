"""unit_convert: a quantity the user wrote ("3 gallons") into the unit they asked for (``units.py`` has the table).

The arguments are copied from the message, never composed: ``quantity`` is an
amount with its unit as written (``parse_quantity`` reads it), ``to_unit`` one
of the unit names the table knows (the schema's copy shape is
``units.unit_pattern``, so the router offers only the units the user wrote,
less the one inside the quantity — usually one choice, and then no generation
at all). An unknown unit is a ``ToolError`` that lists the supported ones.
"""

from __future__ import annotations

import math
import re
from typing import Any

from services.runtime.numbers import significant
from services.tools.builtin.units import convert, known, unit, unit_names, unit_pattern
from services.tools.registry import ToolDefinition, ToolError, ToolExample

__all__ = ["TOOL", "convert", "parse_quantity", "summarize", "unit"]


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
_AMOUNT_SHAPE = rf"(?:[-+−]?\.?\d[\d.,]*\s*|(?:{'|'.join(_AMOUNT_WORDS)}) )"
_QUANTITY = rf"^{_AMOUNT_SHAPE}[^\d\s.,]\S*(?: [^\d\s]\S*)?$"
#: A quantity in a unit the table knows: preferred when the message has one ("6 feet", not "6 feet tall"); an
#: unknown unit is still copied otherwise, so the tool can say it does not know it.
_KNOWN_QUANTITY = rf"(?i)^{_AMOUNT_SHAPE}{unit_names()}$"


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
    value, written = parse_quantity(str(args["quantity"]))
    source = known(written)
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
        "Convert a value between units of length, mass, volume, temperature, speed, area or time (km to mi, F to C)."
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
                "x-agentmesh-copy-prefer": _KNOWN_QUANTITY,
                "x-agentmesh-copy-required": True,  # no quantity in the message: not a conversion
            },
            "to_unit": {
                "type": "string",
                "minLength": 1,
                "maxLength": 32,
                "description": "the unit the user wants the answer in, as they wrote it",
                "x-agentmesh-copy": unit_pattern(),
                # A unit of its own, not the quantity's: "Why is a marathon 26.2 miles?" names none to convert to.
                "x-agentmesh-copy-required": True,
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
