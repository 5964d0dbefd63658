"""Numbers as people write them, for the one-sentence summaries tools give of their results."""

from __future__ import annotations


def significant(value: float, digits: int = 10) -> str:
    """``value`` to ``digits`` significant digits without trailing zeros: "1081", "11.0231", "6.21371e-13"."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    rounded = float(f"{value:.{digits}g}")
    if rounded.is_integer() and abs(rounded) < 1e15:
        return str(int(rounded))
    return repr(rounded)
