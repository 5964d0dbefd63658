"""calculator: arithmetic on a safe expression parser (Python's ast, a strict whitelist; no eval).

Numbers, + - * / // % **, unary +/-, parentheses, and a few functions
(sqrt, avg/mean, abs, round, min, max, floor, ceil, log, sin, cos, tan) and constants
(pi, e). Names, attributes, calls to anything else, subscripts, strings and
comprehensions are rejected with a clear message. Exponents and results are
bounded so "9**9**9" cannot eat the CPU.

Before parsing, the way people (and small models) write arithmetic is
rewritten into Python, so "2 to the power of 10", "half of 10", "2^10",
"15% of 80", "twelve times eleven", "average of 3, 4 and 8", "what percent of
60 is 45", "minutes in a week" and "1,234 × 2" work (the wording in ``math_words.py``):

- ``^`` is power (never XOR), ``×``/``·`` multiply, ``÷`` divides, ``−`` is minus;
  a currency sign before an amount is dropped ("18% of $50").
- ``%`` right after a number is a **percent sign** when what follows it is
  not an operand: the end, ``)``, ``,``, an operator (``+ - * / ^ %``) or
  the word ``of``. Then ``N%`` means ``(N/100)`` and ``N% of X`` means
  ``(N/100)*X``: "15%*80" = "15% of 80" = 12. Otherwise ``%`` is modulo:
  "7 % 3" = 1. So a modulo by a negative number needs parentheses,
  "7 % (-3)", and "80 + 15%" is 80.15 (a percent is just a number; write
  "80 + 15% of 80" for the shop-till meaning).
- Commas inside numbers ("1,234,567") are thousands separators only when the
  expression calls no function; with a call ("max(1,234)") every comma
  separates arguments, because there the two readings really do collide.

Results are rounded to 15 significant digits, so float noise ("0.1+0.2")
never reaches the user, and a float that is a whole number comes back as an
int. ``summarize`` states "<expression> = <result>." with at most 10
significant digits.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from services.runtime.numbers import significant
from services.tools.builtin.math_words import arithmetic_pattern, rewrite
from services.tools.registry import ToolDefinition, ToolError, ToolExample

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


def _mean(*values: Any) -> Any:
    if not values:
        raise ValueError("needs at least one number")
    return math.fsum(values) / len(values)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "avg": _mean,
    "mean": _mean,
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
#: What an expression the router's model composes must be: operands joined by operators, or one function call
#: ("round(84/3, 2)"). An operand is an amount the conversation grounds (the router fills in ``{number}``), with
#: its currency or percent sign, or pi, or a function of such arithmetic; signed and parenthesised or not. A
#: function is written with its parenthesis and an operand after it (bare names let the model run
#: "mintanroundof" to its token limit; names alone, "round(round(round(…"). There is an operation: a lone amount
#: ("50,000" for "deals worth at least 50,000") or a lone sign ("$") computes nothing. Something other than a
#: digit stands between two numbers (the tool itself also reads worded arithmetic, which the router copies from
#: the message; kept from "of", the model repeated "18%" to its token limit).
_AMOUNT = r"\$?{number}%?"
_OPERATOR = r"(?: *(?:[-+*/%^]|\*\*|//) *| of )"
_TERM = rf"\(*-?(?:{_AMOUNT}|pi)\)*"
_ARITHMETIC = rf"{_TERM}(?:{_OPERATOR}{_TERM})*"
_FUNCTION_CALL = "(?:" + "|".join(FUNCTIONS) + rf")\({_ARITHMETIC}(?:, *{_ARITHMETIC})*\)"
_OPERAND = rf"\(*-?(?:{_AMOUNT}|pi|{_FUNCTION_CALL})\)*"
COMPOSED = rf"^ *(?:{_OPERAND}(?:{_OPERATOR}{_OPERAND})+|{_FUNCTION_CALL}) *$"


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


_SYMBOLS = str.maketrans({"×": "*", "·": "*", "÷": "/", "−": "-", "^": "**"})
#: A currency sign before an amount ("$50", "€ 12.5"): the amount is the number.
_CURRENCY = re.compile(r"[$€£¥](?=\s*[\d.])")
_CALL = re.compile(r"[A-Za-z_]\w*\s*\(")
_THOUSANDS = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w,])")
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_PERCENT = re.compile(rf"(?<![\w.])({_NUMBER})\s*%(?=\s*(?:of\b|[-+*/%),]|$))(\s*of\b)?")


def normalize(expression: str) -> str:
    """Rewrite everyday wording (``math_words``) and notation into Python arithmetic (the rules are in the
    module docstring)."""
    text = rewrite(_CURRENCY.sub("", expression)).translate(_SYMBOLS)
    if not _CALL.search(text):
        text = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), text)
    return _PERCENT.sub(lambda m: f"({m.group(1)}/100)" + ("*" if m.group(2) else ""), text)


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely (see module docstring)."""
    if len(expression) > MAX_EXPRESSION:
        raise ToolError(f"the expression is longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(normalize(expression), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not a valid expression: {exc.msg}") from None
    value = _eval(tree)
    if isinstance(value, float):
        value = float(f"{value:.15g}")
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
    return value  # type: ignore[no-any-return]


def summarize(output: Any) -> str:
    """'23*47 = 1081.' from the tool's output; empty when the output is not the calculator's."""
    if not isinstance(output, dict):
        return ""
    expression, result = output.get("expression"), output.get("result")
    if not isinstance(expression, str) or isinstance(result, bool) or not isinstance(result, (int, float)):
        return ""
    return f"{expression.strip()} = {significant(result)}."


async def calculator(args: dict[str, Any]) -> dict[str, Any]:
    expression = str(args["expression"])
    return {"expression": expression, "result": evaluate(expression)}


def _ex(text: str, expression: str | None = None) -> ToolExample:
    return ToolExample(text, None if expression is None else {"expression": expression})


# Worded arithmetic is copied as worded ("half of 10", "12 squared", "minutes are in 3 hours"): the tool reads
# it (math_words.py), and a small model copies far more reliably than it translates ("3 cubed" came back as
# "3*3" when the examples showed "12**2"). The composed examples are what a small model gets wrong: word
# problems, averages of a list, discounts, rates. Follow-ups ("that result") carry no arguments because those
# depend on the conversation, not on the message.
EXAMPLES = (
    _ex("What is 23*47?", "23*47"),
    _ex("whats 9876 minus 1234", "9876 minus 1234"),
    _ex("Can you multiply 56 by 12 for me?", "multiply 56 by 12"),
    _ex("How much is 150 divided by 6?", "150 divided by 6"),
    _ex("add 17.5 and 4.25", "17.5+4.25"),
    _ex("calculate (12 + 8) * 3", "(12+8)*3"),
    _ex("What's half of 10?", "half of 10"),
    _ex("What's 15% of 80?", "15% of 80"),
    _ex("what is 7 percent of 250", "7% of 250"),
    _ex("How much is a $60 jacket with 20% off?", "60-20% of 60"),
    _ex("How many minutes are in 3 hours?", "minutes are in 3 hours"),
    _ex("how many seconds in a day", "seconds in a day"),
    _ex("What's seven times six?", "seven times six"),
    _ex("What percent of 80 is 20?", "percent of 80 is 20"),
    _ex("2 to the power of 10", "2 to the power of 10"),
    _ex("what is 2^16", "2^16"),
    _ex("What is the square root of 144?", "square root of 144"),
    _ex("Compute 3 squared plus 4 squared.", "3 squared plus 4 squared"),
    _ex("What's the remainder when 17 is divided by 5?", "17 % 5"),
    _ex("If I buy 3 notebooks at $4.50 each, how much do I spend?", "3*4.50"),
    _ex("I had 120 apples and gave away 45. How many are left?", "120-45"),
    _ex("Split an $84 bill between 4 people", "84/4"),
    _ex("Dinner came to $90 for the 3 of us. How much does each person pay?", "90/3"),
    _ex("What's the average of 12 and 20?", "average of 12 and 20"),
    _ex("My scores were 70, 85 and 91. What is my average?", "avg(70, 85, 91)"),
    _ex("I bought 2 sandwiches at $6.25 each and a drink for $1.75. What was the total?", "2*6.25+1.75"),
    _ex("A $80 dress is 30% off. What's the sale price?", "80-30% of 80"),
    _ex("My $900 rent is going up by 5%. What will I pay after the rise?", "900+5% of 900"),
    _ex("I pay $40 a week for groceries. How much is that in a year?", "40*52"),
    _ex("round 3.14159 to 2 decimal places", "round(3.14159, 2)"),
    _ex("What's 1,250 times 4?", "1,250 times 4"),
    _ex("What is 345 plus 678?", "345 plus 678"),
    _ex("subtract 19 from 100", "100-19"),
    _ex("What's 8 times 7?", "8 times 7"),
    _ex("17 * 23 = ?", "17*23"),
    _ex("sum of 45, 30 and 25", "45+30+25"),
    _ex("what's 12 squared", "12 squared"),
    _ex("Calculate the area of a 5 by 8 rectangle", "5*8"),
    _ex("A car drives 60 miles per hour for 2.5 hours. How far does it go?", "60*2.5"),
    _ex("how much is 1000 divided by 8", "1000 divided by 8"),
    _ex("what's 5+3", "5+3"),
    _ex("If each box holds 12 eggs, how many eggs are in 7 boxes?", "12*7"),
    # Word problems of two steps, one of each shape: the fill copies the nearest one's shape.
    _ex("Lunch was $48 plus a $12 tip, shared by 3 friends. What does each pay?", "(48+12)/3"),
    _ex("A $90 coat is 20% off and I also buy a $10 scarf. What's my total?", "90-20% of 90+10"),
    _ex("My gym is $50 a month and a cheaper one is $35 a month. What do I save in 12 months?", "(50-35)*12"),
    _ex("I paid with a $20 bill for 3 drinks at $4.50 each. What change do I get?", "20-3*4.50"),
    _ex("A 3 kg bag of flour costs $7.20. What is the price per kg?", "7.20/3"),
    _ex("A garden is 6.5 m long and 4 m wide. What is its area in square meters?", "6.5*4"),
    _ex("Three friends rent a boat for 2 hours at $45 an hour plus a $15 fee. What does each owe?", "(2*45+15)/3"),
    _ex("5 tickets at $30 each, with 10% off the whole order. What do I pay?", "5*30-10% of (5*30)"),
    _ex("The drive is 300 km and my car uses 8 litres per 100 km. How many litres is that?", "300/100*8"),
    _ex("Anna has $500. Ben has $320 and gets $50 more. How much more does Anna have?", "500-(320+50)"),
    _ex("Now add 6 to that result."),
    _ex("multiply that by 3"),
)

NEGATIVE_EXAMPLES = (
    "Explain what multiplication is",
    "Who invented algebra?",
    "Write a poem about numbers",
    "Why is dividing by zero undefined?",
    "Teach me how long division works",
    "What's your favourite number?",
    "Tell me a fun fact about prime numbers",
    "What is the history of the number zero?",
    "Is 7 a lucky number?",
    "Why are there 60 minutes in an hour?",
    "Convert 5 km to miles",
    "What time is it in Tokyo?",
)

#: Spans that are arithmetic in shape and evidence of an ask for it: all but numbers joined by bare hyphens.
EVIDENT_SHAPE = r"(?!\d[\d,.]*(?:-\d[\d,.]*)+$).+"

#: The unit arithmetic an expression may need beyond the message's own numbers, by the words that call for it.
UNIT_CONSTANTS: dict[str, list[float]] = {
    # An average of two ("the mean of 3 and 5" is (3+5)/2). No number is allowed for every message: a "2" or a
    # "100" the message did not call for was an invented value ("Log an 18 dollar lunch" filled as 18+1+2).
    "average": [2],
    "mean": [2],
    "midpoint": [2],
    "halfway": [2],
    "second": [60, 3600, 86400],
    "minute": [60, 1440],
    "hour": [24, 60, 3600],
    "day": [7, 24, 365, 366, 1440, 86400],
    "daily": [7, 30, 365],
    "week": [7, 52],
    "weekly": [52],
    "fortnight": [14],
    "month": [12, 30],
    "monthly": [12],
    "year": [12, 52, 365, 366],
    "annual": [12, 52, 365],
    "yearly": [12, 52, 365],
    "decade": [10],
    "century": [100],
    "thousand": [1000],
    "million": [1000],
    "kilo": [1000],
    "km": [1000],
    "kg": [1000],
    "gram": [1000],
    "meter": [100, 1000],
    "metre": [100, 1000],
    "litre": [1000],
    "liter": [1000],
    "byte": [1024, 1000],
    "kb": [1024, 1000],
    "mb": [1024, 1000],
    "gb": [1024, 1000],
    "cent": [100],
    "dozen": [12],
    "foot": [12],
    "feet": [12],
    "inch": [12],
}

TOOL = ToolDefinition(
    name="calculator",
    description="Evaluate an arithmetic expression, e.g. '23*47', '15% of 80' or 'sqrt(2)*(3+4)'.",
    parameters={
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_EXPRESSION,
                "description": "the arithmetic to evaluate, written with the message's numbers",
                # Copied when the message holds the expression itself ("7 times 8 minus 5"); composed otherwise.
                "x-agentmesh-copy": arithmetic_pattern(),
                "x-agentmesh-copy-words": 12,
                "x-agentmesh-copy-context": False,  # an earlier turn's expression was the earlier ask
                # "twelve times eleven" in a message is arithmetic to do; numbers joined by bare hyphens are not
                # evidence of it: "order 88-2201", "2026-08-01" and "pages 10-12" are that shape too.
                "x-agentmesh-copy-evident": EVIDENT_SHAPE,
                # Composed, it is notation: the 135M model wrote "12 weeks x $15 per week = $15".
                "x-agentmesh-compose-pattern": COMPOSED,
                # Numbers an expression may use that the message need not write, each with the words that
                # ground it ("a week in hours" is 7*24); "*": any message.
                "x-agentmesh-constants": UNIT_CONSTANTS,
            }
        },
        "required": ["expression"],
        "additionalProperties": False,
    },
    fn=calculator,
    timeout_s=1.0,
    cache_ttl_s=3600.0,
    examples=EXAMPLES,
    negative_examples=NEGATIVE_EXAMPLES,
    summarize=summarize,
)
