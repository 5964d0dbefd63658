"""An HTTP request body's bytes → a JSON value the edge's validation can walk without tripping.

Python's ``json`` is more lenient than JSON: it takes ``NaN`` and ``Infinity``, turns ``1e999`` into an
infinite float, keeps lone UTF-16 surrogates (``"\\ud800"``) as ``str`` that no protobuf can encode, and
nests as deep as the interpreter's stack (then raises ``RecursionError``). Each of these reached a 500
once. Here they become ``InvalidArgument`` (400): not JSON at all (``param`` empty, as OpenAI answers), or
a value that is JSON but that the mesh will not carry (``param`` the field's path, ``messages[0].content``).
JSON is read as UTF-8 whatever the ``Content-Type`` charset says (RFC 8259 §8.1).
"""

from __future__ import annotations

import json
from typing import Any

from services.runtime.errors import InvalidArgument

#: Deeper than any tool schema a framework generates (pydantic's nest a few levels per model).
MAX_DEPTH = 64


def decode_body(raw: bytes) -> Any:
    """The JSON value of ``raw`` (see the module docstring for what is refused)."""
    try:
        value = json.loads(raw, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise InvalidArgument(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, and int() past its digit limit
        raise InvalidArgument(f"the request body is not valid JSON: {exc}") from None
    check_value(value)
    return value


def check_value(value: Any) -> None:
    """Refuse nesting past ``MAX_DEPTH`` and strings (keys too) that are not valid Unicode, naming the place."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            if len(path) >= MAX_DEPTH:
                raise _bad(path, f"nested deeper than {MAX_DEPTH} levels")
            for key, child in item.items():
                if not _encodable(key):
                    raise _bad(path, "a key is not valid Unicode (a lone UTF-16 surrogate)")
                stack.append((child, (*path, key)))
        elif isinstance(item, list):
            if len(path) >= MAX_DEPTH:
                raise _bad(path, f"nested deeper than {MAX_DEPTH} levels")
            stack.extend((child, (*path, i)) for i, child in enumerate(item))
        elif isinstance(item, str) and not _encodable(item):
            raise _bad(path, "not valid Unicode (a lone UTF-16 surrogate)")


def field_path(path: tuple[str | int, ...]) -> str:
    """``("messages", 2, "content")`` → ``messages[2].content``, as OpenAI names fields."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
    return out


def _bad(path: tuple[str | int, ...], description: str) -> InvalidArgument:
    if not path:
        return InvalidArgument(f"the request body is {description}")
    return InvalidArgument.field(field_path(path), description)


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is out of range")
    return value
