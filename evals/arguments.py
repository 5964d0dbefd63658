"""Arguments scored by meaning: the expression's value, the units after the tool's own alias table,
the time zone as the clock resolves it, a shared keyword, the URL.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from evals.cases import ARG_FIELDS, is_number
from services.tools.builtin import unit_convert
from services.tools.builtin.calculator import evaluate
from services.tools.builtin.clock import resolve_zone
from services.tools.builtin.kb_search import words
from services.tools.registry import ToolError

#: The tools whose arguments are compared by their own meaning; any other (the catalog's) generically.
BUILTIN_ARGUMENTS = frozenset(ARG_FIELDS)
#: Argument values are exact up to float noise ("15/100*80" is 12.000000000000002).
ARG_REL_TOL = 1e-6
#: A number stated in an answer may be rounded: "11.02" for 11.0231.
ANSWER_REL_TOL = 1e-3


def numbers_close(a: float, b: float, rel_tol: float = ANSWER_REL_TOL) -> bool:
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-9)


def normalise_unit(name: str) -> str:
    """A unit as the unit_convert tool reads it (its own alias table: "kilograms" is "kg").

    A unit the tool does not know keeps a plain form (lower case, single
    spaces, no plural "s"), so an unsupported unit can still be expected.
    """
    try:
        return unit_convert.unit(name).name
    except ToolError:
        return " ".join(name.lower().split()).removesuffix("s")


def normalise_zone(name: str) -> str:
    """A time zone as the clock tool resolves it ("tokyo" is Asia/Tokyo); unknown names stay as written."""
    try:
        return resolve_zone(name.strip()).key
    except ToolError:
        return name.strip()


def normalise_url(url: str) -> str:
    """Scheme and host are case-insensitive and a bare host is the same page as host + "/"."""
    parts = urlsplit(url.strip())
    path = "" if parts.path == "/" else parts.path
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def _accepted(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _same(expected: Any, actual: Any) -> bool:
    """A catalog tool's scalar: strings case- and space-insensitive, numbers numerically, booleans exactly."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if is_number(expected):
        if isinstance(actual, str):
            try:
                actual = float(actual.replace(",", ""))
            except ValueError:
                return False
        return is_number(actual) and numbers_close(float(actual), float(expected), ARG_REL_TOL)
    if isinstance(expected, str):
        flat = " ".join(str(actual).split()).casefold() if isinstance(actual, (str, int, float)) else None
        return flat == " ".join(expected.split()).casefold()
    return False


def check_generic(expected: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """A catalog tool's arguments: each expected parameter holds its value, one of ``any_of``, ``contains``, or,
    for a list, exactly the listed items in any order."""
    for name, want in expected.items():
        got = arguments.get(name)
        if isinstance(want, list):
            same = isinstance(got, list) and len(got) == len(want) and all(any(_same(w, g) for g in got) for w in want)
            if not same:
                return f"{name}={got!r}, expected the items {want!r}"
        elif isinstance(want, dict) and "contains" in want:
            if not isinstance(got, str) or want["contains"].casefold() not in got.casefold():
                return f"{name}={got!r} does not contain {want['contains']!r}"
        elif isinstance(want, dict) and "any_of" in want:
            if not any(_same(w, got) for w in want["any_of"]):
                return f"{name}={got!r}, expected one of {want['any_of']!r}"
        elif not _same(want, got):
            return f"{name}={got!r}, expected {want!r}"
    return None


def check_arguments(tool: str, expected: Mapping[str, Any], arguments: Mapping[str, Any] | None) -> str | None:
    """None when the call's arguments mean what ``expected`` says; otherwise why not."""
    if arguments is None:
        return "arguments are not a JSON object"
    if tool not in BUILTIN_ARGUMENTS:
        return check_generic(expected, arguments)
    if tool == "calculator":
        expression = arguments.get("expression")
        if not isinstance(expression, str):
            return "no expression"
        try:
            result = evaluate(expression)
        except Exception as exc:  # anything the tool would refuse is a wrong argument
            return f"{expression!r} does not evaluate ({exc})"
        if not numbers_close(float(result), float(expected["result"]), ARG_REL_TOL):
            return f"{expression!r} = {result}, expected {expected['result']}"
        return None
    if tool == "unit_convert":
        value, source, target = arguments.get("value"), arguments.get("from_unit"), arguments.get("to_unit")
        if isinstance(arguments.get("quantity"), str):  # the tool's schema: "3 gallons", read as the tool reads it
            try:
                value, source = unit_convert.parse_quantity(arguments["quantity"])
            except ToolError as exc:
                return f"quantity {arguments['quantity']!r} does not parse ({exc})"
        problems = []
        if not is_number(value) or not numbers_close(float(value), float(expected["value"]), ARG_REL_TOL):
            problems.append(f"value {value!r}, expected {expected['value']}")
        for name, got, want in (("from_unit", source, expected["from_unit"]), ("to_unit", target, expected["to_unit"])):
            if not isinstance(got, str) or normalise_unit(got) not in {normalise_unit(u) for u in _accepted(want)}:
                problems.append(f"{name} {got!r}, expected {want!r}")
        return "; ".join(problems) or None
    if tool == "clock":
        zone = arguments.get("timezone")
        accepted = {normalise_zone(z) for z in _accepted(expected["timezone"])}
        if not isinstance(zone, str) or normalise_zone(zone) not in accepted:
            return f"timezone {zone!r}, expected {expected['timezone']!r}"
        return None
    if tool == "kb_search":
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return "empty query"
        terms = words(query)
        if not any(term.startswith(keyword) for term in terms for keyword in expected["keywords"]):
            return f"query {query!r} shares no keyword with {expected['keywords']}"
        return None
    if tool == "http_get":
        url = arguments.get("url")
        if not isinstance(url, str) or normalise_url(url) != normalise_url(expected["url"]):
            return f"url {url!r}, expected {expected['url']!r}"
        return None
    return f"no argument check for tool {tool!r}"
