"""The lengths of the time units, in seconds: one table for the tools and the router.

The unit converter (``services/tools/builtin/units.py``), the calculator's
counting words (``math_words.py``: "minutes in 3 hours") and planning (a
property that names its unit, ``since_minutes``, given "the last 2 hours") all
convert time; each used to keep its own table. Only units of a fixed length
are here: a month has none, and a year is 365 or 365.25 days depending on who
counts (the converter refuses it; the counting words state their convention).
How the units are spelled is the language's (``services.runtime.language``).
"""

from __future__ import annotations

SECONDS: dict[str, float] = {
    "millisecond": 0.001,
    "second": 1.0,
    "minute": 60.0,
    "hour": 3600.0,
    "day": 86400.0,
    "week": 604800.0,
    "fortnight": 1209600.0,
}


def in_unit(value: float, unit: str, target: str) -> float:
    """``value`` ``unit``s in ``target``s (both keys of ``SECONDS``): 2 hours are 120 minutes."""
    return value * SECONDS[unit] / SECONDS[target]


__all__ = ["SECONDS", "in_unit"]
