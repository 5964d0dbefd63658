"""Built-in tools: safe arithmetic, units, clock, knowledge-base search, argument checks."""

from __future__ import annotations

import datetime as dt

import pytest

from services.tools.builtin import calculator, clock, kb_search, unit_convert
from services.tools.builtin.http_get import Allowlist, check_url
from services.tools.registry import ToolError, ToolRegistry


@pytest.mark.parametrize(
    ("expression", "result"),
    [("23*47", 1081), ("2 + 3 * (4 - 1)", 11), ("sqrt(16) + 2**10", 1028), ("7 / 2", 3.5), ("-(3 % 2)", -1)],
)
def test_calculator_evaluates(expression: str, result: float) -> None:
    assert calculator.evaluate(expression) == result


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "unknown function '__import__'"),
        ("__import__('os').system('true')", "only these functions may be called"),
        ("os", "unknown name 'os'"),
        ("().__class__.__bases__", "Attribute is not allowed"),
        ("open('/etc/passwd')", "unknown function 'open'"),
        ("'a' * 3", "Constant is not allowed"),
        ("[x for x in (1, 2)]", "ListComp is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("9**9**9", "exponent 387420489 is too large"),
        ("1/0", "division by zero"),
        ("2 +", "not a valid expression"),
        ("sqrt(-1)", "sqrt: math domain error"),
    ],
)
def test_calculator_rejects(expression: str, message: str) -> None:
    with pytest.raises(ToolError) as err:
        calculator.evaluate(expression)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("value", "src", "dst", "result"),
    [
        (10, "km", "mi", 6.2137119224),
        (212, "F", "celsius", 100),
        (1, "kg", "lb", 2.2046226218),
        (1, "gal", "l", 3.785411784),
    ],
)
def test_unit_convert(value: float, src: str, dst: str, result: float) -> None:
    assert unit_convert.convert(value, src, dst) == pytest.approx(result)


def test_unit_convert_rejects_mixed_dimensions() -> None:
    with pytest.raises(ToolError, match="cannot convert length"):
        unit_convert.convert(1, "km", "kg")
    with pytest.raises(ToolError, match="unknown unit 'parsec'"):
        unit_convert.convert(1, "parsec", "km")


async def test_clock_in_a_named_zone() -> None:
    fixed = dt.datetime(2026, 11, 29, 3, 4, 5, tzinfo=dt.UTC)
    tool = clock.make_tool(lambda: fixed)
    out = await tool.fn({"timezone": "Asia/Tokyo"})
    assert out["time"] == "12:04" and out["utc_offset"] == "+0900" and out["date"] == "2026-11-29"
    with pytest.raises(ToolError, match="unknown time zone 'Mars/Olympus'"):
        await tool.fn({"timezone": "Mars/Olympus"})


async def test_kb_search_finds_the_relevant_section() -> None:
    tool = kb_search.make_tool()
    out = await tool.fn({"query": "how big is a KV cache block on CPU?", "top_k": 2})
    assert out["results"][0]["title"] == "Prefix caching"
    assert "128 tokens" in out["results"][0]["text"]


def test_argument_errors_point_at_the_field() -> None:
    tool = unit_convert.TOOL
    problem = ToolRegistry.check_arguments(tool, {"value": "ten", "from_unit": "km", "to_unit": "mi"})
    assert problem is not None and problem.pointer == "/value"
    problem = ToolRegistry.check_arguments(tool, {"value": 1, "from_unit": "km"})
    assert problem is not None and problem.pointer == "/to_unit"
    problem = ToolRegistry.check_arguments(tool, {"value": 1, "from_unit": "km", "to_unit": "m", "x": 1})
    assert problem is not None and problem.pointer == "/x"
    assert ToolRegistry.check_arguments(tool, {"value": 1, "from_unit": "km", "to_unit": "m"}) is None


def test_http_allowlist_rules() -> None:
    allow = Allowlist(["127.0.0.1", "docs.example.com", "10.1.0.0/16"])
    assert check_url("http://127.0.0.1:8080/x", allow)
    assert check_url("https://docs.example.com/a", allow)
    for url, why in [
        ("http://evil.example.com/", "not on the allowlist"),
        ("http://127.0.0.2/", "not on the allowlist"),
        ("http://[::1]/", "not on the allowlist"),
        ("ftp://docs.example.com/", "only http and https"),
        ("http://user:pw@docs.example.com/", "credentials"),
        ("http://2130706433/", "not on the allowlist"),
    ]:
        with pytest.raises(ToolError, match=why):
            check_url(url, allow)
    import ipaddress

    assert allow.address_allowed(ipaddress.ip_address("10.1.2.3"))
    assert allow.address_allowed(ipaddress.ip_address("93.184.216.34"))  # public
    assert not allow.address_allowed(ipaddress.ip_address("169.254.169.254"))
    assert not allow.address_allowed(ipaddress.ip_address("192.168.1.1"))
