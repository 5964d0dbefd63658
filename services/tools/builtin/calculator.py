"""calculator: arithmetic on a safe expression parser (Python's ast, a strict whitelist; no eval).

Numbers, + - * / // % **, unary +/-, parentheses, and a few functions
(sqrt, abs, round, min, max, floor, ceil, log, sin, cos, tan) and constants
(pi, e). Names, attributes, calls to anything else, subscripts, strings and
comprehensions are rejected with a clear message. Exponents and results are
bounded so "9**9**9" cannot eat the CPU.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from services.tools.registry import ToolDefinition, ToolError

MAX_EXPRESSION = 500
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e300

BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "floor": math.floor,
    "ceil": math.ceil,
    "log": math.log,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
CONSTANTS = {"pi": math.pi, "e": math.e}


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolError(f"exponent {right} is too large (at most {MAX_EXPONENT})")
        try:
            value = BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ToolError("division by zero") from None
        except OverflowError:
            raise ToolError("the result is too large") from None
        if isinstance(value, complex):
            raise ToolError("the result is not a real number")
        if abs(value) > MAX_MAGNITUDE:
            raise ToolError("the result is too large")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
    ):
        args = [_eval(a) for a in node.args]
        try:
            return FUNCTIONS[node.func.id](*args)
        except (ValueError, TypeError) as exc:
            raise ToolError(f"{node.func.id}: {exc}") from None
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id not in FUNCTIONS:
            raise ToolError(f"unknown function {node.func.id!r}; allowed: {', '.join(FUNCTIONS)}")
        raise ToolError(f"only these functions may be called, with positional arguments: {', '.join(FUNCTIONS)}")
    if isinstance(node, ast.Name):
        raise ToolError(f"unknown name {node.id!r}")
    raise ToolError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely (see module docstring)."""
    if len(expression) > MAX_EXPRESSION:
        raise ToolError(f"the expression is longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not a valid expression: {exc.msg}") from None
    value = _eval(tree)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value  # type: ignore[no-any-return]


async def calculator(args: dict[str, Any]) -> dict[str, Any]:
    expression = str(args["expression"])
    return {"expression": expression, "result": evaluate(expression)}


TOOL = ToolDefinition(
    name="calculator",
    description="Evaluate an arithmetic expression, e.g. '23*47' or 'sqrt(2)*(3+4)'.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": MAX_EXPRESSION}},
        "required": ["expression"],
        "additionalProperties": False,
    },
    fn=calculator,
    timeout_s=1.0,
    cache_ttl_s=3600.0,
)
