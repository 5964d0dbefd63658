"""unit_convert: common length, mass, volume and temperature units."""

from __future__ import annotations

import math
from typing import Any

from services.tools.registry import ToolDefinition, ToolError

# Factor to the base unit of each dimension (metre, kilogram, litre).
LINEAR: dict[str, tuple[str, float]] = {
    "mm": ("length", 0.001), "cm": ("length", 0.01), "m": ("length", 1.0), "km": ("length", 1000.0),
    "in": ("length", 0.0254), "ft": ("length", 0.3048), "yd": ("length", 0.9144),
    "mi": ("length", 1609.344),
    "mg": ("mass", 1e-6), "g": ("mass", 0.001), "kg": ("mass", 1.0), "t": ("mass", 1000.0),
    "oz": ("mass", 0.028349523125), "lb": ("mass", 0.45359237),
    "ml": ("volume", 0.001), "l": ("volume", 1.0), "m3": ("volume", 1000.0),
    "tsp": ("volume", 0.00492892159375), "tbsp": ("volume", 0.01478676478125),
    "cup": ("volume", 0.2365882365),
    "pt": ("volume", 0.473176473), "qt": ("volume", 0.946352946), "gal": ("volume", 3.785411784),
}  # fmt: skip
ALIASES = {
    "meter": "m", "meters": "m", "metre": "m", "metres": "m", "kilometer": "km", "kilometers": "km",
    "centimeter": "cm", "centimeters": "cm", "millimeter": "mm", "millimeters": "mm", "inch": "in",
    "inches": "in", "foot": "ft", "feet": "ft", "yard": "yd", "yards": "yd", "mile": "mi", "miles": "mi",
    "gram": "g", "grams": "g", "kilogram": "kg", "kilograms": "kg", "pound": "lb", "pounds": "lb",
    "lbs": "lb", "ounce": "oz", "ounces": "oz", "tonne": "t", "tonnes": "t", "liter": "l", "liters": "l",
    "litre": "l", "litres": "l", "milliliter": "ml", "milliliters": "ml", "gallon": "gal", "gallons": "gal",
    "c": "celsius", "°c": "celsius", "f": "fahrenheit", "°f": "fahrenheit", "k": "kelvin",
}  # fmt: skip
TEMPERATURE = {"celsius", "fahrenheit", "kelvin"}


def _unit(name: str) -> str:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in LINEAR and key not in TEMPERATURE:
        raise ToolError(f"unknown unit {name!r}")
    return key


def _to_kelvin(value: float, unit: str) -> float:
    if unit == "celsius":
        return value + 273.15
    if unit == "fahrenheit":
        return (value - 32) * 5 / 9 + 273.15
    return value


def _from_kelvin(value: float, unit: str) -> float:
    if unit == "celsius":
        return value - 273.15
    if unit == "fahrenheit":
        return (value - 273.15) * 9 / 5 + 32
    return value


def convert(value: float, source: str, target: str) -> float:
    src, dst = _unit(source), _unit(target)
    if src in TEMPERATURE or dst in TEMPERATURE:
        if not (src in TEMPERATURE and dst in TEMPERATURE):
            raise ToolError(f"cannot convert {source} to {target}")
        kelvin = _to_kelvin(value, src)
        if kelvin < 0:
            raise ToolError("below absolute zero")
        return _from_kelvin(kelvin, dst)
    (src_dim, src_factor), (dst_dim, dst_factor) = LINEAR[src], LINEAR[dst]
    if src_dim != dst_dim:
        raise ToolError(f"cannot convert {src_dim} ({source}) to {dst_dim} ({target})")
    return value * src_factor / dst_factor


async def unit_convert(args: dict[str, Any]) -> dict[str, Any]:
    value = float(args["value"])
    if not math.isfinite(value):
        raise ToolError("value must be a finite number")
    result = convert(value, str(args["from_unit"]), str(args["to_unit"]))
    return {
        "value": value,
        "from_unit": args["from_unit"],
        "to_unit": args["to_unit"],
        "result": round(result, 10),
    }


TOOL = ToolDefinition(
    name="unit_convert",
    description="Convert a value between units of length, mass, volume or temperature (km to mi, F to C).",
    parameters={
        "type": "object",
        "properties": {
            "value": {"type": "number"},
            "from_unit": {"type": "string", "minLength": 1, "maxLength": 32},
            "to_unit": {"type": "string", "minLength": 1, "maxLength": 32},
        },
        "required": ["value", "from_unit", "to_unit"],
        "additionalProperties": False,
    },
    fn=unit_convert,
    timeout_s=1.0,
    cache_ttl_s=3600.0,
)
