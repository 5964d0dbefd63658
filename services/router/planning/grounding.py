"""Grounding, the last stage of planning: a filled call runs only if the conversation supports its values.

A small model asked to fill arguments invents values when the message does
not hold them (``10000001``; a time zone "US" for a message about e-mail; a
stock ask filled as ``1000*1000``). An invented value is never right, so such
a call is dropped and counted, never run. Two checks, neither naming a tool:

- **Numbers.** Every number in the arguments (JSON numbers, and numbers inside
  strings such as an expression) must be one the conversation states or
  implies (the language's ``numbers_in``: "twenty-five", "15%" as 0.15 and
  100, "half" as 2 and 0.5), or a constant the tool's own schema declares for
  a word the conversation uses (``hints.CONSTANTS_KEYWORD``: "week" grounds 7
  in "a week in hours"; a stock ask grounds no 1000). A JSON number may also
  be an identity (0, 1: a page, an offset); a number written into a string
  may not ("18+1" for a logged lunch is invented), nor be used more than once
  beyond the times the conversation writes it ("18+18+18"). A property whose
  name names a time unit also takes an amount written in another one,
  converted ("the last 2 hours" grounds ``since_minutes: 120``:
  ``quantities.py``).
- **Words.** A string argument that holds words must share one content word
  with the conversation (after the language folds case, plurals and adverbs),
  unless the schema fixes it (an ``enum`` or ``const``) or marks it as a date
  or time (``format``), which is composed by definition. A value equal to the
  property's ``default`` is the schema's own, never invented. A written message
  body shares words with the ask; a place or a name the user never said does
  not.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from services.router.planning.hints import CONSTANTS_KEYWORD
from services.router.planning.quantities import amounts, unit_of
from services.runtime.language import ENGLISH, Language
from services.runtime.numbers import NUMBER_TOKEN

#: Numbers a JSON number argument may be whatever the conversation says.
IDENTITIES: frozenset[float] = frozenset([0.0, 1.0])
#: String formats whose value is composed from the ask ("tomorrow" as a date), never copied.
_COMPOSED_FORMATS = frozenset({"date", "date-time", "time", "duration"})
_LETTERS = re.compile(r"[^\W\d_]", re.UNICODE)


def _values(value: Any, language: Language, *, written: bool) -> Iterable[float]:
    """Numbers in filled arguments: the JSON numbers, or (``written``) the numbers inside strings (expressions)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        if not written:
            yield abs(float(value))
    elif isinstance(value, str):
        if written:
            yield from language.number_values(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _values(v, language, written=written)
    elif isinstance(value, list):
        for v in value:
            yield from _values(v, language, written=written)


def grounded(*sources: str, constants: Iterable[float] = (), language: Language = ENGLISH) -> set[float]:
    """Every number the sources (message, context) ground, with the tool's ``constants``; not the identities,
    which ground a JSON number only (``_missing``)."""
    allowed = {float(c) for c in constants}
    for source in sources:
        allowed |= language.numbers_in(source)
    return allowed


def _schema(schema_json: str) -> dict[str, Any]:
    """The parsed schema (empty when it does not parse as an object)."""
    try:
        schema = json.loads(schema_json)
    except json.JSONDecodeError:
        return {}
    return schema if isinstance(schema, dict) else {}


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema's ``properties`` (empty when it has none)."""
    props = schema.get("properties", {})
    return props if isinstance(props, dict) else {}


def _said(sources: Sequence[str], language: Language) -> frozenset[str]:
    """The content words of the conversation, and the codes of the currencies it names ("euros" says EUR)."""
    codes = {code.lower() for s in sources for code in language.currency_codes(s)}
    return frozenset().union(codes, *(language.content_words(s) for s in sources))


def declared_constants(schema_json: str, *sources: str, language: Language = ENGLISH) -> frozenset[float]:
    """The numbers a tool's schema declares under ``hints.CONSTANTS_KEYWORD`` (on any property) whose words the
    sources use: ``{"week": [7, 52]}`` grounds 7 in "a week in hours"; the word ``"*"`` grounds its numbers in
    any message."""
    if CONSTANTS_KEYWORD not in schema_json:
        return frozenset()
    return _declared(_properties(_schema(schema_json)), _said(sources, language))


def _declared(props: dict[str, Any], said: frozenset[str]) -> frozenset[float]:
    out: set[float] = set()
    for prop in props.values():
        if isinstance(prop, dict):
            out |= _constants(prop.get(CONSTANTS_KEYWORD), said)
    return frozenset(out)


def constants_for(declared: object, *sources: str, language: Language = ENGLISH) -> frozenset[float]:
    """The numbers of one ``hints.CONSTANTS_KEYWORD`` value (word → numbers) whose words the sources use."""
    return _constants(declared, _said(sources, language))


def _constants(declared: object, said: frozenset[str]) -> frozenset[float]:
    if not isinstance(declared, dict):
        return frozenset()
    out: set[float] = set()
    for word, numbers in declared.items():
        if word in said | {"*"} and isinstance(numbers, list):
            out |= {float(n) for n in numbers if isinstance(n, (int, float)) and not isinstance(n, bool)}
    return frozenset(out)


def ungrounded(
    arguments: dict[str, Any], *sources: str, constants: Iterable[float] = (), language: Language = ENGLISH
) -> list[float]:
    """The numbers in ``arguments`` that neither the sources, the ``constants`` nor (for a JSON number) the
    identities ground."""
    allowed = grounded(*sources, constants=constants, language=language)
    return _missing(arguments, allowed, language)


def _missing(value: Any, allowed: set[float], language: Language) -> list[float]:
    """The numbers of ``value`` that ``allowed`` does not hold. A JSON number may also be an identity (a page,
    an offset); a number written into a string may not: an expression's "+1" nobody said was an invented value
    ("Log an 18 dollar lunch" filled as ``18+1``)."""
    plain = allowed | IDENTITIES
    return [n for n in _values(value, language, written=False) if not _close_to_any(n, plain)] + [
        n for n in _values(value, language, written=True) if not _close_to_any(n, allowed)
    ]


def _unsupported(value: Any, prop: object, said: frozenset[str], language: Language) -> str | None:
    """The first string of one argument (a string or a list of them) that holds words and shares none with the
    conversation's ``said``; None when there is none, or when the schema fixes the value (enum, const) or marks it
    a date or time."""
    if isinstance(prop, dict) and ("enum" in prop or "const" in prop or prop.get("format") in _COMPOSED_FORMATS):
        return None
    for text in value if isinstance(value, list) else [value]:
        if not isinstance(text, str) or not _LETTERS.search(text):
            continue
        mine = {w for w in language.content_words(text) if len(w) > 1} - {NUMBER_TOKEN}  # a lone letter says nothing
        if mine and not mine & said and not any(_near(w, said) for w in mine):
            return text
    return None


@dataclass(frozen=True)
class Grounded:
    """A filled call after grounding: its arguments (None: dropped), and the properties found invented."""

    arguments: dict[str, Any] | None
    invented: tuple[str, ...] = ()


def ground(arguments: dict[str, Any], schema_json: str, *sources: str, language: Language = ENGLISH) -> Grounded:
    """The call's arguments less the invented ones: an invented *optional* property is taken out (the tool's
    default applies: "next week" is no reason for a model's ``days: 7``), an invented required one drops the
    call. ``sources`` are the message, then the context the fill saw."""
    schema = _schema(schema_json)
    props = _properties(schema)
    said = _said(sources, language)
    constants = _declared(props, said) if CONSTANTS_KEYWORD in schema_json else frozenset()
    allowed = grounded(*sources, constants=constants, language=language)
    words = said - {NUMBER_TOKEN}
    invented: dict[str, str] = {}
    for name, value in arguments.items():
        prop = props.get(name)
        if isinstance(prop, dict) and "default" in prop and value == prop["default"]:
            continue  # the schema's own value ("UTC" for a time asked of no place): never invented
        own = allowed
        if isinstance(prop, dict) and unit_of(name, language):  # "2 hours" grounds 120 for ``since_minutes``
            own = allowed | {float(v) for v in amounts(name, prop, sources, language)}
        missing = _missing(value, own, language)
        if missing:
            invented[name] = f"{name}: {', '.join(map(_plain, missing))} not in the conversation"
        elif repeated := _repeated(value, sources, constants, language):
            invented[name] = f"{name}: {', '.join(map(_plain, repeated))} used more often than the conversation has it"
        elif (text := _unsupported(value, prop, words, language)) is not None:
            invented[name] = f"{name}: {text!r} shares no word with the conversation"
    if not invented:
        return Grounded(arguments)
    required = schema.get("required", [])
    reasons = tuple(invented.values())
    if isinstance(required, list) and set(required) & invented.keys():
        return Grounded(None, reasons)
    return Grounded({k: v for k, v in arguments.items() if k not in invented}, reasons)


def _repeated(value: Any, sources: Sequence[str], constants: Iterable[float], language: Language) -> list[float]:
    """The numbers written into ``value``'s strings more than once beyond the times the sources write them
    (a tool's constants aside).

    Why: given a message with one number and no arithmetic in it, the 135M model composed one anyway by
    repeating it ("Log an 18 dollar lunch" as ``18+18+18``; "deals worth at least 50000" as
    ``50000-50000*50000``; "500 euros in Swiss francs" as ``500-500``). Once more than stated is allowed beside
    another number: a price and its tax ("80 + 80*0.15") use it twice.
    """
    used = Counter(_values(value, language, written=True))
    if not used:
        return []
    stated = Counter(n for s in sources for n in language.number_values(s))
    free = {float(c) for c in constants}
    extra = 1 if len(used) > 1 else 0
    return [n for n, k in used.items() if n not in free and k > max(stated[n], 1) + extra]


def _near(word: str, said: frozenset[str]) -> bool:
    """Whether ``word`` and a word of the conversation share a stem of five letters ("booking", "booked")."""
    return len(word) >= 5 and any(len(s) >= 5 and s[:5] == word[:5] for s in said)


def number_pattern(*sources: str, constants: Sequence[float] = (), language: Language = ENGLISH) -> str | None:
    """A regular expression (no anchors) for the amounts the sources state, as written ("2.50", "1,450") and in
    plain notation ("2.5", "1450", "0.15" for "15%"), and the ``constants``; None when the sources state none.

    Why: a composed argument (an expression) is held to it by the fill's grammar, so the model cannot write a
    number nobody gave; asked for the area of "7 m by 9 m" the 135M model wrote ``5*9``, which the check above
    then dropped, leaving the turn with no tool at all. A date, a time or an id states no amount to compute
    with (``Language.amount_text``: a lunch "dated 2026-12-04" was composed as ``38.50+2026-12-04``), and a
    constant only scales an amount stated ("a week in hours" is ``7*24``; "so far this month" was ``12``).
    """
    amounts = [language.amount_text(source) for source in sources]
    literals = {_plain(v) for v in grounded(*amounts, language=language)}
    for source in amounts:
        literals |= set(language.numbers_written(source))
    if not literals and not any(unit for amount in amounts for _, unit in language.quantities(amount)):
        return None  # neither a number nor a unit counted ("a week", which the constants then scale)
    literals |= {_plain(float(c)) for c in constants}
    return "(?:" + "|".join(re.escape(n) for n in sorted(literals, key=lambda n: (-len(n), n))) + ")"


def _plain(value: float) -> str:
    """``value`` in plain decimal notation: 60, 0.15, 1000000."""
    value = abs(value)
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.12f}".rstrip("0").rstrip(".")


def _close_to_any(number: float, allowed: Iterable[float]) -> bool:
    return any(abs(number - a) <= 1e-9 * max(1.0, abs(a)) for a in allowed)
